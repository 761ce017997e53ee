// The traffic control policy (contention from one-way delays, with
// hysteresis), the agent's path verdicts gating streams, and DelayStats.
#include <catch2/catch.hpp>

#include <optional>
#include <random>
#include <vector>

#include "lockstep/nccl/delay_stats.h"
#include "lockstep/nccl/traffic_control.h"

using namespace lockstep::nccl;

namespace {
using Delays = std::vector<std::optional<int64_t>>;
constexpr int64_t kUs = 1000;
}  // namespace

TEST_CASE(
    "a stream whose delay stays above its baseline while its peers' do not is contended after enter_after updates",
    "[nccl][traffic]") {
  TrafficControl tc(3, {.ratio = 2.0, .margin_ns = 200 * kUs, .enter_after = 3, .exit_after = 4});
  for (int i = 0; i < 5; ++i) REQUIRE(tc.Update({100 * kUs, 110 * kUs, 90 * kUs}).empty());
  REQUIRE(tc.Baseline(0) == 100 * kUs);
  // Stream 1 goes to 2 ms (excess 1.89 ms > max(200 us, 110 us)).
  REQUIRE(tc.Update({100 * kUs, 2000 * kUs, 90 * kUs}).empty());
  REQUIRE(tc.Update({100 * kUs, 2000 * kUs, 90 * kUs}).empty());
  auto changes = tc.Update({100 * kUs, 2000 * kUs, 90 * kUs});
  REQUIRE(changes.size() == 1);
  REQUIRE(changes[0] == WeightChange{.stream = 1, .contended = true, .delay_ns = 2000 * kUs, .baseline_ns = 113 * kUs});
  REQUIRE(tc.Contended(1));
  REQUIRE(tc.Weight(1) == 0.25);
  REQUIRE(tc.Weight(0) == 1.0);
  // (The baseline rose 1 us per update until then.) It stays contended while
  // the delay stays up, and its baseline no longer creeps.
  for (int i = 0; i < 20; ++i) REQUIRE(tc.Update({100 * kUs, 2000 * kUs, 90 * kUs}).empty());
  REQUIRE(tc.Baseline(1) == 113 * kUs);
  // Back after exit_after clean updates, not before.
  for (int i = 0; i < 3; ++i) REQUIRE(tc.Update({100 * kUs, 120 * kUs, 90 * kUs}).empty());
  changes = tc.Update({100 * kUs, 120 * kUs, 90 * kUs});
  REQUIRE(changes.size() == 1);
  REQUIRE_FALSE(changes[0].contended);
  REQUIRE(tc.Weight(1) == 1.0);
  REQUIRE(tc.rebalances() == 2);
}

TEST_CASE("a delay between half the threshold and the threshold changes nothing (hysteresis)", "[nccl][traffic]") {
  TrafficControl tc(2, {.ratio = 2.0, .margin_ns = 200 * kUs, .enter_after = 2, .exit_after = 2});
  REQUIRE(tc.Update({100 * kUs, 100 * kUs}).empty());
  // 250 us excess on stream 0: above the 200 us threshold -> contended.
  (void)tc.Update({350 * kUs, 100 * kUs});
  REQUIRE(tc.Update({350 * kUs, 100 * kUs}).size() == 1);
  // 150 us excess: under the threshold but above half of it: stays contended.
  for (int i = 0; i < 10; ++i) REQUIRE(tc.Update({250 * kUs, 100 * kUs}).empty());
  REQUIRE(tc.Contended(0));
  // An interrupted run starts again.
  (void)tc.Update({150 * kUs, 100 * kUs});
  (void)tc.Update({300 * kUs, 100 * kUs});
  REQUIRE(tc.Update({150 * kUs, 100 * kUs}).empty());
  REQUIRE(tc.Update({150 * kUs, 100 * kUs}).size() == 1);
  REQUIRE_FALSE(tc.Contended(0));
}

TEST_CASE("when every stream slows down nothing is contended (a loaded connection, nowhere to shift)",
          "[nccl][traffic]") {
  TrafficControl tc(4, {.enter_after = 1});
  REQUIRE(tc.Update({100 * kUs, 100 * kUs, 100 * kUs, 100 * kUs}).empty());
  for (int i = 0; i < 10; ++i) REQUIRE(tc.Update({3000 * kUs, 2900 * kUs, 3100 * kUs, 3000 * kUs}).empty());
  // Three of four slow: for each of them the others' median is loaded too.
  TrafficControl most(4, {.enter_after = 1});
  (void)most.Update({100 * kUs, 100 * kUs, 100 * kUs, 100 * kUs});
  REQUIRE(most.Update({3000 * kUs, 3000 * kUs, 3000 * kUs, 100 * kUs}).empty());
  // Two of four: the two calm ones can take their chunks.
  TrafficControl half(4, {.enter_after = 1});
  (void)half.Update({100 * kUs, 100 * kUs, 100 * kUs, 100 * kUs});
  REQUIRE(half.Update({3000 * kUs, 3000 * kUs, 100 * kUs, 100 * kUs}).size() == 2);
}

