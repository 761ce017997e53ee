// ProbeSchedule: when the host's next probe tick is due. The host probes in
// ticks: every path is due at the same tick, so the agent wakes once per
// interval and sends the tick's probes in one batch (one wake-up and one
// sendmmsg per tick instead of one per probe: most of the prober's cost is
// per wake-up and per system call). Since every path shares the tick, the
// schedule keeps one time, not one per path: a path added while it runs
// joins the next tick. Gaps between ticks are the interval with uniform
// jitter (interval * [1 - jitter, 1 + jitter]) from a seeded generator, so
// hosts do not probe in lockstep with each other, each path still sees one
// probe per gap, and the same seed gives the same schedule. The caller
// passes `now`; nothing here reads a clock. O(1). Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <random>

#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

class ProbeSchedule {
 public:
  // REQUIRES: interval > 0, 0 <= jitter < 1.
  ProbeSchedule(Nanos interval, double jitter, uint64_t seed);

  // Starts ticking: the first tick at a uniform point of [now, now +
  // interval), so hosts started together do not probe together. No-op while
  // running (paths added later join the running ticks).
  void Start(Time now);
  // Stops ticking (no paths left); the next Start picks a new phase.
  void Stop() { next_tick_.reset(); }
  bool running() const { return next_tick_.has_value(); }

  // Whether a tick is due at or before `now`. If so, the schedule moves to
  // the next tick: one jittered gap after the tick taken, or after `now`
  // when the caller is a whole gap late (no catch-up bursts).
  bool TakeTick(Time now);

  // When the next tick is due; nullopt when stopped.
  std::optional<Time> NextTick() const { return next_tick_; }

  // One jittered gap (exposed for tests).
  Nanos NextGap();

 private:
  Nanos interval_;
  double jitter_;
  std::mt19937_64 rng_;
  std::optional<Time> next_tick_;
};

}  // namespace lockstep::fabric
