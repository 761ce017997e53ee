#include "lockstep/agent/realtime_mapper.h"

#include <algorithm>
#include <cmath>

namespace lockstep::agent {

void RealtimeMapper::AddSample(int64_t realtime_ns, int64_t raw_ns) {
  if (!samples_.empty()) {
    const Sample& last = samples_.back();
    int64_t drt = realtime_ns - last.rt;
    int64_t draw = raw_ns - last.raw;
    // A step (or a slew far beyond what NTP does) invalidates the history.
    if (draw <= 0 || drt <= 0 || std::llabs(drt - draw) > draw / 1000 + 1000) samples_.clear();
  }
  samples_.push_back({realtime_ns, raw_ns});
  while (samples_.size() > capacity_) samples_.pop_front();
}

int64_t RealtimeMapper::Interpolate(const Sample& a, const Sample& b, int64_t rt) {
  long double rate = static_cast<long double>(b.raw - a.raw) / static_cast<long double>(b.rt - a.rt);
  return a.raw + static_cast<int64_t>(std::llround(rate * static_cast<long double>(rt - a.rt)));
}

int64_t RealtimeMapper::ToRaw(int64_t realtime_ns) const {
  if (samples_.size() == 1) return samples_.front().raw + (realtime_ns - samples_.front().rt);
  // First sample with rt >= realtime_ns.
  auto it = std::lower_bound(samples_.begin(), samples_.end(), realtime_ns,
                             [](const Sample& s, int64_t rt) { return s.rt < rt; });
  // Extrapolation amplifies sampling jitter by the distance travelled, so it
  // takes its rate over a baseline of >= kBaselineNs where history allows.
  constexpr int64_t kBaselineNs = 100'000'000;
  if (it == samples_.begin()) {
    size_t j = 1;
    while (j + 1 < samples_.size() && samples_[j].raw - samples_[0].raw < kBaselineNs) ++j;
    return Interpolate(samples_[0], samples_[j], realtime_ns);
  }
  if (it == samples_.end()) {
    size_t j = samples_.size() - 2;
    while (j > 0 && samples_.back().raw - samples_[j].raw < kBaselineNs) --j;
    return Interpolate(samples_[j], samples_.back(), realtime_ns);
  }
  return Interpolate(*(it - 1), *it, realtime_ns);
}

}  // namespace lockstep::agent
