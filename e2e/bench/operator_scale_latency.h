// Node created -> FabricHealth seen, over every node of an operator-scale
// round. Pure; thread-compatible (no shared state).
//
// Each node is timed from just BEFORE its create call (so the API server's
// create latency is part of it). A node whose FabricHealth was never seen is
// a failure, not a missing sample: it counts as infinitely late, so p99 (and
// max) are unbounded (nullopt) once more than 1% (any) of the nodes never
// showed up.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace lockstep::bench {

struct NodeLatencyStats {
  size_t nodes = 0, seen = 0, never_seen = 0;
  std::optional<double> p50, p99, max;  // nearest rank over all nodes; nullopt: unbounded
};

// per_node: the latency of each node of the round, nullopt if never seen.
NodeLatencyStats ScoreNodeLatencies(const std::vector<std::optional<double>>& per_node);

}  // namespace lockstep::bench
