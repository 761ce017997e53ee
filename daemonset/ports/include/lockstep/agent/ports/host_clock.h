// HostClock: the port through which the agent reads and steers the host's
// CLOCK_REALTIME (opt-in: clockSync.disciplineHostClock). Adapters:
// AdjtimexHostClock (lockstep/agent/net/host_clock.h, clock_adjtime) and
// tests/support/fake_host_clock.h. The policy that drives it is
// HostClockDiscipline (lockstep/agent/app/host_discipline.h).
// Implementations are thread-compatible.
#pragma once

#include <cstdint>

#include "lockstep/common/result.h"

namespace lockstep::agent {

struct HostClockAdjustment {
  enum class Kind { kNone, kSlew, kStep } kind = Kind::kNone;
  int64_t correction_ns = 0;  // to add to CLOCK_REALTIME
  bool operator==(const HostClockAdjustment&) const = default;
};

class HostClock {
 public:
  virtual ~HostClock() = default;
  // CLOCK_REALTIME now, in ns since the epoch.
  virtual int64_t RealtimeNs() const = 0;
  // Applies one adjustment and publishes error_bound_ns as the kernel's
  // estimated/maximum error. Errors: kUnauthorized without CAP_SYS_TIME.
  virtual Status Apply(const HostClockAdjustment& adj, int64_t error_bound_ns) = 0;
};

}  // namespace lockstep::agent
