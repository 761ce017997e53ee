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

// {"benchmark":"fabric", ..., "scenarios": {name: {"baseline_survived": ..,
// "survived": null (agent arm not run), "baseline": {...}}}}
nlohmann::ordered_json Summary(const Options& o, const std::vector<ScenarioResult>& results);

}  // namespace lockstep::bench::fabric
