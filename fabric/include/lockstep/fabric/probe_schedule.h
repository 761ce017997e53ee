// ProbeSchedule: when each path's next probe is due. The host probes in
// ticks: every path is due at the same tick, so the agent wakes once per
// interval and sends the tick's probes in one batch (one wake-up and one
// sendmmsg per tick instead of one per probe: most of the prober's cost is
// per wake-up and per system call). Gaps between ticks are the interval with
// uniform jitter (interval * [1 - jitter, 1 + jitter]) from a seeded
// generator, so hosts do not probe in lockstep with each other, each path
// still sees one probe per gap, and the same seed gives the same schedule.
// The caller passes `now`; nothing here reads a clock. Every operation is
// O(log paths). Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

class ProbeSchedule {
 public:
  // REQUIRES: interval > 0, 0 <= jitter < 1.
  ProbeSchedule(Nanos interval, double jitter, uint64_t seed);

  // Starts probing a path: its first probe is due at the next tick (the
  // first tick of a schedule is at a uniform point of [now, now + interval),
  // so hosts started together do not probe together). No-op when known.
  void Add(const PathKey& path, Time now);
  void Remove(const PathKey& path);
  bool Contains(const PathKey& path) const { return due_.contains(path); }
  size_t size() const { return due_.size(); }

  // The paths whose probe is due at or before `now` (earliest first). They
  // move to the next tick: one jittered gap after the tick they were due at,
  // or after `now` when the caller is a whole gap late (no catch-up bursts).
  std::vector<PathKey> TakeDue(Time now);

  // When `path`'s next probe is due; nullopt for an unknown path.
  std::optional<Time> DueAt(const PathKey& path) const;
  // The earliest due time of all paths; nullopt when there are none.
  std::optional<Time> NextDue() const;

  // One jittered gap (exposed for tests).
  Nanos NextGap();

 private:
  Nanos interval_;
  double jitter_;
  std::mt19937_64 rng_;
  std::map<PathKey, Time> due_;
  std::set<std::pair<Time, PathKey>> queue_;  // the same, ordered by due time
  std::optional<Time> next_tick_;             // when the paths taken last are due again
  std::vector<decltype(queue_)::node_type> taken_;  // TakeDue's scratch (kept for its storage)
};

}  // namespace lockstep::fabric
