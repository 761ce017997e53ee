// Peer selection: each node probes a small random set of peers (10-20 in
// Huygens) regardless of cluster size. Deterministic for a given seed and
// candidate set (candidates are ordered by name before sampling), so a
// restart with the same inputs probes the same peers. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/agent/config.h"

namespace lockstep::agent {

// Returns min(k, |candidates without self and duplicates|) peers, sorted by name.
std::vector<PeerConfig> SelectPeers(std::vector<PeerConfig> candidates, const std::string& self, int k,
                                    uint64_t seed);

}  // namespace lockstep::agent
