// Estimator: the Huygens engine. Feed it one window of probes, call Solve(), get
// every node's offset and drift against fabric time with an error bound.
//
//   Estimator est = *Estimator::Create({});
//   for (each received probe) est.AddSample(sample);   // or AddPair()
//   Result<Solution> s = est.Solve(window_end_ns);      // every ~2 s
//   discipline.Update(s->Model(self), now_local);       // clock_discipline.h
//
// Pipeline per Solve (all pure computation, no I/O):
//  1. coded-pair purity filter, guard band learned per receiving node
//     (purity_filter.h);
//  2. per edge a<b: max-margin line between forward and reverse points on a's
//     clock (edge_fit.h) -> offset, drift, margin, sigmas;
//  3. network effect (network_solver.h): weighted least squares over the whole
//     probe graph, for drifts (weights 1/drift_sigma^2) then offsets at the
//     middle of the window's data (each edge is referenced at its data's centre,
//     where its line is sharpest, and moved to the common instant with the
//     network's drifts, not its own slope; weights 1/offset_sigma^2), with Huber
//     reweighting; the offsets are then carried to t_ref with the drifts;
//  4. gauge per connected component (see GaugeMode) and per-node uncertainty:
//     sigma_i^2 = s_i^2 / sum_j w_ij, where s_i^2 is the node's (shrunk) reduced
//     chi-square of its post-correction edge residuals, so loop inconsistency
//     (per-edge asymmetry, bad edges) widens the bound of the nodes it touches.
//     error_bound = bound_sigmas * sigma_i + asymmetry_allowance_ns.
//  5. tracking (track_wander_ppb_per_sqrt_s > 0, not with kMeanZero): each
//     node's (offset, drift) is Kalman-filtered across windows, with the
//     window's estimate as the measurement and a random-walk frequency as the
//     process; the node's sigmas are then the filter's. One window of software
//     stamps is rough (the testbed's per-edge fits scatter ~100-250 ns); the
//     clocks are far more predictable than that over a few windows.
//
// Fabric time. F is defined by the gauge: with kMeanZero, sum of node offsets is
// zero in each component (the mean clock); with kContinuous (default) each
// component is shifted so that the nodes that were also in the previous solution
// keep, on average, their predicted offsets: F continues smoothly and does not
// jump when any node (or several) leaves or joins. No node is ever the reference.
// kAnchored is kContinuous for a distributed solve: the predictions are the
// models the nodes are serving (AddAnchor, from gossip) rather than this
// estimator's own previous solution, so every solver is pulled to the same F
// and a newcomer joins it at once. Anchors are weighted by 1/bound^2, and those
// that disagree with the weighted median by more than their bound (a node that
// started its own F) are left out. A component without anchors is mean-zero.
//
// Per-node asymmetry (a node's egress vs ingress stamping latency) biases that
// node's offset and cannot be detected; asymmetry_allowance_ns is where an
// operator who knows the hardware budgets for it. Per-edge asymmetry shows up in
// EdgeReport::residual_ns (asymmetry = d_min_fwd - d_min_rev).
//
// Central vs per-node solve. The simulator and e2e testbed run one central solve
// over all edges. In the agent each node measures only its own edges. A fit
// needs both directions, so a peer returns the receive stamps of the probes it
// got (ProbePairs, e.g. piggybacked on its own probes) and the node AddPair()s
// them next to the pairs it received itself. It then fits its edges (step 2),
// gossips its EdgeSummary records (a few dozen bytes per edge) and adds its
// peers' summaries with AddEdgeSummary() (duplicates of an edge: the locally
// measured one wins, else the smallest sigma). The network solve is
// deterministic and independent of input order, so nodes holding the same
// summaries agree exactly with GaugeMode::kMeanZero, but kMeanZero's F jumps by
// (offset of the node)/N when a node leaves or joins, and nodes take that jump
// in different windows. kContinuous depends on each solver's own history, so
// solvers would drift apart. The agent therefore uses kAnchored: each node also
// gossips the model it serves, and every solver keeps those models on average.
//
// Thread-compatible: one owner thread. Memory: ~32 bytes per pair held until
// Solve, ~0.5 KB per receiving node of purity history, O(edges) per solve.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "lockstep/clocksync/clock_discipline.h"
#include "lockstep/clocksync/edge_fit.h"
#include "lockstep/clocksync/network_solver.h"
#include "lockstep/clocksync/purity_filter.h"
#include "lockstep/clocksync/types.h"
#include "lockstep/common/result.h"

