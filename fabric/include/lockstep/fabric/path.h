// The path model: this host's rails x peers x paths through the fabric.
//
// A path is (local rail, peer, path index): probes and pinned traffic to the
// peer leave through this host's rail `rail` and take fabric path `index`.
// Index 0 is the only one while host-address traffic does not cross spines;
// more indices (say, one per spine, chosen by the UDP source port or an RDMA
// QP) fit the same key. Nothing here names a Linux interface or route: the
// agent maps rails to devices, a transport plugin may map them to queue pairs.
//
// Times are the agent's monotonic clock (lockstep::MonoTime); the library
// never reads a clock: callers pass `now`. Plain values; thread-compatible.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/common/clock.h"

namespace lockstep::fabric {

using Time = MonoTime;  // monotonic; only differences matter

// One path from this host to a peer.
struct PathKey {
  int rail = 0;      // this host's rail (0-based)
  std::string peer;  // the peer's node name
  int index = 0;     // fabric path through that rail (0 = the only one today)
  auto operator<=>(const PathKey&) const = default;
  bool operator==(const PathKey&) const = default;
};

// "<peer>/rail<r>/path<i>", e.g. "node-b/rail1/path0" (logs, status).
std::string ToString(const PathKey& key);

// Health of one path (see path_health.h for the transitions).
enum class PathState {
  kUnknown,     // not yet probed to a verdict (just added; no reply and fewer than N misses)
  kUp,          // replies arrive; carries traffic
  kSuspect,     // up, but the last probe(s) missed (fewer than missThreshold in a row)
  kDown,        // missThreshold consecutive probes missed
  kRecovering,  // replies again after down, not yet clean for the re-admission period
};

const char* ToString(PathState state);  // "unknown", "up", "suspect", "down", "recovering"

// Up or suspect: the path delivers (a suspect path missed fewer than N probes).
inline bool Usable(PathState s) { return s == PathState::kUp || s == PathState::kSuspect; }
// Down or recovering: traffic must not rely on it.
inline bool Failed(PathState s) { return s == PathState::kDown || s == PathState::kRecovering; }

// Every path of a host: `rails` local rails x `peers` x `paths_per_rail`
// indices, ordered by peer, then rail, then index.
// REQUIRES: rails >= 1, paths_per_rail >= 1.
std::vector<PathKey> EnumeratePaths(int rails, const std::vector<std::string>& peers, int paths_per_rail = 1);

}  // namespace lockstep::fabric
