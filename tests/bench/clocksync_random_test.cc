#include <catch2/catch.hpp>

#include "clocksync_random.h"

namespace lockstep::bench {
namespace {

// Expected values from CPython: random.Random(seed).randint / getrandbits.
TEST_CASE("PyRandom draws what Python's random.Random draws", "[bench]") {
  PyRandom r(1);
  CHECK(r.RandInt(-100'000'000, 100'000'000) == -63931873);
  CHECK(r.RandInt(-50'000, 50'000) == 24606);
  CHECK(r.RandInt(1, int64_t{1} << 31) == 271041746);
  CHECK(r.RandInt(-100'000'000, 100'000'000) == -31530429);
  CHECK(r.RandInt(-50'000, 50'000) == -34545);
  CHECK(r.RandInt(1, int64_t{1} << 31) == 2127877500);

  PyRandom big((uint64_t{1} << 40) + 5);  // a seed of two 32-bit words
  CHECK(big.RandInt(0, int64_t{1} << 62) == 252978130375956704);
  CHECK(big.Bits(40) == 835504107977ULL);
}

TEST_CASE("PyRandom stays inside the range", "[bench]") {
  PyRandom r(7);
  for (int i = 0; i < 1000; ++i) {
    int64_t v = r.RandInt(-3, 3);
    CHECK(v >= -3);
    CHECK(v <= 3);
  }
  CHECK(r.RandInt(5, 5) == 5);
}

}  // namespace
}  // namespace lockstep::bench
