// Python's random.Random(seed).randint, bit for bit: MT19937 seeded with
// init_by_array, rejection sampling on getrandbits. The testbed draws its
// virtual clocks with it, so a --seed gives the same clocks as the earlier
// Python testbed did (and results stay comparable across the port).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace lockstep::bench {

class PyRandom {
 public:
  explicit PyRandom(uint64_t seed);
  // Uniform in [lo, hi], both included (hi - lo < 2^63).
  int64_t RandInt(int64_t lo, int64_t hi);
  uint32_t Next();           // genrand_uint32
  uint64_t Bits(int k);      // getrandbits(k), 1 <= k <= 64

 private:
  void InitGenrand(uint32_t s);
  std::array<uint32_t, 624> mt_{};
  std::size_t mti_ = 625;
};

}  // namespace lockstep::bench
