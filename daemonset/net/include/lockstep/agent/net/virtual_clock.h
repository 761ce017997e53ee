// VirtualClock: a NodeClock decorator that runs a node on a simulated
// oscillator with a known error, so a testbed where every agent shares one
// physical clock can score clock sync against ground truth:
//
//   virtual(b) = b + offset + drift * (b - b0) + wander(b)
//
// where b is the base clock, b0 the base reading at construction, and
// wander a random walk of the frequency (steps every 100 ms, N(0, sigma^2)
// with sigma = wander_ppb * sqrt(0.1)), seeded, so runs are reproducible. The
// total frequency error stays within +-50 ppm (the walk reflects at the
// bound). Kernel stamps are mapped through the base clock and then the same
// transform. Thread-safe (an internal mutex guards the lazily grown walk).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <string>

#include "lockstep/agent/ports/node_clock.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

struct VirtualClockParams {
  int64_t offset_ns = 0;    // |offset| <= 100 ms
  int64_t drift_ppb = 0;    // |drift| <= 50 ppm (50000 ppb)
  double wander_ppb = 0;    // frequency random walk, ppb per sqrt(s); 0..10000
  uint64_t seed = 1;
  bool operator==(const VirtualClockParams&) const = default;
};

// Parses "offset_ns=..,drift_ppb=..,wander=..,seed=.." (any subset, any order).
Result<VirtualClockParams> ParseVirtualClockSpec(const std::string& spec);

class VirtualClock final : public NodeClock {
 public:
  static constexpr int64_t kStepNs = 100'000'000;
  static constexpr int64_t kMaxOffsetNs = 100'000'000;
  static constexpr int64_t kMaxDriftPpb = 50'000;

  // REQUIRES: params within the bounds above (ParseVirtualClockSpec checks).
  // `base` must outlive this clock.
  VirtualClock(const NodeClock& base, const VirtualClockParams& params);

  int64_t NowNs() const override { return Transform(base_.NowNs()); }
  int64_t FromKernelRealtime(int64_t realtime_ns) const override {
    return Transform(base_.FromKernelRealtime(realtime_ns));
  }

  // virtual(b) for a base reading b.
  int64_t Transform(int64_t base_ns) const;
  // Ground truth at base reading b: virtual(b) - b, and the frequency error.
  int64_t TrueOffsetNs(int64_t base_ns) const { return Transform(base_ns) - base_ns; }
  double TrueDriftPpb(int64_t base_ns) const;
  const NodeClock& base() const { return base_; }
  const VirtualClockParams& params() const { return params_; }

 private:
  struct Segment {
    double wander_ns;   // wander at the segment's start
    double freq_ppb;    // wander frequency during the segment
  };
  // REQUIRES: mu_ held. Returns the segment containing base_ns, growing the walk.
  const Segment& SegmentFor(int64_t base_ns, int64_t& seg_start) const;
  double Gaussian() const;

  const NodeClock& base_;
  const VirtualClockParams params_;
  const int64_t b0_;
  mutable std::mutex mu_;
  mutable std::mt19937_64 rng_;        // GUARDED_BY(mu_)
  mutable std::deque<Segment> walk_;   // GUARDED_BY(mu_); walk_[0] starts at first_
  mutable int64_t first_index_ = 0;    // GUARDED_BY(mu_); step index of walk_[0]
};

}  // namespace lockstep::agent
