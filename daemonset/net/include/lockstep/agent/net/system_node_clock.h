// SystemNodeClock: the real NodeClock. Local time runs on
// CLOCK_MONOTONIC_RAW (the bare oscillator, never slewed by NTP), anchored to
// CLOCK_REALTIME once at construction so it starts near UTC. Kernel packet
// stamps (CLOCK_REALTIME) are mapped through a RealtimeMapper fed with tight
// (REALTIME, MONOTONIC_RAW) sample pairs taken at most 1 ms apart while
// stamps are being converted, so NTP slewing (or disciplining this very host
// clock) does not leak into the clock-sync model.
//
// With a shared anchor (testbeds: --virtual-clock) the anchor is rounded down
// to a whole second, so every process on the machine gets the same base clock
// (to within a rounding-boundary chance of ~1e-6) whatever NTP does between
// their starts, and the ground truth of their virtual clocks compares across
// processes. Thread-safe.
#pragma once

#include <mutex>

#include "lockstep/agent/ports/node_clock.h"
#include "lockstep/agent/realtime_mapper.h"

namespace lockstep::agent {

class SystemNodeClock final : public NodeClock {
 public:
  explicit SystemNodeClock(bool shared_anchor = false);
  int64_t NowNs() const override { return RawNs() + anchor_; }
  int64_t FromKernelRealtime(int64_t realtime_ns) const override;

  static int64_t RawNs();
  static int64_t RealtimeNs();

 private:
  // Reads REALTIME between two MONOTONIC_RAW reads; keeps the tightest of a
  // few tries. Returns {realtime, raw midpoint}.
  static std::pair<int64_t, int64_t> SamplePair();

  int64_t anchor_ = 0;  // realtime - raw at construction
  mutable std::mutex mu_;
  mutable RealtimeMapper mapper_;  // GUARDED_BY(mu_)
};

}  // namespace lockstep::agent
