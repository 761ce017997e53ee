// SolveNetwork: the "network effect". Pairwise measurements of node differences
// (offsets, or drifts) must sum to zero around every loop of the probe graph;
// weighted least squares over the whole graph removes most per-edge error:
//
//   min_x  sum_e w_e (x_b - x_a - v_e)^2
//
// The normal equations are L x = r with L the weighted graph Laplacian, solved by
// conjugate gradient with a Jacobi (degree) preconditioner on a CSR matrix:
// O(edges) memory and O(edges) per iteration; a random K-regular probe graph is
// an expander, so the iteration count stays flat as N grows (100k nodes is fine).
//
// Gauge. L is singular: each connected component can shift by a constant. The
// solver returns, per component, the solution with mean zero over the component's
// nodes (sum x = 0): no node is the reference, so losing any single node cannot
// break the solve. Nodes without edges get no value (component kNoComponent).
// Callers that need continuity across windows shift each component afterwards
// (the Estimator does; see estimator.h).
//
// What it can and cannot see. A per-edge error (e.g. an asymmetric minimum delay
// on one path) breaks loop consistency and shows up in that edge's residual. A
// per-node error (a node's egress vs ingress asymmetry, which biases every edge
// of that node by the same amount) is indistinguishable from that node's clock
// offset: it cancels around every loop and is undetectable by any probing.
//
// Robustness: `robust_passes` rounds of Huber reweighting (residuals beyond
// huber_k robust sigmas are down-weighted) keep a few bad edges from spreading.
//
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "lockstep/clocksync/types.h"

namespace lockstep::clocksync {

inline constexpr uint32_t kNoComponent = std::numeric_limits<uint32_t>::max();

struct NetworkEdge {
  NodeId a = 0, b = 0;  // measures x_b - x_a
  double value = 0;
  double weight = 0;    // > 0, typically 1 / sigma^2; edges with weight <= 0 are ignored
};

struct NetworkOptions {
  // CG stops when every node's Jacobi-scaled residual (its weighted imbalance,
  // in the units of x) is at most abs_tolerance, or |r| <= tolerance * |rhs|.
  double abs_tolerance = 0;
  double tolerance = 1e-12;
  uint32_t max_iterations = 5000;
  uint32_t robust_passes = 1;     // Huber reweighting rounds after the first solve
  double huber_k = 2.5;
};

struct NetworkSolution {
  std::vector<double> x;               // by NodeId; mean zero per component
  std::vector<uint32_t> component;     // by NodeId; kNoComponent if no edges
  uint32_t num_components = 0;
  std::vector<double> residual;        // by input edge: (x_b - x_a) - value
  std::vector<double> weight;          // by input edge, after robust reweighting
  uint32_t iterations = 0;             // total CG iterations over all passes
  bool converged = true;
};

// REQUIRES: every edge's a, b < num_nodes; warm_start empty or of size num_nodes.
NetworkSolution SolveNetwork(uint32_t num_nodes, std::span<const NetworkEdge> edges,
                             const NetworkOptions& options = {},
                             std::span<const double> warm_start = {});

}  // namespace lockstep::clocksync
