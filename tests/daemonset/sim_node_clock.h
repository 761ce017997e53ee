// SimNodeClock: a NodeClock on simulated time. The "true" time of the
// simulation is the FakeClock's monotonic ns; kernel stamps in the fake
// network are true times, so FromKernelRealtime is the identity. Wrap it in a
// VirtualClock to give a node a known offset, drift and wander.
#pragma once

#include "fake_clock.h"
#include "lockstep/agent/ports/node_clock.h"

namespace lockstep::agent::test {

inline int64_t TrueNs(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock.Monotonic().time_since_epoch()).count();
}

class SimNodeClock final : public NodeClock {
 public:
  explicit SimNodeClock(const Clock& clock) : clock_(clock) {}
  int64_t NowNs() const override { return TrueNs(clock_); }
  int64_t FromKernelRealtime(int64_t realtime_ns) const override { return realtime_ns; }

 private:
  const Clock& clock_;
};

// A settable NodeClock for pure tests.
class ManualNodeClock final : public NodeClock {
 public:
  int64_t NowNs() const override { return now_; }
  int64_t FromKernelRealtime(int64_t realtime_ns) const override { return realtime_ns; }
  void Set(int64_t ns) { now_ = ns; }

 private:
  int64_t now_ = 1'000'000'000'000;
};

}  // namespace lockstep::agent::test
