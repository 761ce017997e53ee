#include "lockstep/fabric/probe_schedule.h"

#include <cassert>

namespace lockstep::fabric {

ProbeSchedule::ProbeSchedule(Nanos interval, double jitter, uint64_t seed, Nanos idle_interval)
    : interval_(interval), idle_interval_(idle_interval), jitter_(jitter), rng_(seed) {
  assert(interval.count() > 0 && jitter >= 0 && jitter < 1);
  assert(idle_interval.count() == 0 || idle_interval >= interval);
}

Nanos ProbeSchedule::NextIdleGap() {
  if (jitter_ == 0) return idle_interval_;
  std::uniform_real_distribution<double> u(1 - jitter_, 1 + jitter_);
  return Nanos(static_cast<int64_t>(static_cast<double>(idle_interval_.count()) * u(rng_)));
}

Nanos ProbeSchedule::NextGap() {
  if (jitter_ == 0) return interval_;
  std::uniform_real_distribution<double> u(1 - jitter_, 1 + jitter_);
  return Nanos(static_cast<int64_t>(static_cast<double>(interval_.count()) * u(rng_)));
}

void ProbeSchedule::Start(Time now) {
  if (next_tick_) return;
  slow_ = false;
  std::uniform_int_distribution<int64_t> phase(0, interval_.count() - 1);
  next_tick_ = now + Nanos(phase(rng_));
}

void ProbeSchedule::Advance(Time now, bool slow) {
  if (!next_tick_) return;
  slow_ = slow && idle_interval_.count() > 0;
  const Nanos gap = slow_ ? NextIdleGap() : NextGap();
  Time next = *next_tick_ + gap;
  if (next <= now) next = now + gap;  // a whole gap late: no burst
  next_tick_ = next;
}

void ProbeSchedule::Hurry(Time now) {
  if (!next_tick_ || !slow_) return;  // a fast tick is one fast gap away at most already
  const Time soon = now + NextGap();
  if (soon < *next_tick_) next_tick_ = soon;
  slow_ = false;
}

}  // namespace lockstep::fabric
