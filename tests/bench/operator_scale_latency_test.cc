#include <catch2/catch.hpp>

#include "operator_scale_latency.h"

namespace lockstep::bench {
namespace {

std::vector<std::optional<double>> Ramp(int n) {  // 1, 2, ..., n ms
  std::vector<std::optional<double>> v;
  for (int i = n; i >= 1; --i) v.push_back(i);
  return v;
}

TEST_CASE("node latencies: nearest rank over every node of the round", "[bench]") {
  NodeLatencyStats s = ScoreNodeLatencies(Ramp(200));
  CHECK(s.nodes == 200);
  CHECK(s.seen == 200);
  CHECK(s.never_seen == 0);
  CHECK(*s.p50 == 100);
  CHECK(*s.p99 == 198);
  CHECK(*s.max == 200);
  CHECK_FALSE(ScoreNodeLatencies({}).p50.has_value());
}

TEST_CASE("node latencies: a node never seen is a failure, counted as infinitely late", "[bench]") {
  auto v = Ramp(200);
  v[0] = std::nullopt;  // the 200 ms node never showed up
  NodeLatencyStats s = ScoreNodeLatencies(v);
  CHECK(s.never_seen == 1);
  CHECK(s.seen == 199);
  CHECK(*s.p50 == 100);
  CHECK(*s.p99 == 198);          // rank 198 of 200 is still a seen node
  CHECK_FALSE(s.max.has_value());  // unbounded
  v[1] = v[2] = std::nullopt;    // 3 of 200 (1.5%) never seen
  s = ScoreNodeLatencies(v);
  CHECK(s.never_seen == 3);
  CHECK_FALSE(s.p99.has_value());
  CHECK(*s.p50 == 100);
}

}  // namespace
}  // namespace lockstep::bench