namespace lockstep::clocksync {

enum class GaugeMode { kMeanZero, kContinuous, kAnchored };

// A tracked node state: offset and drift (against fabric time) and their
// covariance [[pxx, pxr], [pxr, prr]].
struct TrackState {
  double x = 0, r = 0;
  double pxx = 0, pxr = 0, prr = 0;
  uint32_t windows = 0;  // windows this track has absorbed (1: it starts with this one)
};

struct EstimatorOptions {
  PurityOptions purity;
  EdgeFitOptions fit;                  // fit.outlier_rise_ns 0 => outlier_guard_multiple * guard
  double outlier_guard_multiple = 3.0;
  NetworkOptions network;
  double cg_offset_tolerance_ns = 0.05;  // network.abs_tolerance for the offset solve
  double cg_drift_tolerance = 1e-11;     // ... and for the drift solve
  GaugeMode gauge = GaugeMode::kContinuous;
  int64_t continuity_max_age_ns = 60'000'000'000;  // forget a vanished node's last estimate
  double bound_sigmas = 3.0;
  double asymmetry_allowance_ns = 0;
  // Tracking (kContinuous and kAnchored only; 0 disables): each node's offset
  // and drift are Kalman-filtered across windows, assuming this random-walk
  // frequency noise of the clocks against fabric time (ppb/sqrt(s)). A window's
  // estimate more than 5 sigmas from the tracked prediction restarts the track.
  double track_wander_ppb_per_sqrt_s = 10;
  // Warm-up: while a track has absorbed at most this many windows (a new
  // node, or a track restarted by the gate), its offset sigma is at least
  // track_warmup_sigma_multiple times the window's own: the purity guard and
  // the drift are still being learned, and a single window's sigma was seen to
  // be overconfident on the testbed in the first seconds after LOCKED.
  uint32_t track_warmup_windows = 3;
  double track_warmup_sigma_multiple = 2.0;
  // Queueing that the max-margin line cannot see. An edge's fitted offset is
  // off by half the difference of the queueing its two directions kept even
  // in their fastest probes (u_fwd - u_rev) / 2, and those fastest probes
  // also widen the gap between the envelopes: margin = quiet margin +
  // (u_fwd + u_rev) / 2. So |offset error| <= margin - quiet margin (plus the
  // path's intrinsic asymmetry, which asymmetry_allowance_ns budgets). The
  // estimator keeps each edge's smallest margin seen (its quiet margin; it
  // rises by margin_floor_rise_ns per window it is not met, so a path that
  // became longer for good is re-learned in minutes) and adds the excess to
  // the edge's offset sigma before the network solve (not to its drift sigma:
  // a steady excess does not tilt the line, and excess / 1 s there made the
  // tracked drifts too slow to follow, 2.5 us p99 in a testbed run). Such an edge then weighs little, and a node whose edges
  // are all loaded gets a bound that covers it. On the loaded testbed the
  // edges through a shaped link kept margins 0.6-0.8 us above their quiet
  // 3.7 us while their offsets were off by 0.3-0.6 us (their loop residuals),
  // with window sigmas of 40-50 ns. 0 disables.
  double margin_excess_sigmas = 1.0;
  double margin_floor_rise_ns = 1.0;
  NodeId max_node_id = 1u << 24;       // larger ids are rejected (InvalidArgument)
};

// What one node gossips about an edge it measured: enough to join a network solve.
struct EdgeSummary {
  NodeId a = 0, b = 0;     // a < b; values are b relative to a, on a's clock
  int64_t t_ref_ns = 0;    // reference instant (a's clock) of offset_ns
  double offset_ns = 0;    // c_b - c_a when a's clock reads t_ref_ns
  double drift = 0;        // d(c_b - c_a)/dt_a
  double margin_ns = 0;    // max-margin half-gap (<= min one-way delay)
  double offset_sigma_ns = 0;
  double drift_sigma = 0;
  bool drift_identified = false;
};

struct EdgeReport {
  EdgeSummary fit;          // the edge-only estimate
  bool local = true;        // false: added with AddEdgeSummary
  uint32_t fwd_pairs = 0, rev_pairs = 0, fwd_pure = 0, rev_pure = 0, trimmed = 0;
  // After the network solve:
  double residual_ns = 0;   // network (x_b - x_a) minus the edge's own estimate
  double d_min_fwd_ns = 0;  // = margin - residual: min one-way delay a->b
  double d_min_rev_ns = 0;  // = margin + residual: min one-way delay b->a
  double weight = 0;        // final offset weight (after Huber)
  double margin_excess_ns = 0;  // margin above the edge's quiet margin (see margin_excess_sigmas)
};

struct NodeEstimate {
  bool valid = false;              // false: node had no fitted edge this window
  uint32_t component = kNoComponent;
  double offset_ns = 0;            // c_i - F at F = t_ref
  double drift = 0;                // d(c_i - F)/dF
  double offset_sigma_ns = 0;
  double drift_sigma = 0;
  double error_bound_ns = 0;       // at t_ref
  uint32_t degree = 0;             // fitted edges
  uint32_t track_windows = 0;      // windows its track has absorbed (0: tracking off)
};

struct SolveStats {
  uint64_t pairs = 0, pure_pairs = 0, unmatched_samples = 0, rejected = 0;
  uint32_t edges_fit = 0, edges_skipped = 0, edges_remote = 0, outliers_trimmed = 0;
  uint32_t cg_iterations = 0;
  bool cg_converged = true;
};

struct Solution {
  int64_t t_ref_ns = 0;
  std::vector<NodeEstimate> nodes;  // by NodeId
  std::vector<EdgeReport> edges;    // sorted by (a, b)
  uint32_t num_components = 0;
  SolveStats stats;

