// Ground truth for agents that share one machine clock (e2e/demo/clock-agents).
// Pure: /status documents in, one row per agent out.
//
// Each agent runs on a simulated clock with a known offset from the machine's
// clock (the base), so every agent's fabric time can be read on the base
// timeline: F_j(b) - b = true_offset_j - offset_j. Fabric time has no truth of
// its own (the agents anchor it to the models they serve, so it is not the mean
// clock): it is what the agents agree on, G(b) = mean_j (F_j(b) - b) over the
// agents with a model (LOCKED or HOLDOVER). An agent's true error is its
// estimated offset (local - fabric) minus its true one against G; errors of two
// agents subtract to their exact pairwise disagreement. Readings taken one
// after another are carried to the same base instant: clocks with their true
// drifts, G with its rate, mean_j (true_drift_j - drift_j).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::bench {

// The fields of one agent's GET /status that the scoring needs.
struct AgentStatus {
  std::string node, state;
  double offset_ns = 0;  // local - fabric, estimated
  double drift_ppb = 0;  // local vs fabric, estimated
  int64_t error_bound_ns = 0;
  int64_t peers = 0;
  size_t probe_targets = 0;
  int64_t local_ns = 0;  // virtual_clock.*
  int64_t true_offset_ns = 0;
  double true_drift_ppb = 0;
};

// Parses a /status document; throws std::runtime_error naming what is missing
// (e.g. no virtual_clock: the agent does not run with --virtual-clock).
AgentStatus ParseAgentStatus(const nlohmann::json& status);

struct TruthRow {
  std::string node, state;
  std::optional<int64_t> error_bound_ns;  // nullopt: unbounded
  double true_error_ns = 0;               // estimated offset - true offset
  bool inside_bound = false;              // LOCKED and |true error| <= bound
  int64_t true_offset_ns = 0;
  double true_drift_ppb = 0;
  double fabric_minus_base_ns = 0;  // G at this agent's base instant
  int64_t peers = 0;
  size_t probe_targets = 0;
};

std::vector<TruthRow> ScoreTruth(const std::vector<AgentStatus>& agents);
bool AllInside(const std::vector<TruthRow>& rows);

// {"ok": ..., "agents": [rows]} (values rounded as the report shows them).
nlohmann::ordered_json TruthJson(const std::vector<TruthRow>& rows);
// The human table plus a summary line.
std::string TruthTable(const std::vector<TruthRow>& rows);

}  // namespace lockstep::bench
