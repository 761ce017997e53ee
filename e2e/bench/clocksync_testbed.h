// The clock-sync testbed: a netlab fabric, one lockstep-agent per host
// namespace on a virtual clock, and beside it real chrony (one chronyd -x per
// host namespace: one server, the rest clients), sampling of the agents'
// /status, chrony's tracking and counters. Single-threaded; not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "clocksync_http.h"
#include "clocksync_proc.h"
#include "clocksync_random.h"
#include "clocksync_report.h"
#include "clocksync_score.h"

namespace lockstep::bench {

struct Options {
  int hosts = 8;
  std::string name = "csbench";
  std::string scenarios = "cabed";
  uint64_t seed = 1;
  double measure_s = 20, short_measure_s = 8, sample_ms = 200;
  double late_join_s = 10, lock_timeout_s = 40, link_down_s = 4;
  double settle_s = 0;  // wait after everyone is LOCKED, before the first measurement
  double asymmetry_allowance_ns = 0;  // the agents' clockSync.asymmetryAllowanceNs
  bool chrony = true;                 // run real chrony beside the agents
  bool fabric = false;                // agents also run fabric failover probing on every rail
  int chrony_server = 0;              // host index of the chrony server
  int chrony_poll = -4;               // minpoll = maxpoll (log2 s): -4 = 16 Hz
  double chrony_sample_ms = 500;      // chronyc tracking period per host
  double shape_mbit = 50, load_fraction = 0.8, burst_ms = 5, load_warmup_s = 4;
  int interval_ms = 20, peers_per_node = 16;
  double wander = 10;
  std::string work_dir;
  bool check = false;
  double max_violation_fraction = 0;
  bool Has(char scenario) const { return scenarios.find(scenario) != std::string::npos; }
};

// Where the tools are (see Locate in clocksync_testbed.cc).
struct Tools {
  std::string netlab, agent, build_dir;
  std::string chronyd, chronyc;  // empty unless Options::chrony
  std::string Loadgen() const;  // Die if missing
};
Tools LocateTools(bool chrony);

// Counters at one instant, for rates over a measurement.
struct Snapshot {
  double t = 0;
  std::map<int, double> cpu_s;                          // agent CPU seconds
  std::map<int, double> tx_bytes;                       // rail0 tx bytes of the host
  std::map<int, std::map<std::string, double>> metrics;  // agent /metrics
};

// Fabric paths of some agents (their GET /fabric), --fabric only.
struct FabricPaths {
  int agents = 0;        // agents that answered
  int paths = 0, up = 0;  // their paths, those in state "up"
  int delivering = 0;     // up, suspect (a miss or two) or recovering (acked again, held down)
  std::vector<std::string> not_up;  // "h3->h5 rail0: down"
};

// Something to do at `at_s` seconds into a measurement.
struct Event {
  double at_s = 0;
  std::function<void()> run;
};

class Testbed {
 public:
  Testbed(const Options& opts, Tools tools);
  ~Testbed();

  std::map<char, ScenarioResult> Run();  // scenarios.cc
  void Teardown();
  const std::string& work() const { return work_; }

 private:
  // fabric
  void Up();
  std::string NetlabCmd(const std::vector<std::string>& args, bool check = true);
  // agents
  void WriteConfigs();
  void StartAgent(int i);
  bool AgentAlive(int i);
  void CheckAlive(const std::vector<int>& idx);
  // chrony (clocksync_chrony_run.cc)
  void StartChrony(int i);
  void StopChrony(int i);
  ChronyRound ChronyAll(const std::vector<int>& idx);
  bool WaitChronySynced(const std::vector<int>& idx, double timeout_s);
  // Notes each running chronyd's first synchronised tracking (seconds from
  // its start) in chrony_first_sync_; polled while the agents lock, too.
  void NoteChronyFirstSync();
  std::map<int, std::optional<nlohmann::json>> StatusAll(const std::vector<int>& idx);
  std::map<int, double> WaitLocked(const std::vector<int>& idx, double timeout_s);
  // fabric probing (--fabric)
  FabricPaths FabricAll(const std::vector<int>& idx);
  void WaitFabricUp(const std::vector<int>& idx, double timeout_s);
  // Path transitions to "down" the agents logged between two wall-clock
  // instants (seconds since the epoch), summed over idx.
  int FabricDownsLogged(const std::vector<int>& idx, double wall_t0, double wall_t1);
  // measurement
  Snapshot Snap(const std::vector<int>& idx);
  ScenarioResult Measure(const std::string& name, double seconds, const std::vector<int>& idx,
                         const std::set<int>& exclude_bw = {}, std::vector<Event> events = {});
  void Record(int i, const nlohmann::json& status, Round& rnd);
  void WriteRounds(const std::string& name, const std::vector<Round>& rounds);
  void WriteChronyRounds(const std::string& name, const std::vector<ChronyRound>& rounds);
  // scenarios (scenarios.cc)
  ScenarioResult ScenarioLoad(const std::vector<int>& everyone);
  int PickLoadPort(int src, int dst, const std::string& link);
  std::vector<std::string> ProbeFlowsThrough(const std::string& link);
  ScenarioResult ScenarioLinkDown(const std::vector<int>& everyone);
  ScenarioResult ScenarioNodeDies(const std::vector<int>& everyone);

  const std::string& HostName(int i) const { return host_names_[static_cast<size_t>(i)]; }

  Options a_;
  Tools tools_;
  std::string work_;
  Netns netns_;
  PyRandom rng_;
  bool lab_up_ = false;
  nlohmann::json topo_;
  std::vector<std::string> host_names_, ns_, ip0_, vclock_;
  std::vector<std::string> host_addr_;            // host addresses (topology .hosts[i].addr)
  std::vector<std::vector<std::string>> rails_;  // rail interfaces per host, in rail order
  std::map<int, Child> agents_;   // host index -> agent
  std::map<int, double> started_;  // host index -> start time
  std::map<int, Child> chronyds_;  // host index -> chronyd (-x)
  std::map<int, double> chrony_started_;     // host index -> its chronyd's start time
  std::map<int, double> chrony_first_sync_;  // host index -> seconds from start to first synchronised
  std::vector<Child> aux_;         // loadgen
  // The origin of every base instant.
  std::optional<int64_t> origin_;
};

}  // namespace lockstep::bench
