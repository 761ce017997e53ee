#include <catch2/catch.hpp>

#include <stdexcept>

#include "clocksync_truth.h"

namespace lockstep::bench {
namespace {

AgentStatus A(const std::string& node, double offset_ns, int64_t bound, int64_t local, int64_t true_offset,
              double drift_ppb = 0, const std::string& state = "LOCKED") {
  AgentStatus a;
  a.node = node;
  a.state = state;
  a.offset_ns = offset_ns;
  a.error_bound_ns = bound;
  a.peers = 2;
  a.probe_targets = 2;
  a.local_ns = local;
  a.true_offset_ns = true_offset;
  a.true_drift_ppb = drift_ppb;
  return a;
}

TEST_CASE("true error: disagreement with the fabric time the agents share, wherever it is anchored", "[bench]") {
  // Clocks 100, 200, 600 ns ahead of the base; the agents agree that fabric
  // time is base + 5000 (anchored, not the mean clock): no error at all.
  std::vector<AgentStatus> s = {A("n0", -4900, 50, 1100, 100), A("n1", -4800, 50, 1200, 200),
                                A("n2", -4400, 50, 1600, 600), A("n3", 1e9, 50, 1000, 0, 0, "FREERUN")};
  auto rows = ScoreTruth(s);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].fabric_minus_base_ns == Approx(5000));
  for (int i = 0; i < 3; ++i) CHECK(rows[i].true_error_ns == Approx(0).margin(1e-6));
  CHECK(AllInside({rows[0], rows[1], rows[2]}));
  // n2 puts fabric time 90 ns earlier than the others: the consensus moves by
  // 30 and the errors split -30 / -30 / +60 (they subtract to the pairwise 90).
  s[2].offset_ns = -4310;
  rows = ScoreTruth(s);
  CHECK(rows[0].fabric_minus_base_ns == Approx(4970));
  CHECK(rows[0].true_error_ns == Approx(-30));
  CHECK(rows[1].true_error_ns == Approx(-30));
  CHECK(rows[2].true_error_ns == Approx(60));
  CHECK(rows[0].inside_bound);
  CHECK_FALSE(rows[2].inside_bound);  // 60 > 50
  CHECK_FALSE(rows[3].inside_bound);  // FREERUN: no model, not in the consensus
  CHECK_FALSE(AllInside(rows));
}

TEST_CASE("readings at different base instants are carried with the drifts", "[bench]") {
  // Fabric time runs 500 ppb fast against the base. n0 (true drift 0) is read
  // at base 0, n1 (true drift 1000 ppb) 1 s later, both exact: the consensus
  // is 0 at n0's instant and 500 at n1's, and nobody is in error.
  AgentStatus n0 = A("n0", 0, 10, 0, 0, 0), n1 = A("n1", 1500, 10, 1'000'000'000 + 2000, 2000, 1000);
  n0.drift_ppb = -500;
  n1.drift_ppb = 500;
  auto rows = ScoreTruth({n0, n1});
  CHECK(rows[0].fabric_minus_base_ns == Approx(0).margin(1e-6));
  CHECK(rows[1].fabric_minus_base_ns == Approx(500));
  CHECK(rows[0].true_error_ns == Approx(0).margin(1e-6));
  CHECK(rows[1].true_error_ns == Approx(0).margin(1e-6));
}

TEST_CASE("unbounded or unlocked agents are never inside", "[bench]") {
  auto rows = ScoreTruth({A("n0", 0, int64_t{1} << 62, 0, 0), A("n1", 0, 100, 0, 0, 0, "HOLDOVER"),
                          A("n2", 0, 100, 0, 0)});
  CHECK_FALSE(rows[0].error_bound_ns.has_value());
  CHECK_FALSE(rows[0].inside_bound);
  CHECK_FALSE(rows[1].inside_bound);
  CHECK(rows[2].inside_bound);
  auto j = TruthJson(rows);
  CHECK(j["ok"] == false);
  CHECK(j["agents"][0]["error_bound_ns"].is_null());
  CHECK(j["agents"][2]["error_bound_ns"] == 100);
  std::string table = TruthTable(rows);
  CHECK(table.find("NODE") == 0);
  CHECK(table.find("inf") != std::string::npos);
  CHECK(table.find("max bound 100 ns") != std::string::npos);
}

TEST_CASE("a /status document parses - without ground truth it is an error", "[bench]") {
  auto doc = nlohmann::json::parse(R"({"node":"gpu-node-0","state":"LOCKED","offset_ns":-12.5,"drift_ppb":3.5,
      "error_bound_ns":40,"peers":7,"probe_targets":["a","b"],"now_ns":5,
      "virtual_clock":{"local_ns":123456789,"true_offset_ns":-1000,"true_drift_ppb":20.5}})");
  AgentStatus a = ParseAgentStatus(doc);
  CHECK(a.node == "gpu-node-0");
  CHECK(a.offset_ns == -12.5);
  CHECK(a.drift_ppb == 3.5);
  CHECK(a.error_bound_ns == 40);
  CHECK(a.probe_targets == 2);
  CHECK(a.local_ns == 123456789);
  CHECK(a.true_offset_ns == -1000);
  CHECK(a.true_drift_ppb == 20.5);
  doc.erase("virtual_clock");
  CHECK_THROWS_WITH(ParseAgentStatus(doc), Catch::Contains("no ground truth"));
  CHECK_THROWS_AS(ParseAgentStatus(nlohmann::json::parse(R"({"node":"x","virtual_clock":{}})")),
                  std::runtime_error);
}

}  // namespace
}  // namespace lockstep::bench
