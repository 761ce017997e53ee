// NodeId: a node's 64-bit identity on the probe wire, derived from its
// Kubernetes node name (FNV-1a 64). Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <string_view>

#include "lockstep/common/hash.h"

namespace lockstep::agent {

using NodeId = uint64_t;

// FNV-1a 64 of the name. Never 0 for a non-empty name in practice; 0 means "none".
constexpr NodeId NodeIdFromName(std::string_view name) { return Fnv1a64(name); }

}  // namespace lockstep::agent
