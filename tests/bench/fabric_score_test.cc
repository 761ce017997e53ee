#include <algorithm>

#include <catch2/catch.hpp>

#include "fabric_score.h"

namespace lockstep::bench::fabric {
namespace {

// Rank 0 steps every 100 ms from t=0 to `until`, skipping (from, to).
LoopLog Steps(double until, double gap_from = -1, double gap_to = -1) {
  LoopLog log;
  int n = 0;
  for (double t = 0.1; t <= until + 1e-9; t += 0.1) {
    if (t > gap_from && t < gap_to) continue;
    log.steps.push_back({0, n++, t, 100});
  }
  return log;
}

// 10 ms intervals from 0 to `until`: 1000 bytes each, 0 inside (from, to).
std::vector<Interval> Stream(double until, double from = -1, double to = -1) {
  std::vector<Interval> v;
  for (int i = 1; i * 0.01 <= until + 1e-9; ++i) {
    const double t = i * 0.01;
    v.push_back({t, (t > from && t <= to) ? 0 : 1000});
  }
  return v;
}

TEST_CASE("fabric score: a fault nobody notices", "[bench]") {
  const Score s = ScoreArm(Steps(10), Stream(10), {5, 0, 10, 15, {}});
  CHECK(s.survived);
  CHECK_FALSE(s.hung);
  CHECK(s.pre_step_ms == 100);
  CHECK(s.max_step_stall_ms == Approx(100).margin(1));
  CHECK(s.lost_steps == 0);
  CHECK(s.pre_mbps == Approx(0.8));
  CHECK_FALSE(s.stream_stalled);
  CHECK(*s.failover_ms == 0);
  CHECK(s.dip_pct == 0);
  CHECK(*s.recover_full_speed_ms == 0);
}

TEST_CASE("fabric score: a 2 s stall, then back at full speed", "[bench]") {
  const Score s = ScoreArm(Steps(10, 5.0, 7.05), Stream(10, 5.0, 7.0), {5, 0, 10, 15, {}});
  CHECK(s.survived);
  CHECK(s.max_step_stall_ms == Approx(2100).margin(1));
  CHECK(s.lost_steps == 20);  // 50 expected in 5 s at 100 ms, 30 made
  CHECK(s.stream_stalled);
  CHECK(*s.failover_ms == Approx(2000).margin(1));
  CHECK(s.stream_stalled_ms == Approx(2000).margin(50));  // judged in 50 ms windows
  CHECK(s.dip_pct == 100);
  CHECK(*s.recover_full_speed_ms == Approx(2000).margin(1));
}

TEST_CASE("fabric score: failover is the fault's own gap, even when a burst hides it, not a later dip", "[bench]") {
  // 40 ms without data right after the fault at 5 s, then the bytes SACKed
  // behind the hole arrive at once (the 50 ms window stays above 10%); a
  // separate 100 ms dip at 7 s.
  std::vector<Interval> v = Stream(10, 5.0, 5.04);
  for (auto& iv : v) {
    if (iv.t > 5.04 && iv.t <= 5.05) iv.bytes = 5000;
    if (iv.t > 7.0 && iv.t <= 7.1) iv.bytes = 0;
  }
  const Score s = ScoreArm(Steps(10), v, {5, 0, 10, 15, {}});
  CHECK(*s.failover_ms == Approx(40).margin(1));
  CHECK(s.stream_stalled);  // the later dip
  CHECK(s.stream_stalled_ms == Approx(100).margin(60));
}

TEST_CASE("fabric score: the loop hangs and errors, the stream never returns", "[bench]") {
  LoopLog log = Steps(5);
  log.errors.push_back({2, 20.5, "Timed out"});
  const Score s = ScoreArm(log, Stream(25, 5.0, 25), {5, 0, 25, 15, {}});
  CHECK_FALSE(s.survived);
  CHECK(s.hung);
  CHECK(s.error == "rank 2: Timed out");
  CHECK(s.max_step_stall_ms == Approx(15500).margin(1));  // to the error
  CHECK_FALSE(s.failover_ms.has_value());
  CHECK_FALSE(s.recover_full_speed_ms.has_value());
}

TEST_CASE("fabric score: every fault of a train gets its own stalls, not only the first", "[bench]") {
  // Faults at 5 and 10 s: a 0.5 s stall after the first, 3 s after the second.
  LoopLog log = Steps(20, 5.0, 5.55);
  log.steps.erase(std::remove_if(log.steps.begin(), log.steps.end(),
                                 [](const Step& st) { return st.t > 10.05 && st.t < 13.05; }),
                  log.steps.end());
  std::vector<Interval> v = Stream(20, 5.0, 5.5);
  for (auto& iv : v) {
    if (iv.t > 10.0 && iv.t <= 13.0) iv.bytes = 0;
  }
  Window w{5, 0, 20, 15, {}};
  w.faults = {5, 10};
  const Score s = ScoreArm(log, v, w);
  REQUIRE(s.per_fault.size() == 2);
  CHECK(s.per_fault[0].at == 5);
  CHECK(s.per_fault[0].max_step_stall_ms == Approx(600).margin(1));
  CHECK(s.per_fault[0].stream_stalled_ms == Approx(500).margin(50));
  CHECK(s.per_fault[1].max_step_stall_ms == Approx(3100).margin(1));
  CHECK(s.per_fault[1].stream_stalled_ms == Approx(3000).margin(50));
  CHECK(s.max_step_stall_ms == Approx(3100).margin(1));  // the whole scenario: the worst of them
  CHECK(s.stream_stalled_ms == Approx(3500).margin(100));
  CHECK(*s.failover_ms == Approx(500).margin(1));  // the first fault's own stall only
  const auto j = ToJson(s);
  REQUIRE(j["per_fault"].size() == 2);
  CHECK(j["per_fault"][1]["at_s"] == 5.0);
}

TEST_CASE("fabric score: one fault without a faults list is its own single share", "[bench]") {
  const Score s = ScoreArm(Steps(10, 5.0, 7.05), Stream(10, 5.0, 7.0), {5, 0, 10, 15, {}});
  REQUIRE(s.per_fault.size() == 1);
  CHECK(s.per_fault[0].max_step_stall_ms == s.max_step_stall_ms);
  CHECK(s.per_fault[0].stream_stalled_ms == s.stream_stalled_ms);
}

TEST_CASE("fabric detection: per affected path, false downs before and after, never detected", "[bench]") {
  // Fault at 100 s. Affected: h0's rail-0 paths to h1 and h2, and h1's rail-0 path to h0.
  const std::vector<PathRef> affected = {{"h0", "h1/rail0"}, {"h0", "h2/rail0"}, {"h1", "h0/rail0"}};
  const std::vector<PathDown> downs = {
      {"h3", "h2/rail1/path0", 99.5},    // before the fault: false
      {"h2", "h3/rail0/path0", 50.0},    // before the agents were ready: not counted
      {"h3", "h1/rail1/path0", 100.01},  // after, on an unaffected path: false, even when coincident
      {"h0", "h1/rail0/path0", 100.03},
      {"h0", "h1/rail0/path0", 100.02},  // the earliest counts
      {"h1", "h0/rail0/path1", 100.05},  // any index of the path
      {"h0", "h1/rail0/path0", 99.9},    // before: false
      {"h0", "h2/rail0/path0", 131.0},   // after the end: never detected
  };
  const Detection d = ScoreDetection(downs, affected, 60, 100, 130);
  CHECK(d.affected == 3);
  CHECK(d.never_detected == 1);
  REQUIRE(d.detect_ms.size() == 2);
  CHECK(d.detect_ms[0] == Approx(20).margin(0.1));
  CHECK(d.detect_ms[1] == Approx(50).margin(0.1));
  CHECK(*d.detect_ms_median == Approx(35).margin(0.1));
  CHECK(*d.detect_ms_max == Approx(50).margin(0.1));
  CHECK(d.false_downs_before == 2);
  CHECK(d.false_downs_after == 1);
  const auto j = ToJson(d);
  CHECK(j["never_detected"] == 1);
  CHECK(PathPrefix("h1/rail0/path0") == "h1/rail0");
  CHECK(PathPrefix("h1") == "h1");
  // Nothing affected (a fault no probe crosses): no detection figure, every down false.
  const Detection none = ScoreDetection(downs, {}, 60, 100, 130);
  CHECK(none.affected == 0);
  CHECK_FALSE(none.detect_ms_median.has_value());
  CHECK(none.false_downs_after == 4);
  // Refs naming one path of a rail (several paths per rail): another index
  // of that rail going down is a false down.
  const Detection one = ScoreDetection({{"h0", "h2/rail1/path2", 100.04}, {"h0", "h2/rail1/path1", 100.01}},
                                       {{"h0", "h2/rail1/path2"}}, 60, 100, 130);
  CHECK(one.affected == 1);
  REQUIRE(one.detect_ms.size() == 1);
  CHECK(one.detect_ms[0] == Approx(40).margin(0.1));
  CHECK(one.false_downs_after == 1);
}

TEST_CASE("fabric: netlab link's change time parses", "[bench]") {
  const auto c = ParseLinkChange("netlab: h0r0: down (changed at 1795555336.300000, after 1795555336.292613)\n");
  REQUIRE(c);
  CHECK(c->after == Approx(1795555336.292613).epsilon(1e-15));
  CHECK(c->at == Approx(1795555336.3).epsilon(1e-15));
  CHECK_FALSE(ParseLinkChange("netlab: h0r0: down\n"));
  CHECK_FALSE(ParseLinkChange("netlab: h0r0: down (changed at 5.0, after 6.0)"));
}

TEST_CASE("fabric score: logs parse, non-JSON lines are skipped", "[bench]") {
  LoopLog log;
  ParseLoopLog(
      "UserWarning: something\n"
      R"({"event":"start","rank":1})" "\n"
      R"({"event":"step","rank":1,"step":3,"t":12.5,"step_ms":70.1,"loss":1.0})" "\n"
      R"({"event":"error","rank":1,"t":13,"error":"Connection closed by peer"})" "\n"
      R"({"event":"end","rank":1,"steps":4,"t":14})" "\n",
      log);
  REQUIRE(log.steps.size() == 1);
  CHECK(log.steps[0].step == 3);
  CHECK(log.steps[0].t == 12.5);
  REQUIRE(log.errors.size() == 1);
  CHECK(log.errors[0].error == "Connection closed by peer");
  CHECK(log.ranks_ended == 1);
  const auto iv = ParseStreamLog(R"({"t":1.01,"bytes":500})" "\n" R"({"t":1.02,"bytes":0})" "\n");
  REQUIRE(iv.size() == 2);
  CHECK(iv[1].bytes == 0);
}

}  // namespace
}  // namespace lockstep::bench::fabric
