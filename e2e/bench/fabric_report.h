// The fabric benchmark's output: a readable table per scenario and arm, and
// the final JSON line. Only measured numbers are printed; an arm that did not
// run says so. Pure formatting; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fabric_run.h"

namespace lockstep::bench::fabric {

struct ScenarioResult {
  Scenario scenario;
  std::vector<ArmResult> arms;
};

std::string Table(const std::vector<ScenarioResult>& results);

// {"benchmark":"fabric", ..., "scenarios": {name: {"what": .., "arms":
// {"static_untuned": {"survived", "max_step_stall_ms", "stream_stalled_ms",
// "per_fault": [..], ...}, "static_tuned": {..}, "lockstep": {.., detection}},
// "detect_ms_median", "detect_ms_max", "never_detected", "affected_paths",
// "false_downs_before", "false_downs_after"}}}; an arm that did not run:
// {"ran": false, "note"}.
nlohmann::ordered_json Summary(const Options& o, const std::vector<ScenarioResult>& results);

}  // namespace lockstep::bench::fabric
