#include "operator_scale_latency.h"

#include <algorithm>
#include <cmath>

namespace lockstep::bench {

NodeLatencyStats ScoreNodeLatencies(const std::vector<std::optional<double>>& per_node) {
  NodeLatencyStats s;
  s.nodes = per_node.size();
  std::vector<double> seen;
  for (const auto& v : per_node) {
    if (v) seen.push_back(*v);
  }
  std::sort(seen.begin(), seen.end());
  s.seen = seen.size();
  s.never_seen = s.nodes - s.seen;
  // Nearest rank over all nodes, the never-seen ones sorted last (infinitely late).
  auto rank = [&](double q) -> std::optional<double> {
    if (s.nodes == 0) return std::nullopt;
    size_t k = std::clamp<size_t>(static_cast<size_t>(std::ceil(q * static_cast<double>(s.nodes))), 1, s.nodes);
    if (k > s.seen) return std::nullopt;
    return seen[k - 1];
  };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  s.max = rank(1.0);
  return s;
}

}  // namespace lockstep::bench
