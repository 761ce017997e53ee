// The host-clock discipline policy on a fake HostClock.
#include <catch2/catch.hpp>

#include "fake_host_clock.h"
#include "lockstep/agent/app/host_discipline.h"

namespace lockstep::agent {
namespace {

using Outcome = HostClockDiscipline::Outcome;
using Kind = HostClockAdjustment::Kind;

// A reading whose fabric time is `host_minus_fabric_ns` behind the fake host clock.
TimeReading Reading(const FakeHostClock& clock, int64_t host_minus_fabric_ns, ClockSyncState state,
                    int64_t bound_ns = 500) {
  TimeReading r;
  r.now_ns = clock.realtime_ns - host_minus_fabric_ns;
  r.error_bound_ns = bound_ns;
  r.state = state;
  return r;
}

TEST_CASE("host discipline: slews small offsets and steps large ones when LOCKED", "[daemonset][discipline]") {
  FakeHostClock clock;
  HostClockDiscipline d(clock, true);
  CHECK(d.OnWindow(Reading(clock, 20'000, ClockSyncState::kLocked)) == Outcome::kSlewed);
  REQUIRE(clock.applied.size() == 1);
  CHECK(clock.applied[0] == HostClockAdjustment{Kind::kSlew, -20'000});
  CHECK(clock.bounds[0] == 500);

  CHECK(d.OnWindow(Reading(clock, -2'000'000'000, ClockSyncState::kLocked)) == Outcome::kStepped);
  CHECK(clock.applied[1] == HostClockAdjustment{Kind::kStep, 2'000'000'000});

  CHECK(d.OnWindow(Reading(clock, 0, ClockSyncState::kLocked)) == Outcome::kInSync);
  CHECK(clock.applied.size() == 2);
  // The slew limit is the boundary: 0.5 s slews, just over steps.
  CHECK(PlanHostClockAdjustment(kHostClockSlewLimitNs).kind == Kind::kSlew);
  CHECK(PlanHostClockAdjustment(kHostClockSlewLimitNs + 1).kind == Kind::kStep);
  CHECK(PlanHostClockAdjustment(INT64_MIN).correction_ns == INT64_MAX);
}

TEST_CASE("host discipline: holds in FREERUN and HOLDOVER", "[daemonset][discipline]") {
  FakeHostClock clock;
  HostClockDiscipline d(clock, true);
  CHECK(d.OnWindow(Reading(clock, 3'000'000'000, ClockSyncState::kFreerun)) == Outcome::kHeld);
  CHECK(d.OnWindow(Reading(clock, 20'000, ClockSyncState::kHoldover)) == Outcome::kHeld);
  CHECK(clock.applied.empty());
  CHECK(d.active());
  CHECK(d.OnWindow(Reading(clock, 20'000, ClockSyncState::kLocked)) == Outcome::kSlewed);
}

TEST_CASE("host discipline: refuses a step the error bound does not justify", "[daemonset][discipline]") {
  FakeHostClock clock;
  HostClockDiscipline d(clock, true);
  CHECK(d.OnWindow(Reading(clock, 2'000'000'000, ClockSyncState::kLocked, 3'000'000'000)) == Outcome::kRefused);
  CHECK(d.OnWindow(Reading(clock, 2'000'000'000, ClockSyncState::kLocked, -1)) == Outcome::kRefused);
  CHECK(clock.applied.empty());
  CHECK(d.active());  // a tighter reading later may step
  CHECK(d.OnWindow(Reading(clock, 2'000'000'000, ClockSyncState::kLocked, 1000)) == Outcome::kStepped);
}

TEST_CASE("host discipline: off when not enabled, and off for good after a failure", "[daemonset][discipline]") {
  FakeHostClock clock;
  HostClockDiscipline off(clock, false);
  CHECK(off.OnWindow(Reading(clock, 20'000, ClockSyncState::kLocked)) == Outcome::kOff);
  CHECK(clock.applied.empty());

  HostClockDiscipline d(clock, true);
  clock.fail = Error{ErrorCode::kUnauthorized, "needs CAP_SYS_TIME"};
  CHECK(d.OnWindow(Reading(clock, 20'000, ClockSyncState::kLocked)) == Outcome::kFailed);
  CHECK_FALSE(d.active());
  CHECK(d.error().find("CAP_SYS_TIME") != std::string::npos);
  clock.fail.reset();
  CHECK(d.OnWindow(Reading(clock, 20'000, ClockSyncState::kLocked)) == Outcome::kOff);
  CHECK(clock.applied.empty());
  CHECK(std::string(HostDisciplineOutcomeName(Outcome::kRefused)) == "refused");
}

}  // namespace
}  // namespace lockstep::agent
