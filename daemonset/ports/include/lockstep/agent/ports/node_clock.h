// NodeClock: this node's oscillator as the clock-sync model sees it. It is a
// local time scale in nanoseconds that is NOT slewed or stepped by NTP (the
// system adapter runs it on CLOCK_MONOTONIC_RAW, anchored once to
// CLOCK_REALTIME), plus the map from kernel packet timestamps (which Linux
// takes on CLOCK_REALTIME) into that scale. Every timestamp the agent puts on
// the wire or reports goes through one NodeClock, so a VirtualClock decorator
// shifts all of them consistently.
// Implementations must be thread-safe.
#pragma once

#include <cstdint>

namespace lockstep::agent {

class NodeClock {
 public:
  virtual ~NodeClock() = default;
  // The local clock now, ns.
  virtual int64_t NowNs() const = 0;
  // Maps a kernel CLOCK_REALTIME timestamp (ns since the epoch), taken in
  // the recent past, into the local clock.
  virtual int64_t FromKernelRealtime(int64_t realtime_ns) const = 0;
};

}  // namespace lockstep::agent
