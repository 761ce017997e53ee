// NodeId: a node's 64-bit identity on the probe wire, derived from its
// Kubernetes node name (FNV-1a 64). Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <string_view>

namespace lockstep::agent {

using NodeId = uint64_t;

// FNV-1a 64 of the name. Never 0 for a non-empty name in practice; 0 means "none".
constexpr NodeId NodeIdFromName(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace lockstep::agent