TEST_CASE("a stream without a sample keeps its state, and a lone stream is never contended", "[nccl][traffic]") {
  TrafficControl tc(2, {.enter_after = 2, .exit_after = 2});
  (void)tc.Update({100 * kUs, 100 * kUs});
  (void)tc.Update({5000 * kUs, 100 * kUs});
  REQUIRE(tc.Update({5000 * kUs, 100 * kUs}).size() == 1);
  for (int i = 0; i < 10; ++i) REQUIRE(tc.Update({std::nullopt, 100 * kUs}).empty());
  REQUIRE(tc.Contended(0));
  TrafficControl one(1, {.enter_after = 1});
  (void)one.Update({100 * kUs});
  for (int i = 0; i < 5; ++i) REQUIRE(one.Update({9000 * kUs}).empty());
}

TEST_CASE("a lasting rise of an uncontested stream's delay becomes its new baseline", "[nccl][traffic]") {
  TrafficControl tc(2, {.margin_ns = 200 * kUs, .enter_after = 1000, .baseline_rise_ns = 10 * kUs});
  (void)tc.Update({100 * kUs, 100 * kUs});
  for (int i = 0; i < 100; ++i) (void)tc.Update({600 * kUs, 100 * kUs});
  REQUIRE(tc.Baseline(0) == 600 * kUs);
  REQUIRE_FALSE(tc.Contended(0));
}

TEST_CASE("flapping delays around the threshold do not make weights oscillate", "[nccl][traffic][property]") {
  std::mt19937_64 rng(3);
  TrafficControl tc(3, {.ratio = 2.0, .margin_ns = 200 * kUs, .enter_after = 4, .exit_after = 8});
  (void)tc.Update({100 * kUs, 100 * kUs, 100 * kUs});
  // Stream 2 alternates at random between clean and contended samples, never
  // four contended in a row: it must never change.
  int run = 0;
  for (int i = 0; i < 2000; ++i) {
    bool high = rng() % 2 == 0 && run < 3;
    run = high ? run + 1 : 0;
    REQUIRE(tc.Update({100 * kUs, 100 * kUs, high ? 900 * kUs : 100 * kUs}).empty());
  }
  REQUIRE(tc.rebalances() == 0);
}

TEST_CASE("the options are validated", "[nccl][traffic]") {
  REQUIRE(ValidateTrafficControlOptions({}).ok());
  REQUIRE_FALSE(ValidateTrafficControlOptions({.ratio = 1.0}).ok());
  REQUIRE_FALSE(ValidateTrafficControlOptions({.margin_ns = 0}).ok());
  REQUIRE_FALSE(ValidateTrafficControlOptions({.enter_after = 0}).ok());
  REQUIRE_FALSE(ValidateTrafficControlOptions({.contended_weight = 0.0}).ok());
  REQUIRE_FALSE(ValidateTrafficControlOptions({.contended_weight = 1.5}).ok());
}

TEST_CASE("the agent's verdicts gate streams but never leave none", "[nccl][traffic]") {
  REQUIRE(UsableStreams({true, true, true}, {true, false, true}) == std::vector<bool>{true, false, true});
  REQUIRE(UsableStreams({false, true, true}, {true, false, true}) == std::vector<bool>{false, false, true});
  // Every open stream's path down: no path is better, keep them all.
  REQUIRE(UsableStreams({true, true, false}, {false, false, true}) == std::vector<bool>{true, true, false});
  // No verdict for a stream (the agent does not watch its path): usable.
  REQUIRE(UsableStreams({true, true}, {false}) == std::vector<bool>{false, true});
  REQUIRE(WeightedWindow(8, 0.25) == 2);
  REQUIRE(WeightedWindow(2, 0.25) == 1);
  REQUIRE(WeightedWindow(8, 1.0) == 8);
}

TEST_CASE("a stream is stalled only with data in flight and no TCP ack for the whole timeout", "[nccl][traffic]") {
  REQUIRE(AckStalled(3, 60, 60, 60));
  REQUIRE(AckStalled(1, 500, 200, 60));
  REQUIRE_FALSE(AckStalled(0, 500, 500, 60));  // nothing in flight: idle, not stalled
  REQUIRE_FALSE(AckStalled(3, 500, 59, 60));   // acks keep coming: slow (contended), not stalled
  REQUIRE_FALSE(AckStalled(3, 10, 5000, 60));  // idle until just now: its last ack is old news
  REQUIRE_FALSE(AckStalled(3, 500, 5000, 0));  // timeout off
}

TEST_CASE("delay stats give nearest-rank percentiles of the recent samples and a smoothed value", "[nccl][traffic]") {
  DelayStats d;
  REQUIRE_FALSE(d.Percentile(0.5).has_value());
  REQUIRE_FALSE(d.Smoothed().has_value());
  for (int i = 1; i <= 100; ++i) d.Add(i * kUs);
  REQUIRE(d.Percentile(0.5) == 50 * kUs);
  REQUIRE(d.Percentile(0.99) == 99 * kUs);
  REQUIRE(d.Percentile(1.0) == 100 * kUs);
  REQUIRE(*d.Smoothed() > 90 * kUs);
  REQUIRE(*d.Smoothed() < 100 * kUs);
  // Only the last kDelaySamples count.
  for (size_t i = 0; i < kDelaySamples; ++i) d.Add(-5);
  REQUIRE(d.Percentile(0.99) == -5);
  REQUIRE(d.count() == 100 + kDelaySamples);
}
