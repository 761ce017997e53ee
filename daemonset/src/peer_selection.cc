#include "lockstep/agent/peer_selection.h"

#include <algorithm>
#include <random>

namespace lockstep::agent {

std::vector<PeerConfig> SelectPeers(std::vector<PeerConfig> candidates, const std::string& self, int k,
                                    uint64_t seed) {
  std::erase_if(candidates, [&](const PeerConfig& p) { return p.name == self; });
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  candidates.erase(std::unique(candidates.begin(), candidates.end(),
                               [](const auto& a, const auto& b) { return a.name == b.name; }),
                   candidates.end());
  size_t want = static_cast<size_t>(std::max(k, 0));
  if (candidates.size() > want) {
    // Partial Fisher-Yates on mt19937_64 (no std::uniform_int_distribution:
    // its output differs between standard libraries).
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < want; ++i) {
      size_t j = i + static_cast<size_t>(rng() % (candidates.size() - i));
      std::swap(candidates[i], candidates[j]);
    }
    candidates.resize(want);
    std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  }
  return candidates;
}

}  // namespace lockstep::agent
