// Peer selection: each node probes a small random set of peers (10-20 in
// Huygens) regardless of cluster size. The choice is rendezvous hashing:
// every candidate gets a score hash(seed, name) and the k best win. So it is
// deterministic for a given seed and candidate set (input order does not
// matter, a restart probes the same peers), and stable as the set changes:
// a node joining or leaving changes at most one of the k choices, instead of
// reshuffling every node's peers at once. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/agent/config.h"

namespace lockstep::agent {

// Returns min(k, |candidates without self and duplicates|) peers, sorted by name.
std::vector<PeerConfig> SelectPeers(std::vector<PeerConfig> candidates, const std::string& self, int k,
                                    uint64_t seed);

// The same choice over names.
std::vector<std::string> SelectPeerNames(std::vector<std::string> candidates, const std::string& self, int k,
                                         uint64_t seed);

}  // namespace lockstep::agent
