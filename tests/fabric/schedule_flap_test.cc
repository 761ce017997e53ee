// The probe schedule's jitter and the sliding-hour flap counter.
#include <catch2/catch.hpp>

#include "fabric_sim.h"
#include "lockstep/fabric/flap_counter.h"
#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path_monitor.h"
#include "lockstep/fabric/probe_schedule.h"

namespace lockstep::fabric {
namespace {

using testing::At;

TEST_CASE("probe gaps stay within the jitter bounds and spread over them", "[fabric]") {
  ProbeSchedule s(10ms, 0.1, 42);
  Nanos lo = Nanos::max(), hi = Nanos::min();
  for (int i = 0; i < 10000; ++i) {
    Nanos g = s.NextGap();
    REQUIRE(g >= 9ms);
    REQUIRE(g <= 11ms);
    lo = std::min(lo, g);
    hi = std::max(hi, g);
  }
  REQUIRE(lo < 9100us);  // the whole range is used
  REQUIRE(hi > 10900us);
}

TEST_CASE("the schedule is deterministic per seed and starts at a random point of one interval", "[fabric]") {
  auto run = [](uint64_t seed) {
    ProbeSchedule s(10ms, 0.1, seed);
    REQUIRE_FALSE(s.TakeTick(At(0ms)));  // not started: no ticks
    s.Start(At(0ms));
    REQUIRE(*s.NextTick() >= At(0ms));
    REQUIRE(*s.NextTick() < At(10ms));
    std::vector<Time> ticks;
    for (Time t = At(0ms); t < At(1s); t += 1ms) {
      if (s.TakeTick(t)) ticks.push_back(t);
    }
    return ticks;
  };
  auto a = run(7), b = run(7), c = run(8);
  REQUIRE(a == b);
  REQUIRE(a != c);
  // About one tick per interval (9-11 ms gaps, taken at 1 ms resolution).
  REQUIRE(a.size() >= 90);
  REQUIRE(a.size() <= 112);
}

TEST_CASE("every path is probed in the same tick, and a path added later joins the running ticks", "[fabric]") {
  PathMonitor m(FabricOptions{}, 3);
  const auto paths = EnumeratePaths(2, {"a", "b", "c"});
  REQUIRE_FALSE(m.TakeProbeTick(At(0ms)));  // no paths: no ticks
  (void)m.SetPaths(std::vector<PathKey>(paths.begin(), paths.end() - 1), At(0ms));
  std::vector<Time> ticks;
  for (Time t = At(0ms); t < At(1s); t += 1ms) {
    (void)m.Tick(t);
    if (t == At(300ms)) (void)m.SetPaths(paths, t);  // no new phase: it joins the next tick
    if (m.TakeProbeTick(t)) ticks.push_back(t);
  }
  REQUIRE(ticks.size() >= 60);  // 14 ms +-10%: ~70 ticks
  REQUIRE(ticks.size() <= 80);
  for (size_t i = 1; i < ticks.size(); ++i) {
    CHECK(ticks[i] - ticks[i - 1] >= 12ms);  // 12.6-15.4 ms gaps, seen at 1 ms resolution
    CHECK(ticks[i] - ticks[i - 1] <= 16ms);
  }
  (void)m.SetPaths({}, At(1s));
  REQUIRE_FALSE(m.TakeProbeTick(At(2s)));
}

TEST_CASE("a caller that is late gets one tick, not a burst", "[fabric]") {
  ProbeSchedule s(10ms, 0.1, 1);
  s.Start(At(0ms));
  const Time first = *s.NextTick();
  s.Start(At(5ms));  // running: no new phase
  REQUIRE(s.NextTick() == first);
  REQUIRE(s.TakeTick(At(500ms)));
  REQUIRE(*s.NextTick() > At(500ms));
  REQUIRE_FALSE(s.TakeTick(At(500ms)));
  s.Stop();
  REQUIRE_FALSE(s.NextTick().has_value());
  REQUIRE_FALSE(s.TakeTick(At(2s)));
  s.Start(At(2s));  // a new phase from now
  REQUIRE(*s.NextTick() >= At(2s));
  REQUIRE(*s.NextTick() < At(2s) + 10ms);
}

TEST_CASE("flaps slide out of the hour", "[fabric]") {
  FlapCounter c(1h, 8);
  for (int i = 0; i < 5; ++i) (void)c.Record(At(i * 10min));  // 0, 10, ..., 40 min
  REQUIRE(c.Count(At(40min)) == 5);
  REQUIRE(c.Count(At(60min)) == 4);   // the flap at 0 min is exactly an hour old: out
  REQUIRE(c.Count(At(95min)) == 1);   // only 40 min is left
  c.Advance(At(101min));
  REQUIRE(c.Count(At(101min)) == 0);
  REQUIRE(c.last() == std::nullopt);
}

TEST_CASE("the flap alert fires once per crossing and re-arms after the count falls", "[fabric]") {
  FlapCounter c(1h, 8);
  std::vector<int> fired;
  for (int i = 1; i <= 12; ++i) {
    if (c.Record(At(i * 1min))) fired.push_back(i);
  }
  REQUIRE(fired == std::vector<int>{9});  // above 8: the 9th flap, once
  REQUIRE(c.alerting());
  // At 65 min the flaps of minutes 1..5 have slid out: 7 left, re-armed.
  c.Advance(At(65min));
  REQUIRE(c.Count(At(65min)) == 7);
  REQUIRE_FALSE(c.alerting());
  REQUIRE_FALSE(c.Record(At(65min)));     // 8: not above
  REQUIRE(c.Record(At(65min) + 1s));      // 9: fires again
}

TEST_CASE("default options detect a failure within 50 ms and validate", "[fabric]") {
  FabricOptions o;
  REQUIRE(Validate(o).ok());
  REQUIRE(o.reply_timeout == AckTimeout(o.probe_interval, o.jitter));
  // One 15.4 ms gap, the 18.4 ms ack timeout, then two 5 ms urgent probes.
  REQUIRE(WorstCaseDetection(o) == 43800us);
  REQUIRE(WorstCaseDetection(o) <= 50ms);
  o.urgent_timeout = 0ms;
  REQUIRE(Validate(o).error().message == "fabric options: urgent_timeout must be between 1ms and 60000ms (got 0ms)");
  o = FabricOptions{};
  o.miss_threshold = 0;
  REQUIRE(Validate(o).error().message == "fabric options: miss_threshold must be between 1 and 100 (got 0)");
  o = FabricOptions{};
  o.probe_interval = 0ms;
  REQUIRE(Validate(o).error().message == "fabric options: probe_interval must be between 1ms and 60000ms (got 0ms)");
  o = FabricOptions{};
  o.jitter = 1;
  REQUIRE_FALSE(Validate(o).ok());
  REQUIRE(RequiredCleanPeriod(FabricOptions{}, 0) == 2s);
  REQUIRE(RequiredCleanPeriod(FabricOptions{}, 1) == 2s);
  REQUIRE(RequiredCleanPeriod(FabricOptions{}, 3) == 8s);
  REQUIRE(RequiredCleanPeriod(FabricOptions{}, 30) == 300s);
}

}  // namespace
}  // namespace lockstep::fabric
