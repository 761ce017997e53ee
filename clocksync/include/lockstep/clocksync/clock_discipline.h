// ClockDiscipline: one node's view of fabric time, between and across solves.
//
// It holds the latest adopted NodeModel for its own node (from Estimator::Solve,
// or pushed by whoever runs the solve) and turns a local clock reading into
//   Now(local) -> {fabric_ns, earliest_ns, latest_ns, error_bound_ns, state}
// by extrapolating the model (offset + drift * elapsed). The error bound grows
// with the time since the model's reference instant:
//   bound(dt) = bound_at_ref + bound_sigmas * drift_sigma * dt      (drift estimate)
//             + wander_ppb * 1e-9 * dt + 0.5 * wander_ramp_ppb_per_s * dt_s^2 ns
//                                                               (oscillator wander)
// State machine (level-based: a function of the adopted model and `local`):
//   FREERUN   no model adopted yet, or the last one was adopted more than
//             max_holdover_ns ago. Bounds are infinite (earliest = INT64_MIN,
//             latest = INT64_MAX); fabric_ns is the best guess (local time, or
//             the stale model's extrapolation).
//   LOCKED    a model was adopted at most holdover_after_ns ago.
//   HOLDOVER  fits stopped (peers lost): still extrapolating, bound growing.
// A model is adopted only if valid, newer than the current one and its bound at
// reference is <= lock_threshold_ns; a worse fit is ignored (so a run of bad
// windows ends in HOLDOVER rather than in a LOCKED state with a wide bound).
// The first model is adopted only once the estimator's track of the node has
// absorbed lock_min_track_windows windows, i.e. a second window agreed with
// the first one's prediction: a single window cannot be checked against
// anything, and on the testbed a node's first window was the one whose errors
// most often exceeded its bound (up to 2x at reference, its drift error up to
// 35x its drift sigma, against none outside in the windows after it). Models
// from an untracked solve (track_windows 0) are adopted as before.
//
// Fabric time can step when a new model is adopted (by at most the overlap of
// the two bounds); a slewing front end belongs in the agent.
//
// Thread-compatible: the agent guards it with a mutex or publishes copies.
#pragma once

#include <cstdint>
#include <limits>

namespace lockstep::clocksync {

enum class ClockState { kFreerun, kLocked, kHoldover };
const char* ClockStateName(ClockState state);

// The linear model of one node's clock against fabric time F:
//   c_i(F) = F + offset_ns + drift * (F - t_ref_ns).
struct NodeModel {
  bool valid = false;
  int64_t t_ref_ns = 0;   // fabric instant the model is anchored at (window end)
  double offset_ns = 0;   // c_i - F at F = t_ref_ns
  double drift = 0;       // d(c_i - F)/dF, dimensionless
  double error_bound_ns = std::numeric_limits<double>::infinity();  // at t_ref
  double drift_sigma = 0;
  uint32_t track_windows = 0;  // windows the estimator's track has absorbed (0: untracked)
};

// Fabric time at which a clock following `model` reads `local_ns`.
// REQUIRES: model.valid.
int64_t ToFabric(const NodeModel& model, int64_t local_ns);

struct DisciplineOptions {
  double lock_threshold_ns = 100'000;       // adopt fits with bound <= 100 us
  int64_t holdover_after_ns = 5'000'000'000;  // 2.5 windows without a fit
  int64_t max_holdover_ns = 120'000'000'000;  // then FREERUN
  double bound_sigmas = 3.0;
  double wander_ppb = 20;                   // frequency error allowance
  double wander_ramp_ppb_per_s = 1;         // frequency change allowance
  uint32_t lock_min_track_windows = 2;      // the first adoption needs a track this old
};

struct TimeReading {
  int64_t fabric_ns = 0;
  int64_t earliest_ns = 0;
  int64_t latest_ns = 0;
  double error_bound_ns = 0;
  ClockState state = ClockState::kFreerun;
};

class ClockDiscipline {
 public:
  explicit ClockDiscipline(const DisciplineOptions& options = {});

  // Offers a model computed for this node; now_local_ns is this node's clock when
  // it is offered. Returns true if adopted.
  bool Update(const NodeModel& model, int64_t now_local_ns);

  TimeReading Now(int64_t local_ns) const;
  ClockState State(int64_t local_ns) const;
  // Error bound of the current model after `elapsed_ns` of fabric time since its
  // reference instant (ignores state).
  double BoundAfter(double elapsed_ns) const;

  const NodeModel& model() const { return model_; }
  bool has_model() const { return has_model_; }

 private:
  DisciplineOptions options_;
  NodeModel model_;
  bool has_model_ = false;
  int64_t adopted_local_ns_ = 0;
};

}  // namespace lockstep::clocksync
