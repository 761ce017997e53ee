#include <catch2/catch.hpp>

#include <limits>

#include "lockstep/clocksync/clock_discipline.h"

namespace lockstep::clocksync {
namespace {

constexpr int64_t kSec = 1'000'000'000;

NodeModel Model(int64_t t_ref, double bound) {
  return {.valid = true, .t_ref_ns = t_ref, .offset_ns = 1'000'000, .drift = 10e-6,
          .error_bound_ns = bound, .drift_sigma = 1e-9};
}

TEST_CASE("ToFabric inverts the linear clock model", "[clocksync]") {
  const NodeModel m = Model(100 * kSec, 50);
  // c(F) = F + 1 ms + 10 ppm * (F - t_ref).
  const int64_t f = 103 * kSec;
  const int64_t local = f + 1'000'000 + 30'000;
  CHECK(ToFabric(m, local) == f);
  CHECK(ToFabric(m, 100 * kSec + 1'000'000) == 100 * kSec);
}

TEST_CASE("clock state machine: FREERUN, LOCKED, HOLDOVER, FREERUN", "[clocksync]") {
  DisciplineOptions opt;
  opt.lock_threshold_ns = 1000;
  opt.holdover_after_ns = 5 * kSec;
  opt.max_holdover_ns = 60 * kSec;
  ClockDiscipline clock(opt);

  // Nothing adopted yet: FREERUN with an unbounded interval.
  TimeReading r = clock.Now(10 * kSec);
  CHECK(r.state == ClockState::kFreerun);
  CHECK(r.earliest_ns == std::numeric_limits<int64_t>::min());
  CHECK(r.latest_ns == std::numeric_limits<int64_t>::max());

  // A fit whose bound is above the lock threshold is not good enough.
  CHECK_FALSE(clock.Update(Model(10 * kSec, 5000), 10 * kSec));
  CHECK(clock.State(10 * kSec) == ClockState::kFreerun);

  // First good fit: LOCKED, interval around the model's fabric time.
  REQUIRE(clock.Update(Model(12 * kSec, 100), 12 * kSec));
  r = clock.Now(13 * kSec);
  CHECK(r.state == ClockState::kLocked);
  CHECK(r.fabric_ns == ToFabric(clock.model(), 13 * kSec));
  CHECK(r.earliest_ns < r.fabric_ns);
  CHECK(r.latest_ns > r.fabric_ns);
  CHECK(r.latest_ns - r.fabric_ns == r.fabric_ns - r.earliest_ns);
  const double locked_bound = r.error_bound_ns;
  CHECK(locked_bound > 100);
  CHECK(locked_bound < 200);

  // Fits keep coming: stays LOCKED.
  REQUIRE(clock.Update(Model(14 * kSec, 100), 14 * kSec));
  CHECK(clock.State(18 * kSec) == ClockState::kLocked);

  // Fits stop (peers lost): HOLDOVER, bound growing with time.
  r = clock.Now(20 * kSec);
  CHECK(r.state == ClockState::kHoldover);
  const TimeReading later = clock.Now(50 * kSec);
  CHECK(later.state == ClockState::kHoldover);
  CHECK(later.error_bound_ns > r.error_bound_ns);

  // Past the maximum holdover: FREERUN again.
  CHECK(clock.State(75 * kSec) == ClockState::kFreerun);
  CHECK(clock.Now(75 * kSec).latest_ns == std::numeric_limits<int64_t>::max());

  // A fresh good fit locks again.
  REQUIRE(clock.Update(Model(80 * kSec, 100), 80 * kSec));
  CHECK(clock.State(81 * kSec) == ClockState::kLocked);
}

TEST_CASE("a new good fit during holdover locks again, stale and invalid models are ignored", "[clocksync]") {
  ClockDiscipline clock({.lock_threshold_ns = 1000});
  REQUIRE(clock.Update(Model(10 * kSec, 100), 10 * kSec));
  CHECK(clock.State(20 * kSec) == ClockState::kHoldover);
  CHECK_FALSE(clock.Update(Model(9 * kSec, 100), 20 * kSec));  // older than current
  CHECK_FALSE(clock.Update(NodeModel{}, 20 * kSec));           // invalid
  CHECK(clock.State(20 * kSec) == ClockState::kHoldover);
  REQUIRE(clock.Update(Model(21 * kSec, 100), 21 * kSec));
  CHECK(clock.State(22 * kSec) == ClockState::kLocked);
}

TEST_CASE("the first lock needs a confirmed track, later a restarted track is adopted", "[clocksync]") {
  ClockDiscipline clock({.lock_threshold_ns = 1000});
  REQUIRE(DisciplineOptions{}.lock_min_track_windows == 2);
  NodeModel first = Model(10 * kSec, 100);
  first.track_windows = 1;  // one window, checked against nothing
  CHECK_FALSE(clock.Update(first, 10 * kSec));
  CHECK(clock.State(10 * kSec) == ClockState::kFreerun);
  NodeModel second = Model(12 * kSec, 100);
  second.track_windows = 2;  // the second window agreed with the first
  REQUIRE(clock.Update(second, 12 * kSec));
  CHECK(clock.State(12 * kSec) == ClockState::kLocked);
  NodeModel restarted = Model(14 * kSec, 100);
  restarted.track_windows = 1;  // a step restarted the track: its warm-up bound covers it
  CHECK(clock.Update(restarted, 14 * kSec));
  CHECK(clock.model().t_ref_ns == 14 * kSec);
  // An untracked solve (0) and lock_min_track_windows 0 adopt the first window.
  ClockDiscipline untracked({.lock_threshold_ns = 1000});
  CHECK(untracked.Update(Model(10 * kSec, 100), 10 * kSec));
  ClockDiscipline any({.lock_threshold_ns = 1000, .lock_min_track_windows = 0});
  CHECK(any.Update(first, 10 * kSec));
}

TEST_CASE("error bound grows with drift uncertainty and wander", "[clocksync]") {
  ClockDiscipline clock({.bound_sigmas = 3, .wander_ppb = 20, .wander_ramp_ppb_per_s = 1});
  REQUIRE(clock.Update(Model(10 * kSec, 100), 10 * kSec));
  // After 10 s: 100 + 3 * 1e-9 * 1e10 + 20e-9 * 1e10 + 0.5 * 1 * 100 = 100 + 30 + 200 + 50.
  CHECK(clock.BoundAfter(10.0 * kSec) == Approx(380));
  CHECK(clock.BoundAfter(0) == Approx(100));
}

}  // namespace
}  // namespace lockstep::clocksync
