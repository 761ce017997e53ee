#include "lockstep/nccl/delay_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lockstep::nccl {

void DelayStats::Add(int64_t owd_ns) {
  ring_[count_ % kDelaySamples] = owd_ns;
  smoothed_ = count_ == 0 ? owd_ns : smoothed_ + (owd_ns - smoothed_) / 8;
  ++count_;
}

std::optional<int64_t> DelayStats::Smoothed() const {
  if (count_ == 0) return std::nullopt;
  return smoothed_;
}

std::optional<int64_t> DelayStats::Percentile(double q) const {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(count_, kDelaySamples));
  if (n == 0) return std::nullopt;
  std::vector<int64_t> v(ring_.begin(), ring_.begin() + static_cast<long>(n));
  q = std::clamp(q, 0.0, 1.0);
  // Nearest rank: the smallest sample with at least q of them at or below it.
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(rank), v.end());
  return v[rank];
}

}  // namespace lockstep::nccl
