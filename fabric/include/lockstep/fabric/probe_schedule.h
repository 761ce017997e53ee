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
//
// Idle ticks: Advance(now, slow = true) makes the next gap an idle one
// (idle_interval * [1 - jitter, 1 + jitter]), for a node with no fast path
// (PathMonitor); Hurry pulls a far tick in to one fast gap from now when a
// path turns fast between ticks.
#pragma once

#include <cstdint>
#include <optional>
#include <random>

#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

class ProbeSchedule {
 public:
  // REQUIRES: interval > 0, 0 <= jitter < 1, idle_interval 0 (none) or >= interval.
  ProbeSchedule(Nanos interval, double jitter, uint64_t seed, Nanos idle_interval = Nanos(0));

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
  bool TakeTick(Time now) {
    if (!Due(now)) return false;
    Advance(now, false);
    return true;
  }
  // The same in two steps: whether a tick is due, then (when it was) the
  // move to the next one, an idle gap away when `slow` (and idle ticks are
  // configured), else a fast one.
  bool Due(Time now) const { return next_tick_ && *next_tick_ <= now; }
  void Advance(Time now, bool slow);
  // A path turned fast: an idle tick is pulled in to one fast gap from now
  // (no change when it is nearer already, when the last gap was a fast one,
  // or when stopped).
  void Hurry(Time now);
  // Whether the last gap taken was an idle one.
  bool slow() const { return slow_; }

  // When the next tick is due; nullopt when stopped.
  std::optional<Time> NextTick() const { return next_tick_; }

  // One jittered gap (exposed for tests).
  Nanos NextGap();
  Nanos NextIdleGap();

 private:
  Nanos interval_;
  Nanos idle_interval_;
  bool slow_ = false;
  double jitter_;
  std::mt19937_64 rng_;
  std::optional<Time> next_tick_;
};

}  // namespace lockstep::fabric
