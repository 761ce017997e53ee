// Scoring of the clock-sync testbed against virtual-clock ground truth. Pure:
// samples in, pairwise errors and percentiles out (no I/O, no clocks).
//
// Every agent's GET /status carries fabric time `now_ns` at its local reading
// `local_ns` plus the truth `true_offset_ns` = local - base, where the base
// clock is shared by every agent process. So e_i = now_ns - base is node i's
// fabric-time error against a common reference, and e_i - e_j at the same base
// instant is the pairwise error. Base instants are given relative to an origin
// chosen by the caller, so doubles keep sub-ns precision.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::bench {

// States with a clock model (FREERUN has no fabric time).
bool Scored(const std::string& state);

// Linear-interpolated percentile (p in 0..100); nullopt for no data.
std::optional<double> Percentile(std::vector<double> xs, double p);
double Median(std::vector<double> xs);  // 0 for no data
std::optional<double> Mean(const std::vector<double>& xs);
// Rounds to nd decimals (for reports).
double RoundTo(double v, int nd);
std::optional<double> RoundTo(std::optional<double> v, int nd);

// One agent's /status at one sampling round.
struct Sample {
  double base_ns = 0;   // base instant of the reading, relative to the origin
  double err_ns = 0;    // now_ns - base: fabric-time error against the base
  double bound_ns = 0;  // error_bound_ns
  std::string state;
  // Diagnostics only (written to rounds-*.jsonl): time since the served model's
  // reference instant, the served drift and the true one, the true offset.
  double since_model_ns = 0, drift_ppb = 0, true_drift_ppb = 0, true_offset_ns = 0;
};
using Round = std::map<int, Sample>;  // node index -> sample

// The fabric's rate against the base: the median of per-node slopes of err
// over base between consecutive scored samples (robust to steps).
double FabricRate(const std::vector<Round>& rounds);

struct PairScore {
  size_t pairs = 0;  // pair samples scored
  std::optional<double> p50_ns, p99_ns, max_ns;
  std::optional<std::pair<int, int>> worst;  // node indices of the worst pair
  size_t violations = 0;                     // |e_i - e_j| > bound_i + bound_j
  std::optional<double> over_bound_p99, over_bound_max;
  std::optional<double> bound_p50_ns;
  std::optional<double> spread_p50_ns;  // spread of base instants within a round
  double fabric_rate = 0;               // slope, dimensionless
};

// Pairwise errors over every round with >= 2 scored samples, each carried to
// the round's median base instant with the fabric rate.
PairScore ScorePairs(const std::vector<Round>& rounds);

// Prometheus text -> {"name{labels}": value}; comments and bad lines skipped.
std::map<std::string, double> ParseMetrics(std::string_view text);
// Sum over every series of `name` (with or without labels).
double MetricSum(const std::map<std::string, double>& metrics, const std::string& name);

}  // namespace lockstep::bench
