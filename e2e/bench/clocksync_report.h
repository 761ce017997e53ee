// Results of the clock-sync testbed: one per scenario, printed as a table and
// summed up in ONE JSON line (headline = scenario b, else a, else the first).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "clocksync_chrony.h"
#include "clocksync_score.h"

namespace lockstep::bench {

struct ScenarioResult {
  std::string scenario;  // e.g. "b_asym_bursty_load"
  int nodes = 0;
  size_t rounds = 0;
  PairScore pairs;
  std::optional<std::pair<std::string, std::string>> worst_pair;  // host names
  std::optional<ChronyScore> chrony;  // unless --no-chrony
  std::optional<double> pure_probe_fraction, pure_probe_fraction_min;
  std::optional<double> agent_cpu_percent, probe_kbps_per_node, probe_pkts_per_s_per_node;
  std::vector<std::string> non_locked_states_seen;  // "h3:HOLDOVER"
  double measure_s = 0;
  // One rule for both systems: a sample counts when its system says it is
  // synchronised (Lockstep: LOCKED or HOLDOVER; chrony: synchronised leap
  // status), both from the window's start; each one's other samples counted.
  size_t unsynced_samples = 0;  // Lockstep samples in the window in FREERUN
  // Time to first sync, each from its own daemon's start: Lockstep's to
  // LOCKED, chrony's to its first synchronised tracking (c: the late host;
  // else the slowest initial host, chrony's server excluded).
  std::optional<double> time_to_locked_s;
  std::optional<double> chrony_time_to_first_sync_s;
  std::string note;
  // --fabric: the agents also ran fabric failover probing on every rail.
  bool fabric = false;
  std::optional<double> fabric_probe_pkts_per_s_per_node;  // fabric probes + ack-only packets sent
  std::optional<double> fabric_route_changes;              // failover route changes, summed over the agents
  std::optional<double> fabric_misses;                     // fabric probes without an ack, summed
  std::optional<int> fabric_paths, fabric_paths_up;        // the scored agents' paths at the end, and those up
  std::optional<int> fabric_path_downs;  // path transitions to "down" during the measurement (agent logs), summed
  // Scenario b only.
  std::optional<double> shaped_link_mbit;
  std::optional<std::vector<std::string>> probe_directions_through_shaped_link;
};

// The scenarios that ran, in run order (c a b e d).
std::vector<char> RunOrder(const std::map<char, ScenarioResult>& results);

nlohmann::ordered_json ToJson(const ScenarioResult& r);
std::string Table(const ScenarioResult& r);
// The one JSON line: headline figures at the top level, every scenario in "scenarios".
// asymmetry_allowance_ns: what the agents add to every bound (the scoring is
// made with it, so 0 scores the bare estimate).
nlohmann::ordered_json Summary(const std::map<char, ScenarioResult>& results, double wall_s,
                               double asymmetry_allowance_ns = 0);
// --check: what fails (empty: passed).
std::vector<std::string> CheckFailures(const std::map<char, ScenarioResult>& results, double max_violation_fraction);

}  // namespace lockstep::bench
