#include "lockstep/agent/peer_selection.h"

#include <algorithm>
#include <cstddef>
#include <map>

#include "lockstep/agent/node_id.h"

namespace lockstep::agent {
namespace {

// SplitMix64 finalizer: a well-mixed 64-bit score (the same everywhere,
// unlike std::hash or the standard distributions).
uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<std::string> SelectPeerNames(std::vector<std::string> candidates, const std::string& self, int k,
                                         uint64_t seed) {
  std::erase(candidates, self);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  const size_t want = static_cast<size_t>(std::max(k, 0));
  if (candidates.size() > want) {
    auto score = [&](const std::string& name) { return std::make_pair(Mix(seed ^ NodeIdFromName(name)), name); };
    std::nth_element(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(want), candidates.end(),
                     [&](const std::string& a, const std::string& b) { return score(a) > score(b); });
    candidates.resize(want);
    std::sort(candidates.begin(), candidates.end());
  }
  return candidates;
}

std::vector<PeerConfig> SelectPeers(std::vector<PeerConfig> candidates, const std::string& self, int k,
                                    uint64_t seed) {
  std::map<std::string, PeerConfig> by_name;
  std::vector<std::string> names;
  for (PeerConfig& p : candidates) {
    if (by_name.contains(p.name)) continue;  // duplicates collapse (the first wins)
    names.push_back(p.name);
    by_name.emplace(p.name, std::move(p));
  }
  std::vector<PeerConfig> out;
  for (const std::string& n : SelectPeerNames(std::move(names), self, k, seed)) out.push_back(by_name.at(n));
  return out;
}

}  // namespace lockstep::agent
