#include "lockstep/fabric/probe_schedule.h"

#include <cassert>

namespace lockstep::fabric {

ProbeSchedule::ProbeSchedule(Nanos interval, double jitter, uint64_t seed)
    : interval_(interval), jitter_(jitter), rng_(seed) {
  assert(interval.count() > 0 && jitter >= 0 && jitter < 1);
}

Nanos ProbeSchedule::NextGap() {
  if (jitter_ == 0) return interval_;
  std::uniform_real_distribution<double> u(1 - jitter_, 1 + jitter_);
  return Nanos(static_cast<int64_t>(static_cast<double>(interval_.count()) * u(rng_)));
}

void ProbeSchedule::Start(Time now) {
  if (next_tick_) return;
  std::uniform_int_distribution<int64_t> phase(0, interval_.count() - 1);
  next_tick_ = now + Nanos(phase(rng_));
}

bool ProbeSchedule::TakeTick(Time now) {
  if (!next_tick_ || *next_tick_ > now) return false;
  Time next = *next_tick_ + NextGap();
  if (next <= now) next = now + NextGap();  // a whole gap late: no burst
  next_tick_ = next;
  return true;
}

}  // namespace lockstep::fabric
