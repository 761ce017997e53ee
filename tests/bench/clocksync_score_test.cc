#include <catch2/catch.hpp>

#include "clocksync_score.h"

namespace lockstep::bench {
namespace {

Sample S(double base, double err, double bound, const std::string& state = "LOCKED") {
  return Sample{base, err, bound, state};
}

TEST_CASE("percentiles interpolate linearly between ranks", "[bench]") {
  CHECK_FALSE(Percentile({}, 50).has_value());
  CHECK(*Percentile({7}, 99) == 7);
  CHECK(*Percentile({4, 1, 3, 2}, 50) == Approx(2.5));
  CHECK(*Percentile({1, 2, 3, 4, 5}, 0) == 1);
  CHECK(*Percentile({1, 2, 3, 4, 5}, 100) == 5);
  CHECK(*Percentile({0, 10}, 99) == Approx(9.9));
  CHECK(Median({3, 1, 2}) == 2);
  CHECK(Median({}) == 0);
  CHECK(*Mean({1, 2, 6}) == 3);
  CHECK(RoundTo(12.345, 1) == Approx(12.3));
  CHECK(RoundTo(-0.126, 2) == Approx(-0.13));
}

TEST_CASE("metrics text parses into series - sums include labelled series", "[bench]") {
  auto m = ParseMetrics(
      "# HELP lockstep_probe_sent_total Probes sent\n"
      "# TYPE lockstep_probe_sent_total counter\n"
      "lockstep_probe_sent_total{rail=\"0\"} 100\n"
      "lockstep_probe_sent_total{rail=\"1\"} 50 1700000000\n"
      "lockstep_probe_sent_totalx 7\n"
      "lockstep_clock_pure_probe_fraction 0.75\r\n"
      "bad line\n"
      "lockstep_nan NaN\n"
      "lockstep_junk 12abc\n");
  CHECK(m.at("lockstep_clock_pure_probe_fraction") == Approx(0.75));
  CHECK(m.count("lockstep_probe_sent_total{rail=\"0\"}") == 1);
  CHECK(MetricSum(m, "lockstep_probe_sent_total") == 150);
  CHECK(MetricSum(m, "lockstep_missing") == 0);
  CHECK(m.count("bad") == 0);
  CHECK(m.count("lockstep_junk") == 0);
  CHECK(m.count("lockstep_nan") == 1);
}

TEST_CASE("pairwise errors of constant offsets all within bounds", "[bench]") {
  std::vector<Round> rounds;
  for (int k = 0; k < 10; ++k) {
    double t = k * 200e6;
    rounds.push_back({{0, S(t, 10, 50)}, {1, S(t, -20, 50)}, {2, S(t, 40, 50)}});
  }
  PairScore p = ScorePairs(rounds);
  CHECK(p.pairs == 30);
  CHECK(p.fabric_rate == Approx(0).margin(1e-15));
  CHECK(*p.max_ns == Approx(60));
  CHECK(*p.p50_ns == Approx(30));
  REQUIRE(p.worst.has_value());
  CHECK(p.worst->first == 1);
  CHECK(p.worst->second == 2);
  CHECK(p.violations == 0);
  CHECK(*p.over_bound_max == Approx(0.6));
  CHECK(*p.bound_p50_ns == 50);
  CHECK(*p.spread_p50_ns == 0);
}

TEST_CASE("the fabric rate carries samples taken at different instants to one", "[bench]") {
  // Fabric time runs 10 ppm fast against the base; every node is exact, but
  // the nodes are read up to 1 ms apart.
  const double rate = 10e-6;
  std::vector<Round> rounds;
  for (int k = 0; k < 20; ++k) {
    Round r;
    for (int i = 0; i < 4; ++i) {
      double base = k * 200e6 + i * 250e3;
      r[i] = S(base, 1000 + rate * base, 5);
    }
    rounds.push_back(r);
  }
  PairScore p = ScorePairs(rounds);
  CHECK(p.fabric_rate == Approx(rate));
  CHECK(*p.max_ns < 1e-3);  // 7.5 ns apart uncorrected
  CHECK(p.violations == 0);
  CHECK(*p.spread_p50_ns == Approx(750e3));
}

TEST_CASE("violations count pairs beyond bound_i + bound_j - FREERUN is not scored", "[bench]") {
  std::vector<Round> rounds = {
      {{0, S(0, 0, 10)}, {1, S(0, 25, 10)}, {2, S(0, 1e6, 1e9, "FREERUN")}},
      {{0, S(1e8, 0, 10)}, {1, S(1e8, 15, 10), }, {2, S(1e8, 5, 10, "HOLDOVER")}},
      {{0, S(2e8, 0, 10)}},  // one scored node: no pair
  };
  PairScore p = ScorePairs(rounds);
  CHECK(p.pairs == 4);
  CHECK(p.violations == 1);  // 25 > 20
  CHECK(*p.max_ns == Approx(25));
  CHECK(*p.over_bound_max == Approx(1.25));
  CHECK(*p.bound_p50_ns == 10);  // FREERUN's bound left out
}

TEST_CASE("no scored pairs: no figures", "[bench]") {
  PairScore p = ScorePairs({{{0, S(0, 0, 10, "FREERUN")}}});
  CHECK(p.pairs == 0);
  CHECK_FALSE(p.p50_ns.has_value());
  CHECK_FALSE(p.max_ns.has_value());
  CHECK_FALSE(p.worst.has_value());
  CHECK_FALSE(p.bound_p50_ns.has_value());
}

}  // namespace
}  // namespace lockstep::bench
