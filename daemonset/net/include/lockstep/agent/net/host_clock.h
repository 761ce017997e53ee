// AdjtimexHostClock: the HostClock adapter (lockstep/agent/ports/host_clock.h) over
// clock_adjtime(CLOCK_REALTIME): a kernel-PLL slew (ADJ_OFFSET|ADJ_NANO,
// STA_PLL) or a step (ADJ_SETOFFSET), and ADJ_ESTERROR/ADJ_MAXERROR from the
// error bound. It needs CAP_SYS_TIME: on EPERM it reports that clearly (the
// policy, HostClockDiscipline, then stops and the agent keeps serving).
// The agent's own model never reads CLOCK_REALTIME except through
// RealtimeMapper, so steering REALTIME here does not feed back into it.
// Thread-compatible.
#pragma once

#include "lockstep/agent/ports/host_clock.h"

namespace lockstep::agent {

class AdjtimexHostClock final : public HostClock {
 public:
  int64_t RealtimeNs() const override;
  Status Apply(const HostClockAdjustment& adj, int64_t error_bound_ns) override;
};

}  // namespace lockstep::agent
