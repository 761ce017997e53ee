// Stable (cross-process, cross-version) non-cryptographic hashing: FNV-1a 64.
// Used for node ids on the probe wire and for the hashes of applied objects.
// Never use it where an attacker chooses inputs to collide (it is not keyed).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep {

// FNV-1a 64 of `data`.
constexpr uint64_t Fnv1a64(std::string_view data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : data) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Fnv1a64 as 16 lower-case hex digits (for annotations such as config hashes).
std::string StableHash(std::string_view data);

}  // namespace lockstep
