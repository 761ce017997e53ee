// Disciplining the host clock (opt-in: clockSync.disciplineHostClock).
// The agent's own model never reads CLOCK_REALTIME except through
// RealtimeMapper, so steering REALTIME here does not feed back into it.
//
// PlanHostClockAdjustment is the pure decision; AdjtimexHostClock applies it
// with clock_adjtime(CLOCK_REALTIME): a kernel-PLL slew (ADJ_OFFSET|ADJ_NANO,
// STA_PLL) for offsets up to 0.5 s, a step (ADJ_SETOFFSET) beyond, and
// ADJ_ESTERROR/ADJ_MAXERROR from the error bound. It needs CAP_SYS_TIME: on
// EPERM it reports that clearly and the agent keeps serving without it.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/common/result.h"

namespace lockstep::agent {

struct HostClockAdjustment {
  enum class Kind { kNone, kSlew, kStep } kind = Kind::kNone;
  int64_t correction_ns = 0;  // to add to CLOCK_REALTIME
};

// host_minus_fabric_ns: CLOCK_REALTIME minus fabric time, now.
HostClockAdjustment PlanHostClockAdjustment(int64_t host_minus_fabric_ns);

class AdjtimexHostClock {
 public:
  // Applies one adjustment. Errors: kUnauthorized when CAP_SYS_TIME is missing.
  Status Apply(const HostClockAdjustment& adj, int64_t error_bound_ns);
};

}  // namespace lockstep::agent
