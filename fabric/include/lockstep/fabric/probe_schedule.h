// ProbeSchedule: when each path's next probe is due. Gaps are the interval
// with uniform jitter (interval * [1 - jitter, 1 + jitter]) from a seeded
// generator, so paths added together spread out and the same seed gives the
// same schedule. The caller passes `now`; nothing here reads a clock.
// Every operation is O(log paths). Thread-compatible.
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

  // Starts probing a path: its first probe is due at a uniform point of
  // [now, now + interval) (so a mesh does not probe in bursts). No-op when known.
  void Add(const PathKey& path, Time now);
  void Remove(const PathKey& path);
  bool Contains(const PathKey& path) const { return due_.contains(path); }
  size_t size() const { return due_.size(); }

  // The paths whose probe is due at or before `now` (earliest first). Each moves
  // to its next due time: one jittered gap after the due time it had, or after
  // `now` when the caller is a whole gap late (no catch-up bursts).
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
};

}  // namespace lockstep::fabric
