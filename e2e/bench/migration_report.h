// The migration benchmark's output: a readable table of the arms and the one
// JSON line (docs/benchmarks.md "migration"). Pure; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "migration_run.h"

namespace lockstep::bench::migration {

// bit_identical of every faulty arm is judged against `reference_of(arm)`:
// the ddp arm, or lockstep_ref for the lockstep arms when it ran (the
// library's documented reference). Missing reference: null.
nlohmann::ordered_json Summary(const Options& o, const std::vector<ArmResult>& arms, long long params,
                               const std::string& uptime);

std::string Table(const nlohmann::ordered_json& summary);

}  // namespace lockstep::bench::migration
