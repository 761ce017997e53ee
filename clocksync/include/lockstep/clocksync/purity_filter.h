// PurityFilter: decides whether a coded probe pair crossed the network without
// queueing, with a guard band learned from the spacing differences it has seen.
//
// For a pair, delta = (rx1 - rx0) - (tx1 - tx0). A pair that met no queue has
// |delta| of the order of the timestamp jitter; a pair where either probe was
// queued behind other traffic has a large |delta| (stretched or compressed).
//
// The guard band is learned, not guessed: over a sliding history of the last
// `history` deltas, sigma0 = Q25(|delta|) / 0.3186 (the 25th percentile of a
// half-normal is 0.3186 sigma, so up to ~70% impure pairs do not move it), then a
// second, tighter estimate sigma = median(|delta| <= 4 sigma0) / 0.6745 over the
// presumed-pure core; guard = clamp(multiplier * sigma, min_guard, max_guard).
// With fewer than `min_samples` deltas the guard is `initial_guard_ns`.
//
// The Estimator keeps one filter per receiving node: receive-side timestamping
// dominates the jitter and a node sees enough pairs per window to learn from.
//
// Thread-compatible. Memory: history * 4 bytes.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep::clocksync {

struct PurityOptions {
  uint32_t history = 128;         // sliding window of deltas kept
  uint32_t min_samples = 16;      // below this, use initial_guard_ns
  double multiplier = 4.0;        // guard = multiplier * learned jitter sigma
  double initial_guard_ns = 20'000;
  double min_guard_ns = 4;        // timestamp resolution floor
  double max_guard_ns = 100'000;
};

class PurityFilter {
 public:
  explicit PurityFilter(const PurityOptions& options = {});

  // Records one pair's spacing difference into the history. Does not change the
  // guard until Relearn() is called (so a window's pairs are judged together).
  void Observe(int64_t delta_ns);

  // Recomputes the guard band from the current history.
  void Relearn();

  // REQUIRES: Relearn() called after the last Observe() for a current guard.
  bool IsPure(int64_t delta_ns) const;
  double guard_ns() const { return guard_ns_; }
  double sigma_ns() const { return sigma_ns_; }  // learned jitter scale, 0 if unknown
  uint64_t observed() const { return observed_; }

  static int64_t SpacingDelta(int64_t tx0, int64_t rx0, int64_t tx1, int64_t rx1) {
    return (rx1 - rx0) - (tx1 - tx0);
  }

 private:
  PurityOptions options_;
  std::vector<float> ring_;  // |delta|, capacity options_.history
  uint32_t head_ = 0;
  uint64_t observed_ = 0;
  double guard_ns_;
  double sigma_ns_ = 0;
};

}  // namespace lockstep::clocksync
