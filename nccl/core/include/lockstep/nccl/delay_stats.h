// DelayStats: one stream's in-band one-way delays (receiver side), as values.
//
// Each chunk that carries a fabric-time stamp gives one sample (receive time
// minus send time, both fabric time). The stats keep the last kDelaySamples
// samples for p50/p99 (reported to the node agent) and an exponentially
// smoothed value (alpha 1/8) that rides back to the sender in acks for its
// traffic control. Samples may be negative: two clocks agree only within
// their error bound.
//
// Memory: kDelaySamples int64 (2 KiB) per stream. Pure; thread-compatible.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace lockstep::nccl {

inline constexpr size_t kDelaySamples = 256;

class DelayStats {
 public:
  void Add(int64_t owd_ns);

  uint64_t count() const { return count_; }  // samples ever added
  std::optional<int64_t> Smoothed() const;   // nullopt before the first sample
  // The q-quantile (0 <= q <= 1, nearest rank) of the recent samples; nullopt when none.
  std::optional<int64_t> Percentile(double q) const;

 private:
  std::array<int64_t, kDelaySamples> ring_{};
  uint64_t count_ = 0;
  int64_t smoothed_ = 0;
};

}  // namespace lockstep::nccl
