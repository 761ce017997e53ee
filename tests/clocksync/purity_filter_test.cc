#include <catch2/catch.hpp>

#include <random>

#include "lockstep/clocksync/purity_filter.h"

namespace lockstep::clocksync {
namespace {

// Spacing deltas: pure pairs see Gaussian stamp jitter, queued pairs are
// stretched or compressed by microseconds.
int64_t Delta(std::mt19937_64& rng, double sigma, double queued_fraction) {
  if (std::uniform_real_distribution<double>(0, 1)(rng) < queued_fraction) {
    const double q = std::uniform_real_distribution<double>(2000, 50000)(rng);
    return std::llround(std::uniform_int_distribution<int>(0, 1)(rng) ? q : -q);
  }
  return std::llround(std::normal_distribution<double>(0, sigma)(rng));
}

TEST_CASE("purity filter learns its guard band from the spread of spacing differences", "[clocksync]") {
  std::mt19937_64 rng(1);
  PurityFilter f;
  for (int i = 0; i < 128; ++i) f.Observe(Delta(rng, 50, 0.4));
  f.Relearn();
  // Learned from data, not the initial guess: ~4 sigma of the pure core.
  CHECK(f.sigma_ns() == Approx(50).epsilon(0.35));
  CHECK(f.guard_ns() == Approx(200).epsilon(0.35));
  CHECK(f.IsPure(60));
  CHECK(f.IsPure(-60));
  CHECK_FALSE(f.IsPure(2000));   // a queued pair
  CHECK_FALSE(f.IsPure(-2000));  // a compressed pair
}

TEST_CASE("purity filter rejects queued pairs and keeps pure ones", "[clocksync]") {
  std::mt19937_64 rng(2);
  PurityFilter f;
  for (int i = 0; i < 128; ++i) f.Observe(Delta(rng, 20, 0.5));
  f.Relearn();
  int pure_kept = 0, queued_kept = 0;
  for (int i = 0; i < 1000; ++i) {
    pure_kept += f.IsPure(Delta(rng, 20, 0.0));
    queued_kept += f.IsPure(Delta(rng, 20, 1.0));
  }
  CHECK(pure_kept > 980);
  CHECK(queued_kept == 0);
}

TEST_CASE("purity filter uses the initial guard until it has enough history", "[clocksync]") {
  PurityFilter f({.min_samples = 16, .initial_guard_ns = 7000});
  for (int i = 0; i < 10; ++i) f.Observe(i);
  f.Relearn();
  CHECK(f.guard_ns() == 7000);
}

TEST_CASE("purity filter guard tracks a change of jitter over its sliding history", "[clocksync]") {
  std::mt19937_64 rng(3);
  PurityFilter f({.history = 128});
  for (int i = 0; i < 128; ++i) f.Observe(Delta(rng, 1000, 0.2));
  f.Relearn();
  const double before = f.guard_ns();
  for (int i = 0; i < 128; ++i) f.Observe(Delta(rng, 10, 0.2));
  f.Relearn();
  CHECK(before > 2500);
  CHECK(f.guard_ns() < 80);
  CHECK(f.guard_ns() >= PurityOptions{}.min_guard_ns);
}

}  // namespace
}  // namespace lockstep::clocksync
