#include "clocksync_random.h"

#include <cstddef>
#include <vector>

namespace lockstep::bench {
namespace {
constexpr std::size_t kN = 624, kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU, kUpper = 0x80000000U, kLower = 0x7fffffffU;
}  // namespace

void PyRandom::InitGenrand(uint32_t s) {
  mt_[0] = s;
  for (mti_ = 1; mti_ < kN; ++mti_) {
    mt_[mti_] = 1812433253U * (mt_[mti_ - 1] ^ (mt_[mti_ - 1] >> 30)) + static_cast<uint32_t>(mti_);
  }
}

// init_by_array with the seed's 32-bit words, least significant first.
PyRandom::PyRandom(uint64_t seed) {
  std::vector<uint32_t> key = {static_cast<uint32_t>(seed)};
  if (seed >> 32) key.push_back(static_cast<uint32_t>(seed >> 32));
  InitGenrand(19650218U);
  std::size_t i = 1, j = 0;
  for (std::size_t k = kN > key.size() ? kN : key.size(); k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (std::size_t k = kN - 1; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000U;
  mti_ = kN;
}

uint32_t PyRandom::Next() {
  if (mti_ >= kN) {
    for (std::size_t k = 0; k < kN; ++k) {
      uint32_t y = (mt_[k] & kUpper) | (mt_[(k + 1) % kN] & kLower);
      mt_[k] = mt_[(k + kM) % kN] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    }
    mti_ = 0;
  }
  uint32_t y = mt_[mti_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

uint64_t PyRandom::Bits(int k) {
  if (k <= 32) return Next() >> (32 - k);
  uint64_t lo = Next();
  uint64_t hi = Next() >> (64 - k);
  return lo | (hi << 32);
}

int64_t PyRandom::RandInt(int64_t lo, int64_t hi) {
  uint64_t n = static_cast<uint64_t>(hi - lo) + 1;
  int k = 0;
  while (k < 64 && (n >> k) != 0) ++k;  // n.bit_length()
  uint64_t r = Bits(k);
  while (r >= n) r = Bits(k);
  return lo + static_cast<int64_t>(r);
}

}  // namespace lockstep::bench
