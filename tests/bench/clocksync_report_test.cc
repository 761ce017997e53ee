#include <catch2/catch.hpp>

#include "clocksync_report.h"

namespace lockstep::bench {
namespace {

ScenarioResult Result(const std::string& name, double p50, double p99, size_t violations = 0) {
  ScenarioResult r;
  r.scenario = name;
  r.nodes = 8;
  r.rounds = 10;
  r.pairs.pairs = 280;
  r.pairs.p50_ns = p50;
  r.pairs.p99_ns = p99;
  r.pairs.max_ns = p99 * 1.5;
  r.pairs.violations = violations;
  ChronyScore c;
  c.pairs = 100;
  c.p50_ns = 4 * p50;
  c.p99_ns = 3 * p99;
  c.max_ns = 2 * p99 * 1.5;
  r.chrony = c;
  r.measure_s = 6.04;
  r.time_to_locked_s = 5.123;
  r.chrony_time_to_first_sync_s = 2.345;
  r.unsynced_samples = 3;
  r.agent_cpu_percent = 1.234;
  r.probe_kbps_per_node = 123.45;
  r.pure_probe_fraction = 0.9;
  return r;
}

TEST_CASE("the JSON line carries the headline scenario's figures at the top level", "[bench]") {
  std::map<char, ScenarioResult> results = {{'a', Result("a_idle", 20, 80)},
                                            {'b', Result("b_asym_bursty_load", 30, 100.04)},
                                            {'c', Result("c_late_join", 25, 90)}};
  auto j = Summary(results, 61.26, 100);
  CHECK(j["benchmark"] == "clocksync-testbed");
  CHECK(j["headline_scenario"] == "b_asym_bursty_load");
  for (const char* k : {"nodes", "p50_error_ns", "p99_error_ns", "max_error_ns", "chrony_p50_error_ns",
                        "chrony_p99_error_ns", "chrony_max_error_ns", "chrony_p99_over_p99", "time_to_locked_s",
                        "pure_probe_fraction", "agent_cpu_percent", "probe_kbps_per_node"}) {
    INFO(k);
    CHECK(j.contains(k));
  }
  CHECK(j["p99_error_ns"] == 100.0);
  CHECK(j["time_to_locked_s"] == 5.12);
  CHECK(j["time_to_first_sync_s"]["lockstep"] == 5.12);
  CHECK(j["time_to_first_sync_s"]["chrony"] == 2.35);
  CHECK(j["scenarios"][1]["lockstep_unsynced_samples"] == 3);
  CHECK(j["chrony_p99_error_ns"] == 300.1);
  CHECK(j["chrony_p50_over_p50"] == 4.0);
  CHECK(j["chrony_p99_over_p99"] == 3.0);
  CHECK(j["chrony_max_over_max"] == 2.0);
  CHECK(j["asymmetry_allowance_ns"] == 100.0);
  CHECK(j["goals"]["p99_le_300ns"] == true);
  CHECK(j["goals"]["p50_le_100ns"] == true);
  CHECK(j["goals"]["p99_below_chrony"] == true);
  CHECK(j["wall_s"] == 61.3);
  REQUIRE(j["scenarios"].size() == 3);
  CHECK(j["scenarios"][0]["scenario"] == "c_late_join");  // run order c a b e d
  CHECK(j["scenarios"][2]["measure_s"] == 6.0);
}

TEST_CASE("without scenario b the headline is a - missing figures are null", "[bench]") {
  ScenarioResult a = Result("a_idle", 20, 80);
  a.chrony.reset();
  auto j = Summary({{'a', a}}, 1);
  CHECK(j["headline_scenario"] == "a_idle");
  CHECK(j["asymmetry_allowance_ns"] == 0.0);
  CHECK(j["chrony_p99_error_ns"].is_null());
  CHECK(j["chrony_p99_over_p99"].is_null());
  CHECK(j["goals"]["p99_below_chrony"].is_null());
}

TEST_CASE("check mode fails on violations beyond the allowed fraction or big errors or unlocked states", "[bench]") {
  std::map<char, ScenarioResult> ok = {{'a', Result("a_idle", 20, 80, 2)}};
  CHECK(CheckFailures(ok, 0.01).empty());
  CHECK(CheckFailures(ok, 0).size() == 1);
  ScenarioResult bad = Result("e_link_down", 20, 8000);  // max 12 us
  bad.non_locked_states_seen = {"h3:HOLDOVER"};
  auto failures = CheckFailures({{'e', bad}}, 0);
  REQUIRE(failures.size() == 2);
  CHECK(failures[0] == "e_link_down: max pairwise error 12000.0 ns >= 10 us");
  CHECK(failures[1] == "e_link_down: states other than LOCKED: h3:HOLDOVER");
  ScenarioResult none = Result("d_node_dies", 0, 0);
  none.pairs = {};
  CHECK(CheckFailures({{'d', none}}, 0) == std::vector<std::string>{"d_node_dies: no pair scored"});
}

TEST_CASE("the table shows every figure and a dash for missing ones", "[bench]") {
  ScenarioResult r = Result("a_idle", 20, 80);
  r.worst_pair = std::make_pair(std::string("h1"), std::string("h6"));
  std::string t = Table(r);
  CHECK(t.find("== scenario a_idle: 8 nodes, 10 sampling rounds, 280 pair samples over 6.0 s") != std::string::npos);
  CHECK(t.find("20.0 / 80.0 / 120.0") != std::string::npos);
  CHECK(t.find("h1 - h6") != std::string::npos);
  CHECK(t.find("chrony pairwise error p50 / p99 / max (ns)   80.0 / 240.0 / 240.0 (100 pair samples)") !=
        std::string::npos);
  CHECK(t.find("chrony / Lockstep p50, p99, max              4.00, 3.00, 2.00") != std::string::npos);
  CHECK(t.find("probe packets/s per node                     -") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::bench