  // The node's model for ClockDiscipline; invalid if the node has no estimate.
  NodeModel Model(NodeId node) const;
};

class Estimator {
 public:
  static Result<Estimator> Create(const EstimatorOptions& options);

  // Adds one probe; the two probes of a pair are matched by (src, dst,
  // pair_seq). A probe left unmatched for a whole window is dropped.
  // Errors (the sample is ignored and counted in SolveStats::rejected):
  // InvalidArgument for src == dst, an id above max_node_id, index_in_pair > 1.
  Status AddSample(const ProbeSample& sample);
  // Adds a matched pair (same errors; also a pair whose probes are > 2 s apart).
  // O(1); the receiver's purity history learns from it immediately.
  Status AddPair(const ProbePair& pair);
  // Adds an edge fitted elsewhere (gossip). A locally measured edge wins.
  Status AddEdgeSummary(const EdgeSummary& summary);
  // GaugeMode::kAnchored: the model `node` is serving (c_node - F), as it
  // gossiped it, for the next Solve only. The latest call per node wins.
  // InvalidArgument for an invalid model, an id above max_node_id or a
  // non-finite or negative bound.
  Status AddAnchor(NodeId node, const NodeModel& model);
  // Capacity hint for the pairs of one window.
  void Reserve(size_t pairs) { records_.reserve(pairs); }

  // Solves the window made of everything added since the previous Solve, at the
  // reference instant window_end_ns, and clears the window. Errors:
  // InvalidArgument if window_end_ns is not after the previous one.
  Result<Solution> Solve(int64_t window_end_ns);

  // Purity guard band currently learned for pairs received by `node` (ns).
  double GuardNs(NodeId node) const;

 private:
  explicit Estimator(const EstimatorOptions& options) : options_(options) {}
  struct Record;
  struct Prepared;
  void FitEdges(int64_t t_ref, Prepared& prep, Solution& sol);
  void SolveNetworkAndGauge(Prepared& prep, Solution& sol);

  struct Record {
    NodeId src, dst;
    int64_t tx0, rx0;
    int32_t dtx, drx;  // tx1 - tx0, rx1 - rx0
  };
  struct PendingKey {
    uint64_t nodes;
    uint32_t seq;
    bool operator==(const PendingKey&) const = default;
  };
  struct PendingHash {
    size_t operator()(const PendingKey& k) const {
      return std::hash<uint64_t>()(k.nodes * 0x9E3779B97F4A7C15ull ^ k.seq);
    }
  };

  EstimatorOptions options_;
  std::vector<Record> records_;
  std::vector<uint64_t> keyed_;  // scratch: records grouped by edge
  size_t last_edge_count_ = 0;
  NodeId max_id_ = 0;  // largest id seen in any pair
  std::vector<EdgeSummary> remote_;
  std::unordered_map<NodeId, NodeModel> anchors_;  // for the next Solve
  std::vector<PurityFilter> purity_;  // by receiving NodeId, grown on demand
  std::unordered_map<PendingKey, ProbeSample, PendingHash> pending_, pending_old_;
  uint64_t rejected_ = 0;
  // Previous solution, for continuity of the gauge, warm starts and hints.
  // Each node's last estimate (kept across windows where it is missing, up to
  // continuity_max_age_ns), for gauge continuity, warm starts and drift hints.
  struct PrevNode {
    bool valid = false;
    bool tracked = false;  // pxx, pxr, prr hold the tracked covariance
    int64_t t_ref_ns = 0;
    int64_t t_solve_ns = 0;  // the solve instant of that window
    double offset_ns = 0, drift = 0;
    double pxx = 0, pxr = 0, prr = 0;
    uint32_t track_windows = 0;  // TrackState::windows
  };
  bool tracking() const {
    return options_.track_wander_ppb_per_sqrt_s > 0 && options_.gauge != GaugeMode::kMeanZero;
  }
  void Track(NodeId v, double x_solve, double x_sigma, Prepared& prep, Solution& sol);
  // Each edge's quiet margin (smallest seen, rising slowly), by (a << 32 | b).
  struct MarginFloor {
    double floor_ns = 0;
    int64_t seen_ns = 0;  // window end it was last updated
  };
  std::unordered_map<uint64_t, MarginFloor> margin_floor_;
  void ApplyMarginExcess(int64_t window_end_ns, Solution& sol);
  bool have_prev_ = false;
  int64_t prev_t_ref_ = 0;
  std::vector<PrevNode> prev_;
};

}  // namespace lockstep::clocksync
