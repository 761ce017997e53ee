#include <catch2/catch.hpp>

#include <cmath>

#include "migration_score.h"

namespace lockstep::bench::migration {
namespace {

// 4 ranks commit steps [from, to) every second starting at t0, rank r as pid
// pids[r]: step s at t0 + (s - from) + 0.01 * r.
void Run(WorkloadLog& log, int from, int to, double t0, std::vector<int> pids) {
  for (int s = from; s < to; ++s) {
    for (int r = 0; r < 4; ++r) log.commits.push_back({r, s, pids[size_t(r)], t0 + (s - from) + 0.01 * r});
  }
}

TEST_CASE("migration score: parses the workload's lines and skips the rest", "[bench]") {
  const WorkloadLog log = ParseWorkloadLog(
      "{\"event\":\"step\",\"rank\":1,\"step\":3,\"pid\":11,\"loss\":0.5,\"t\":10.5}\n"
      "Warning: something from torch\n"
      "{\"event\":\"fault\",\"kind\":\"kill\",\"rank\":2,\"step\":4,\"pid\":12,\"t\":11}\n"
      "{\"event\":\"step\",\"rank\":0,\"step\":3,\"pid\":10,\"t\":10.4}\n");
  REQUIRE(log.commits.size() == 2);
  CHECK(log.commits[0].rank == 0);  // sorted by time
  CHECK(log.commits[1].pid == 11);
  REQUIRE(log.events.size() == 1);
  CHECK(log.events[0].json["kind"] == "kill");
  CHECK(log.bad_lines == 1);
}

TEST_CASE("migration score: a spare replays the interrupted step", "[bench]") {
  WorkloadLog log;
  Run(log, 0, 10, 0, {10, 11, 12, 13});   // steps 0-9 at t 0..9
  Run(log, 10, 20, 11.5, {10, 11, 99, 13});  // rank 2 is now the spare (pid 99)
  Fault kill{"kill", 2, 9.5, 10, 9.6, "", std::nullopt};
  const ArmScore s = ScoreArm(log, {kill}, 4);
  REQUIRE(s.faults.size() == 1);
  CHECK(*s.faults[0].detect_s == Approx(0.1));
  CHECK(*s.faults[0].recover_s == Approx(11.53 - 9.5));  // the last rank's first commit of step 10
  CHECK(s.lost_steps == 0);
  CHECK(s.healthy_restarts == 0);
  CHECK_FALSE(s.step_went_back);
  CHECK(s.final_step == 19);
  CHECK(*s.step_s == Approx(1.0));  // the slow gap around the fault is left out
}

TEST_CASE("migration score: torchft goes on without a failed group and counts its skipped batches", "[bench]") {
  WorkloadLog log;
  Run(log, 0, 10, 0, {10, 11, 12, 13});  // all 4 groups, steps 0-9 at t 0..9
  // Group 2 is killed before step 10; steps 10-12 commit with 3 groups from t 15 (the
  // quorum without it), then it is back (healed, a new pid) from step 13 on, while
  // group 1 hangs before step 16 and never commits again (a stopped process).
  for (int s = 10; s < 20; ++s) {
    for (int r = 0; r < 4; ++r) {
      if ((r == 2 && s < 13) || (r == 1 && s >= 16)) continue;
      const int n = 4 - (s < 13 ? 1 : 0) - (s >= 16 ? 1 : 0);
      log.commits.push_back({r, s, r == 2 ? 99 : 10 + r, 15.0 + (s - 10) + 0.01 * r, n});
    }
  }
  const Fault kill{"kill", 2, 9.5, std::nullopt, std::nullopt, "", std::nullopt};
  const Fault stop{"stop", 1, 20.5, std::nullopt, std::nullopt, "", std::nullopt};
  // A planned move of group 0 after the hang (its process went on: no restart here).
  const Fault planned{"planned", 0, 21.5, std::nullopt, std::nullopt, "", std::nullopt};
  SECTION("with the hung group left out of the others' recover_s") {
    const ArmScore s = ScoreArm(log, {kill, stop, planned}, 4, {}, {1});
    REQUIRE(s.faults.size() == 3);
    CHECK(*s.faults[0].resume_s == Approx(15.0 - 9.5));  // the first commit of step 10, by group 0
    CHECK(*s.faults[0].recover_s == Approx(18.02 - 9.5));  // group 2 back: its first commit (step 13)
    CHECK(*s.faults[1].resume_s == Approx(21.0 - 20.5));  // step 16 by 3 groups
    CHECK_FALSE(s.faults[1].recover_s);  // group 1 itself never came back
    CHECK(s.faults[2].target_step == 17);
    CHECK(*s.faults[2].recover_s == Approx(22.03 - 21.5));  // step 17 by groups 0, 2, 3
    CHECK(s.skipped_batches == 3 + 4);  // steps 10-12 without group 2, 16-19 without group 1
    CHECK(s.lost_steps == 0);
    CHECK(s.healthy_restarts == 0);  // group 2's new pid is the kill's
  }
  SECTION("counting every rank, a group that never came back holds every later recovery") {
    const ArmScore s = ScoreArm(log, {kill, stop, planned}, 4);
    CHECK(s.faults[0].recover_s);
    CHECK_FALSE(s.faults[1].recover_s);
    CHECK(s.faults[1].resume_s);
    CHECK_FALSE(s.faults[2].recover_s);
  }
}

TEST_CASE("migration score: checkpoint-restart recomputes steps and restarts every rank", "[bench]") {
  WorkloadLog log;
  Run(log, 0, 15, 0, {10, 11, 12, 13});
  Run(log, 10, 20, 20, {20, 21, 22, 23});  // all restarted from the checkpoint at step 10
  Fault kill{"kill", 2, 14.5, std::nullopt, std::nullopt, "", std::nullopt};
  const ArmScore s = ScoreArm(log, {kill}, 4);
  CHECK(s.faults[0].target_step == 15);  // highest committed at the fault + 1
  CHECK(*s.faults[0].recover_s == Approx(25.03 - 14.5));
  CHECK_FALSE(s.faults[0].detect_s);
  CHECK(s.lost_steps == 5);        // steps 10-14 committed twice
  CHECK(s.skipped_batches == 0);   // every committed step averaged all 4 batches
  CHECK(s.healthy_restarts == 3);  // ranks 0, 1 and 3
  CHECK(s.step_went_back);
}

TEST_CASE("migration score: a rank that never recovers has no recover time", "[bench]") {
  WorkloadLog log;
  Run(log, 0, 5, 0, {10, 11, 12, 13});
  const ArmScore s = ScoreArm(log, {{"stop", 1, 4.5, 5, std::nullopt, "", std::nullopt}}, 4);
  CHECK_FALSE(s.faults[0].recover_s);
  CHECK_FALSE(s.recover_s.p50);
  CHECK(s.final_step == 4);
}

TEST_CASE("migration score: a spare starting (launch -> in the pool) is left out of the step time", "[bench]") {
  WorkloadLog log = ParseWorkloadLog(
      "{\"event\":\"launch\",\"role\":\"spare\",\"pid\":50,\"t\":3.5}\n"
      "{\"event\":\"launch\",\"role\":\"rank\",\"pid\":10,\"t\":0.1}\n"
      "{\"event\":\"lib\",\"lib_event\":\"registered\",\"pid\":50,\"t\":6.2}\n"
      "{\"event\":\"lib\",\"lib_event\":\"waiting\",\"pid\":51,\"t\":6.4}\n"
      "{\"event\":\"lib\",\"lib_event\":\"waiting\",\"pid\":50,\"t\":6.5}\n"
      "{\"event\":\"lib\",\"lib_event\":\"waiting\",\"pid\":50,\"t\":16.5}\n"
      "{\"event\":\"launch\",\"role\":\"spare\",\"pid\":60,\"t\":12.5}\n");
  // Steps 0-19 every second; while the spare starts (3.5-6.5) they take 3 s instead.
  Run(log, 0, 4, 0, {10, 11, 12, 13});
  Run(log, 4, 5, 6.5, {10, 11, 12, 13});
  Run(log, 5, 20, 7.5, {10, 11, 12, 13});
  const auto busy = SpareStartWindows(log);
  REQUIRE(busy.size() == 2);
  CHECK(busy[0] == Window{3.5, 6.5});     // to its first "waiting": in the pool
  CHECK(busy[1].first == 12.5);          // never got there: to the end of the log
  CHECK(busy[1].second == Approx(21.53));
  const ArmScore all = ScoreArm(log, {}, 4);
  CHECK(all.steady_steps == 19);
  const ArmScore quiet = ScoreArm(log, {}, 4, busy);
  CHECK(*quiet.step_s == Approx(1.0));
  CHECK(quiet.steady_steps == 19 - 1 - 9);  // 3->4 overlaps the first start; the 9 ending at 13.5 .. 21.5 the second
}

TEST_CASE("migration score: interleaved rounds give the median of their overheads", "[bench]") {
  const RoundsScore r = ScoreRounds({{1.0, 1.02}, {2.0, 1.98}, {std::nullopt, 1.0}, {1.0, 1.05}});
  REQUIRE(r.round_percent.size() == 4);
  CHECK(*r.round_percent[0] == Approx(2.0));
  CHECK(*r.round_percent[1] == Approx(-1.0));
  CHECK_FALSE(r.round_percent[2]);  // a round without both times is left out
  CHECK(*r.median_percent == Approx(2.0));
  CHECK_FALSE(ScoreRounds({}).median_percent);
}

TEST_CASE("migration score: the rounds' mean overhead with its 95% interval, and whether it is resolvable", "[bench]") {
  // Percents 2, -1, 5: mean 2, sample sd 3, half-width t(2) * 3 / sqrt(3) = 4.303 * 1.732.
  const RoundsScore noisy = ScoreRounds({{1.0, 1.02}, {1.0, 0.99}, {1.0, 1.05}});
  CHECK(*noisy.mean_percent == Approx(2.0));
  CHECK(*noisy.ci95_half_width == Approx(4.303 * std::sqrt(3.0)).epsilon(1e-4));
  CHECK(*noisy.ci95_low == Approx(2.0 - 4.303 * std::sqrt(3.0)).epsilon(1e-4));
  CHECK_FALSE(noisy.resolvable);  // the interval holds 0
  // Percents 3, 4, 5, 4: mean 4, sd 0.8165, half-width t(3) * 0.8165 / 2 = 1.299: above 0.
  const RoundsScore clear = ScoreRounds({{1.0, 1.03}, {1.0, 1.04}, {1.0, 1.05}, {1.0, 1.04}});
  CHECK(*clear.mean_percent == Approx(4.0));
  CHECK(*clear.ci95_low == Approx(4.0 - 3.182 * std::sqrt(2.0 / 3.0) / 2).epsilon(1e-4));
  CHECK(clear.resolvable);
  CHECK_FALSE(ScoreRounds({{1.0, 1.03}}).mean_percent);  // one round: no interval
}

TEST_CASE("migration score: a planned move is timed from the request, its stall from the paused boundary", "[bench]") {
  WorkloadLog log;
  Run(log, 0, 10, 0, {10, 11, 12, 13});      // steps 0-9 at t 0..9
  Run(log, 10, 20, 10.5, {10, 11, 12, 99});  // rank 3 moved to pid 99 after step 9
  Fault planned{"planned", 3, 7.2, 10, std::nullopt, "", 9.03};  // asked at 7.2; every rank had step 9 at 9.03
  const ArmScore s = ScoreArm(log, {planned}, 4);
  CHECK(*s.faults[0].recover_s == Approx(10.53 - 7.2));
  CHECK(*s.faults[0].stall_s == Approx(10.53 - 9.03));
  CHECK(s.healthy_restarts == 0);  // rank 3's new pid is the move
  Fault unplanned{"kill", 2, 9.5, 10, 9.6, "", std::nullopt};
  CHECK_FALSE(ScoreArm(log, {unplanned}, 4).faults[0].stall_s);
}

TEST_CASE("migration score: mean step time counts the slow steps the median hides", "[bench]") {
  WorkloadLog log;
  for (int s = 0; s < 11; ++s) {  // 1 s steps; step 5 -> 6 takes 3 s (a periodic check)
    const double t = s + (s >= 6 ? 2.0 : 0.0);
    for (int r = 0; r < 4; ++r) log.commits.push_back({r, s, 10 + r, t});
  }
  const ArmScore s = ScoreArm(log, {}, 4);
  CHECK(*s.step_s == Approx(1.0));
  CHECK(*s.step_mean_s == Approx(12.0 / 10));
}

TEST_CASE("migration score: summaries and overhead", "[bench]") {
  const Stat st = Summarize({3, 1, 2, 10});
  CHECK(*st.p50 == 2.5);
  CHECK(*st.max == 10);
  CHECK_FALSE(Summarize({}).p50);
  CHECK(*OverheadPercent(1.01, 1.0) == Approx(1.0));
  CHECK_FALSE(OverheadPercent(std::nullopt, 1.0));
}

}  // namespace
}  // namespace lockstep::bench::migration
