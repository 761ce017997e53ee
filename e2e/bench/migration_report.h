// The migration benchmark's output: a readable table of the arms and the one
// JSON line (docs/benchmarks.md "migration"). Pure; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "migration_run.h"

namespace lockstep::bench::migration {

// One interleaved steady-state round: fault-free runs of ddp and lockstep_hot
// (the library, the coordinator and one idle hot spare), back to back.
struct SteadyRound {
  bool ddp_first = true;
  ArmResult ddp, lockstep;
  std::optional<ArmResult> ddp_torch2, torchft;  // fault-free, on torch 2.x, when torchft ran
};

// bit_identical of every faulty arm is judged against `reference_of(arm)`:
// the ddp arm, or lockstep_ref for the lockstep arms when it ran (the
// library's documented reference). Missing reference: null. `rounds` (of
// `round_steps` steps each) give the top-level overhead_percent: the median of
// the rounds' lockstep_hot / ddp step-time ratios (null without rounds).
nlohmann::ordered_json Summary(const Options& o, const std::vector<ArmResult>& arms, long long params,
                               const std::string& uptime, const std::vector<SteadyRound>& rounds = {},
                               int round_steps = 0);

std::string Table(const nlohmann::ordered_json& summary);

}  // namespace lockstep::bench::migration
