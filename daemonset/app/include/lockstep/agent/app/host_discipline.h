// HostClockDiscipline: the policy that steers the host clock from fabric time
// (clockSync.disciplineHostClock), on the HostClock port. Called once per
// clock-sync window with the service's reading.
//
//  - Off (not enabled, or disabled after a failure): never touches the clock.
//  - FREERUN or HOLDOVER: holds. No adjustment is made from a reading that is
//    not LOCKED; the kernel keeps the frequency its PLL last learned, so the
//    host clock free-runs on it (holdover) until the fabric locks again.
//  - LOCKED: corrects host minus fabric time. Offsets up to 0.5 s are slewed
//    by the kernel PLL; larger ones are stepped, unless the reading's error
//    bound is at least as large as the offset (the step could be wrong in size
//    or sign): then it refuses and waits for a tighter reading.
//  - The first failed Apply (EPERM without CAP_SYS_TIME, say) turns the
//    discipline off for good; the agent keeps serving fabric time.
//
// Thread-compatible (the clock-sync loop owns it).
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/agent/clock_model.h"
#include "lockstep/agent/ports/host_clock.h"

namespace lockstep::agent {

inline constexpr int64_t kHostClockSlewLimitNs = 500'000'000;

// host_minus_fabric_ns: CLOCK_REALTIME minus fabric time, now. Slew within
// kHostClockSlewLimitNs, step beyond. Pure.
HostClockAdjustment PlanHostClockAdjustment(int64_t host_minus_fabric_ns);

class HostClockDiscipline {
 public:
  enum class Outcome {
    kOff,      // not enabled, or turned off by a failure
    kHeld,     // reading not LOCKED: nothing applied
    kInSync,   // LOCKED, no correction needed
    kSlewed,
    kStepped,
    kRefused,  // a step the error bound does not justify
    kFailed,   // Apply failed; the discipline is now off
  };

  // REQUIRES: clock outlives the policy.
  HostClockDiscipline(HostClock& clock, bool enabled) : clock_(clock), active_(enabled) {}

  // One window's decision and, if any, its adjustment.
  Outcome OnWindow(const TimeReading& reading);

  bool active() const { return active_; }
  // Why it turned off ("" while fine).
  const std::string& error() const { return error_; }

 private:
  HostClock& clock_;
  bool active_;
  std::string error_;
};

const char* HostDisciplineOutcomeName(HostClockDiscipline::Outcome o);

}  // namespace lockstep::agent
