#include "lockstep/agent/app/host_discipline.h"

#include <cstdlib>

namespace lockstep::agent {

HostClockAdjustment PlanHostClockAdjustment(int64_t host_minus_fabric_ns) {
  if (host_minus_fabric_ns == 0) return {};
  // INT64_MIN has no negation: clamp (a step of ~292 years is refused anyway).
  int64_t correction = host_minus_fabric_ns == INT64_MIN ? INT64_MAX : -host_minus_fabric_ns;
  if (std::llabs(correction) > kHostClockSlewLimitNs) return {HostClockAdjustment::Kind::kStep, correction};
  return {HostClockAdjustment::Kind::kSlew, correction};
}

HostClockDiscipline::Outcome HostClockDiscipline::OnWindow(const TimeReading& reading) {
  if (!active_) return Outcome::kOff;
  if (reading.state != ClockSyncState::kLocked) return Outcome::kHeld;
  const int64_t host = clock_.RealtimeNs();
  // Saturating difference: readings far apart must not overflow.
  int64_t diff = 0;
  if (__builtin_sub_overflow(host, reading.now_ns, &diff)) diff = host > reading.now_ns ? INT64_MAX : INT64_MIN;
  HostClockAdjustment adj = PlanHostClockAdjustment(diff);
  if (adj.kind == HostClockAdjustment::Kind::kNone) return Outcome::kInSync;
  if (adj.kind == HostClockAdjustment::Kind::kStep &&
      (reading.error_bound_ns < 0 || reading.error_bound_ns >= std::llabs(adj.correction_ns))) {
    return Outcome::kRefused;
  }
  if (Status s = clock_.Apply(adj, reading.error_bound_ns); !s.ok()) {
    active_ = false;
    error_ = s.error().message;
    return Outcome::kFailed;
  }
  return adj.kind == HostClockAdjustment::Kind::kStep ? Outcome::kStepped : Outcome::kSlewed;
}

const char* HostDisciplineOutcomeName(HostClockDiscipline::Outcome o) {
  switch (o) {
    case HostClockDiscipline::Outcome::kOff: return "off";
    case HostClockDiscipline::Outcome::kHeld: return "held";
    case HostClockDiscipline::Outcome::kInSync: return "in-sync";
    case HostClockDiscipline::Outcome::kSlewed: return "slewed";
    case HostClockDiscipline::Outcome::kStepped: return "stepped";
    case HostClockDiscipline::Outcome::kRefused: return "refused";
    case HostClockDiscipline::Outcome::kFailed: return "failed";
  }
  return "unknown";
}

}  // namespace lockstep::agent
