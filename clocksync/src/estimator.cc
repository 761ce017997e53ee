#include "lockstep/clocksync/estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace lockstep::clocksync {
namespace {

constexpr double kUnknownDriftSigma = 1e-4;
constexpr double kChiShrink = 4.0;     // prior weight of the global chi-square
constexpr double kMinChiSquare = 0.25;
// kAnchored: an anchor counts if it is within 3 of its bounds + 100 ns of the median.
constexpr double kAnchorGateBounds = 3.0;
constexpr double kAnchorGateFloorNs = 100.0;
// Timestamps beyond +-2^62 ns (~146 years from the epoch) are rejected, so the
// difference of any two accepted ones (and of them and a window end) fits int64.
constexpr int64_t kMaxAbsTimestampNs = int64_t{1} << 62;
bool TimeInRange(int64_t t) { return t <= kMaxAbsTimestampNs && t >= -kMaxAbsTimestampNs; }

std::string Id(NodeId n) { return std::to_string(n); }

// kTrackGate: a window whose estimate is further than this many sigmas from
// the tracked prediction (chi-square, 2 dof) restarts the track from it.
constexpr double kTrackGate = 5.0;
// The tracked offset sigma is at least this fraction of the window's own.
constexpr double kTrackSigmaFloor = 0.5;

bool EdgeLess(const EdgeReport& x, const EdgeReport& y) {
  return x.fit.a != y.fit.a ? x.fit.a < y.fit.a : x.fit.b < y.fit.b;
}

// Random-walk frequency noise q (variance of drift per ns) over dt ns:
// x += r dt; P = F P F' + q [[dt^3/3, dt^2/2], [dt^2/2, dt]], F = [[1, dt], [0, 1]].
// The noise is that of `noise_dt` ns of wander (the caller may count from
// another instant than the state's).
void Propagate(TrackState& s, double dt, double q, double noise_dt) {
  const double a = std::abs(noise_dt);
  s.x += s.r * dt;
  const double pxx = s.pxx + 2 * dt * s.pxr + dt * dt * s.prr + q * a * a * a / 3;
  const double pxr = s.pxr + dt * s.prr + q * noise_dt * a / 2;
  s.prr += q * a;
  s.pxx = pxx;
  s.pxr = pxr;
}

}  // namespace

// Per-solve scratch shared by the steps.
struct Estimator::Prepared {
  uint32_t num_nodes = 0;
  std::vector<double> pred_offset;   // prediction from the previous solution
  std::vector<uint8_t> has_pred;
  // What the gauge keeps each node's offset and drift close to (weight 0: free).
  std::vector<double> gauge_w, gauge_offset, gauge_drift;
  int64_t t_solve = 0;             // instant of the offset solve (see Solve)
  std::vector<TrackState> track;   // by NodeId: tracked state at t_ref (tracking only)
};

NodeModel Solution::Model(NodeId node) const {
  NodeModel m;
  if (node >= nodes.size() || !nodes[node].valid) return m;
  const NodeEstimate& e = nodes[node];
  m.valid = true;
  m.t_ref_ns = t_ref_ns;
  m.offset_ns = e.offset_ns;
  m.drift = e.drift;
  m.error_bound_ns = e.error_bound_ns;
  m.drift_sigma = e.drift_sigma;
  m.track_windows = e.track_windows;
  return m;
}

Result<Estimator> Estimator::Create(const EstimatorOptions& o) {
  if (o.purity.history == 0 || !(o.purity.multiplier > 0)) {
    return InvalidArgument("clocksync: purity.history and purity.multiplier must be positive");
  }
  if (!(o.purity.min_guard_ns >= 0) || !(o.purity.max_guard_ns >= o.purity.min_guard_ns)) {
    return InvalidArgument("clocksync: purity guard bounds must satisfy 0 <= min_guard_ns <= max_guard_ns");
  }
  if (!(o.track_warmup_sigma_multiple >= 0) || !std::isfinite(o.track_warmup_sigma_multiple)) {
    return InvalidArgument("clocksync: track_warmup_sigma_multiple must be finite and >= 0");
  }
  if (!(o.margin_excess_sigmas >= 0) || !std::isfinite(o.margin_excess_sigmas) || !(o.margin_floor_rise_ns >= 0) ||
      !std::isfinite(o.margin_floor_rise_ns)) {
    return InvalidArgument("clocksync: margin_excess_sigmas and margin_floor_rise_ns must be finite and >= 0");
  }
  if (!(o.bound_sigmas > 0) || !(o.asymmetry_allowance_ns >= 0)) {
    return InvalidArgument("clocksync: bound_sigmas must be > 0 and asymmetry_allowance_ns >= 0");
  }
  if (o.max_node_id > kMaxNodeId) {
    return InvalidArgument("clocksync: max_node_id must be <= " + Id(kMaxNodeId) + " (got " +
                           Id(o.max_node_id) + ")");
  }
  if (!(o.network.tolerance > 0) || o.network.max_iterations == 0) {
    return InvalidArgument("clocksync: network.tolerance and network.max_iterations must be positive");
  }
  return Estimator(o);
}

Status Estimator::AddSample(const ProbeSample& s) {
  if (s.index_in_pair > 1) {
    ++rejected_;
    return InvalidArgument("clocksync: index_in_pair must be 0 or 1 (got " + Id(s.index_in_pair) + ")");
  }
  if (s.src == s.dst || s.src > options_.max_node_id || s.dst > options_.max_node_id) {
    ++rejected_;
    return InvalidArgument("clocksync: bad probe endpoints " + Id(s.src) + "->" + Id(s.dst));
  }
  const PendingKey key{(uint64_t{s.src} << 32) | s.dst, s.pair_seq};
  for (auto* map : {&pending_, &pending_old_}) {
    auto it = map->find(key);
    if (it == map->end() || it->second.index_in_pair == s.index_in_pair) continue;
    const ProbeSample& first = s.index_in_pair == 0 ? s : it->second;
    const ProbeSample& second = s.index_in_pair == 0 ? it->second : s;
    const ProbePair pair{s.src, s.dst, first.tx_local_ns, first.rx_local_ns,
                         second.tx_local_ns, second.rx_local_ns};
    map->erase(it);
    return AddPair(pair);
  }
  pending_[key] = s;
  return Status::Ok();
}

Status Estimator::AddPair(const ProbePair& p) {
  if (p.src == p.dst || p.src > options_.max_node_id || p.dst > options_.max_node_id) {
    ++rejected_;
    return InvalidArgument("clocksync: bad probe endpoints " + Id(p.src) + "->" + Id(p.dst));
  }
  if (!TimeInRange(p.tx0_ns) || !TimeInRange(p.rx0_ns) || !TimeInRange(p.tx1_ns) || !TimeInRange(p.rx1_ns)) {
    ++rejected_;
    return InvalidArgument("clocksync: probe timestamps must be within +-2^62 ns");
  }
  const int64_t dtx = p.tx1_ns - p.tx0_ns;
  const int64_t drx = p.rx1_ns - p.rx0_ns;
  constexpr int64_t kLim = std::numeric_limits<int32_t>::max();
  if (dtx > kLim || dtx < -kLim || drx > kLim || drx < -kLim) {
    ++rejected_;
    return InvalidArgument("clocksync: probe pair spacing over 2 s; the two probes of a pair "
                           "must be sent back to back");
  }
  records_.push_back({p.src, p.dst, p.tx0_ns, p.rx0_ns, static_cast<int32_t>(dtx),
                      static_cast<int32_t>(drx)});
  // The receiver's purity history learns as pairs arrive; the guard band is
  // recomputed once per window, in Solve.
  const NodeId top = std::max(p.src, p.dst);
  if (top >= purity_.size()) purity_.resize(top + 1, PurityFilter(options_.purity));
  purity_[p.dst].Observe(drx - dtx);
  max_id_ = std::max(max_id_, top);
  return Status::Ok();
}

Status Estimator::AddEdgeSummary(const EdgeSummary& s) {
  if (!TimeInRange(s.t_ref_ns) || !std::isfinite(s.offset_ns) || !std::isfinite(s.drift)) {
    ++rejected_;
    return InvalidArgument("clocksync: edge summary needs t_ref within +-2^62 ns and a finite fit");
  }
  if (s.a >= s.b || s.b > options_.max_node_id) {
    ++rejected_;
    return InvalidArgument("clocksync: edge summary needs a < b <= max_node_id (got " + Id(s.a) +
                           ", " + Id(s.b) + ")");
  }
  if (!(s.offset_sigma_ns > 0) || !(s.drift_sigma > 0)) {
    ++rejected_;
    return InvalidArgument("clocksync: edge summary sigmas must be positive");
  }
  remote_.push_back(s);
  return Status::Ok();
}

Status Estimator::AddAnchor(NodeId node, const NodeModel& model) {
  if (node > options_.max_node_id) return InvalidArgument("clocksync: anchor id " + Id(node) + " above max_node_id");
  if (!model.valid || !TimeInRange(model.t_ref_ns) || !std::isfinite(model.offset_ns) || !std::isfinite(model.drift) ||
      !(model.error_bound_ns >= 0) || !std::isfinite(model.error_bound_ns) || !(model.drift_sigma >= 0)) {
    return InvalidArgument("clocksync: anchor for node " + Id(node) + " needs a valid model with finite values");
  }
  anchors_[node] = model;
  return Status::Ok();
}

double Estimator::GuardNs(NodeId node) const {
  return node < purity_.size() ? purity_[node].guard_ns() : options_.purity.initial_guard_ns;
}

void Estimator::FitEdges(int64_t t_ref, Prepared& prep, Solution& sol) {
  const uint32_t n = prep.num_nodes;
  // 1. Purity: each receiver's guard band, from the history including this
  // window's pairs (observed in AddPair).
  std::vector<uint8_t> receiving(n, 0);
  for (const Record& r : records_) receiving[r.dst] = 1;
  for (uint32_t v = 0; v < n; ++v) if (receiving[v]) purity_[v].Relearn();

  // 2. Group records by edge: counting sort on a = min(src, dst), then sort each
  // bucket by (b, direction, arrival order).
  std::vector<uint32_t> start(n + 1, 0);
  for (const Record& r : records_) ++start[std::min(r.src, r.dst) + 1];
  for (uint32_t v = 0; v < n; ++v) start[v + 1] += start[v];
  std::vector<uint64_t>& keyed = keyed_;  // reused across windows: no page faults
  keyed.resize(records_.size());
  sol.edges.reserve(last_edge_count_ + remote_.size());
  {
    std::vector<uint32_t> fill(start.begin(), start.end() - 1);
    for (uint32_t i = 0; i < records_.size(); ++i) {
      const Record& r = records_[i];
      const NodeId a = std::min(r.src, r.dst), b = std::max(r.src, r.dst);
      const uint64_t dir = r.src == a ? 0 : 1;
      keyed[fill[a]++] = (((uint64_t{b} << 1) | dir) << 32) | i;
    }
  }
  std::vector<double> guard(n);  // compact copy: one cache line per 8 receivers
  for (NodeId v = 0; v < n; ++v) guard[v] = purity_[v].guard_ns();
  std::vector<EdgePoint> fwd, rev;
  for (NodeId a = 0; a < n; ++a) {
    const auto begin = keyed.begin() + start[a], end = keyed.begin() + start[a + 1];
    std::sort(begin, end);
    for (auto it = begin; it != end;) {
      const NodeId b = static_cast<NodeId>(*it >> 33);
      EdgeReport rep;
      fwd.clear(); rev.clear();
      for (; it != end && static_cast<NodeId>(*it >> 33) == b; ++it) {
        const Record& r = records_[static_cast<uint32_t>(*it)];
        const bool forward = ((*it >> 32) & 1) == 0;
        const int64_t tx1 = r.tx0 + r.dtx, rx1 = r.rx0 + r.drx;
        const bool pure = std::abs(static_cast<double>(int64_t{r.drx} - r.dtx)) <= guard[r.dst];
        if (forward) {
          ++rep.fwd_pairs;
          if (!pure) continue;
          ++rep.fwd_pure;
          fwd.push_back({static_cast<double>(r.tx0 - t_ref),
                         static_cast<double>(std::min(r.rx0 - r.tx0, rx1 - tx1))});
        } else {
          ++rep.rev_pairs;
          if (!pure) continue;
          ++rep.rev_pure;
          rev.push_back({static_cast<double>(r.rx0 - t_ref),
                         static_cast<double>(std::max(r.tx0 - r.rx0, tx1 - rx1))});
        }
      }
      sol.stats.pure_pairs += rep.fwd_pure + rep.rev_pure;
      EdgeFitOptions fo = options_.fit;
      if (fo.outlier_rise_ns == 0) {
        fo.outlier_rise_ns = options_.outlier_guard_multiple *
                             std::max(guard[a], guard[b]);
      }
      if (a < prev_.size() && b < prev_.size() && prev_[a].valid && prev_[b].valid) {
        fo.drift_hint = prev_[b].drift - prev_[a].drift;
      }
      Result<EdgeFitResult> fit = FitEdge(fwd, rev, fo);
      if (!fit.ok()) {
        ++sol.stats.edges_skipped;
        continue;
      }
      // Referenced at the data's centre, where the line is sharpest: the
      // network solve moves it to the solve instant with the network's drifts,
      // which are better than this edge's own.
      const double tc = std::round(fit->t_center_ns);
      rep.fit = {a, b, t_ref + static_cast<int64_t>(tc), fit->offset_ns + fit->drift * tc, fit->drift,
                 fit->margin_ns, fit->center_sigma_ns, fit->drift_sigma, fit->drift_identified};
      rep.trimmed = fit->fwd_trimmed + fit->rev_trimmed;
      sol.stats.outliers_trimmed += rep.trimmed;
      sol.edges.push_back(rep);
    }
  }
  sol.stats.edges_fit = static_cast<uint32_t>(sol.edges.size());
  last_edge_count_ = sol.edges.size();

  // Gossiped edges (at their own reference instants); local ones win.
  std::sort(remote_.begin(), remote_.end(), [](const EdgeSummary& x, const EdgeSummary& y) {
    return x.a != y.a ? x.a < y.a : (x.b != y.b ? x.b < y.b : x.offset_sigma_ns < y.offset_sigma_ns);
  });
  const size_t local_count = sol.edges.size();
  for (size_t i = 0; i < remote_.size(); ++i) {
    const EdgeSummary& s = remote_[i];
    if (i > 0 && remote_[i - 1].a == s.a && remote_[i - 1].b == s.b) continue;
    EdgeReport rep;
    rep.fit = s;
    if (std::binary_search(sol.edges.begin(), sol.edges.begin() + static_cast<std::ptrdiff_t>(local_count),
                           rep, EdgeLess)) {
      continue;
    }
    rep.local = false;
    sol.edges.push_back(rep);
    ++sol.stats.edges_remote;
  }
  std::inplace_merge(sol.edges.begin(), sol.edges.begin() + static_cast<std::ptrdiff_t>(local_count),
                     sol.edges.end(), EdgeLess);
}

void Estimator::SolveNetworkAndGauge(Prepared& prep, Solution& sol) {
  const uint32_t n = prep.num_nodes;
  const auto& edges = sol.edges;
  auto prev_valid = [&](NodeId v) { return v < prev_.size() && prev_[v].valid; };

  // Drifts first: every edge with an identified drift, in fabric units.
  std::vector<NetworkEdge> de;
  std::vector<double> warm(n, 0.0);
  for (NodeId v = 0; v < n; ++v) if (prev_valid(v)) warm[v] = prev_[v].drift;
  for (size_t e = 0; e < edges.size(); ++e) {
    const EdgeSummary& f = edges[e].fit;
    if (!f.drift_identified) continue;
    de.push_back({f.a, f.b, f.drift * (1.0 + warm[f.a]), 1.0 / (f.drift_sigma * f.drift_sigma)});
  }
  NetworkOptions dopt = options_.network;
  dopt.abs_tolerance = options_.cg_drift_tolerance;
  NetworkSolution dsol = SolveNetwork(n, de, dopt, warm);
  sol.stats.cg_iterations += dsol.iterations;
  sol.stats.cg_converged = sol.stats.cg_converged && dsol.converged;
  std::vector<double> rho(n, 0.0);
  for (NodeId v = 0; v < n; ++v) {
    rho[v] = dsol.component[v] != kNoComponent ? dsol.x[v] : (prev_valid(v) ? prev_[v].drift : 0.0);
  }

  // Per-node uncertainty from weights and the shrunk reduced chi-square.
  auto node_sigma = [&](std::span<const NetworkEdge> in, const NetworkSolution& s) {
    const auto nodes_in_graph = static_cast<uint32_t>(
        std::count_if(s.component.begin(), s.component.end(), [](uint32_t c) { return c != kNoComponent; }));
    std::vector<double> wsum(n, 0.0), chi(n, 0.0);
    std::vector<uint32_t> deg(n, 0);
    double chi_total = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      const double c = in[k].weight * s.residual[k] * s.residual[k];
      chi_total += c;
      for (NodeId v : {in[k].a, in[k].b}) { wsum[v] += s.weight[k]; chi[v] += c; ++deg[v]; }
    }
    const double dof = static_cast<double>(in.size()) - (nodes_in_graph - s.num_components);
    const double global = dof > 0 ? chi_total / dof : 1.0;
    std::vector<double> sigma(n, 0.0);
    for (NodeId v = 0; v < n; ++v) {
      if (deg[v] == 0 || !(wsum[v] > 0)) continue;
      const double d = deg[v];
      const double eff = std::max(d - 2.0, 0.5 * d);
      const double s2 = std::max(kMinChiSquare, (chi[v] + kChiShrink * global) / (eff + kChiShrink));
      sigma[v] = std::sqrt(s2 / wsum[v]);
    }
    return sigma;
  };
  std::vector<double> dsig = node_sigma(de, dsol);
  for (NodeId v = 0; v < n; ++v) if (dsol.component[v] == kNoComponent) dsig[v] = kUnknownDriftSigma;

  // Offsets, solved at t_solve: the middle of the local edges' data, where
  // their lines are sharpest (see Solve), then carried to t_ref with the
  // network's drifts. Edge e's offset is on a's clock at its own reference
  // instant; moving it to a's clock reading t_solve uses the network drift
  // difference beta (much better than the edge's own slope), and from there to
  // fabric instant t_solve adds beta * x_a (a's clock reads t_solve at fabric
  // t_solve - x_a). x_a is the previous solution's prediction, or a first pass
  // for nodes without one.
  const int64_t t_solve = prep.t_solve;
  const double lever = static_cast<double>(sol.t_ref_ns - t_solve);
  std::vector<NetworkEdge> oe(edges.size());
  std::vector<double> beta(edges.size()), moved(edges.size());
  for (size_t e = 0; e < edges.size(); ++e) {
    const EdgeSummary& f = edges[e].fit;
    const bool solved = dsol.component[f.a] != kNoComponent && dsol.component[f.b] != kNoComponent;
    beta[e] = solved ? (rho[f.b] - rho[f.a]) / (1.0 + rho[f.a]) : f.drift;
    const double dt = static_cast<double>(t_solve - f.t_ref_ns);
    const double beta_sigma = solved ? std::hypot(dsig[f.a], dsig[f.b]) : f.drift_sigma;
    moved[e] = f.offset_ns + beta[e] * dt;
    const double sigma = std::hypot(std::hypot(f.offset_sigma_ns, beta_sigma * dt),
                                    options_.margin_excess_sigmas * edges[e].margin_excess_ns);
    oe[e] = {f.a, f.b, moved[e], 1.0 / (sigma * sigma)};
  }
  std::vector<double> xhat(n, 0.0);
  for (NodeId v = 0; v < n; ++v) if (prep.has_pred[v]) xhat[v] = prep.pred_offset[v];
  auto apply_gauge = [&](NetworkSolution& s, std::vector<double>* drift) {
    if (options_.gauge == GaugeMode::kMeanZero) return;
    // Per component: the weighted median of (reference - x) over the gauge
    // nodes, then the weighted mean of those within their bound of it (kAnchored
    // gates out a node serving another F; kContinuous has no bounds: all count).
    std::vector<std::vector<std::pair<double, NodeId>>> by_comp(s.num_components);
    for (NodeId v = 0; v < n; ++v) {
      if (s.component[v] != kNoComponent && prep.gauge_w[v] > 0) {
        by_comp[s.component[v]].push_back({prep.gauge_offset[v] - s.x[v], v});
      }
    }
    std::vector<double> shift(s.num_components, 0.0), dshift(s.num_components, 0.0);
    std::vector<uint8_t> has(s.num_components, 0);
    for (uint32_t c = 0; c < s.num_components; ++c) {
      auto& r = by_comp[c];
      if (r.empty()) continue;
      std::sort(r.begin(), r.end());
      // No anchor weighs more than the component's median anchor weight: a
      // node claiming a tiny bound (weight 1/bound^2) cannot outvote the rest,
      // so one node moves fabric time by at most its share of a typical weight
      // (and the gate leaves it out when it is far off).
      std::vector<double> ws;
      for (const auto& [d, v] : r) ws.push_back(prep.gauge_w[v]);
      std::nth_element(ws.begin(), ws.begin() + static_cast<std::ptrdiff_t>(ws.size() / 2), ws.end());
      const double cap = ws[ws.size() / 2];
      auto weight = [&](NodeId v) { return std::min(prep.gauge_w[v], cap); };
      double total = 0, acc = 0, median = r.front().first;
      for (const auto& [d, v] : r) total += weight(v);
      for (const auto& [d, v] : r) {
        acc += weight(v);
        if (acc >= total / 2) { median = d; break; }
      }
      double w = 0, sum = 0, dsum = 0;
      for (const auto& [d, v] : r) {
        const bool gated = options_.gauge == GaugeMode::kAnchored &&
                           std::abs(d - median) > kAnchorGateBounds / std::sqrt(prep.gauge_w[v]) + kAnchorGateFloorNs;
        if (gated) continue;
        w += weight(v);
        sum += weight(v) * d;
        if (drift != nullptr) dsum += weight(v) * (prep.gauge_drift[v] - (*drift)[v]);
      }
      has[c] = 1;  // w > 0: the median's own node always counts
      shift[c] = sum / w;
      dshift[c] = dsum / w;
    }
    for (NodeId v = 0; v < n; ++v) {
      const uint32_t c = s.component[v];
      if (c == kNoComponent || !has[c]) continue;
      s.x[v] += shift[c];
      if (drift != nullptr) (*drift)[v] += dshift[c];
    }
  };
  // Offsets at t_solve -> at t_ref (the gauge's references are at t_ref).
  auto to_t_ref = [&](NetworkSolution& s) {
    for (NodeId v = 0; v < n; ++v) if (s.component[v] != kNoComponent) s.x[v] += rho[v] * lever;
  };
  NetworkOptions oopt = options_.network;
  oopt.abs_tolerance = options_.cg_offset_tolerance_ns;
  NetworkOptions first = oopt;
  first.robust_passes = 0;
  // The first pass is only needed for nodes without a prediction (first window,
  // newcomers): a prediction ~100 ns off moves an edge by drift * 100 ns, 0.01 ns.
  bool all_predicted = true;
  for (const EdgeReport& r : edges) all_predicted = all_predicted && prep.has_pred[r.fit.a];
  if (!all_predicted) {
    for (size_t e = 0; e < edges.size(); ++e) oe[e].value = moved[e] + beta[e] * xhat[edges[e].fit.a];
    NetworkSolution pass0 = SolveNetwork(n, oe, first, xhat);
    to_t_ref(pass0);
    apply_gauge(pass0, nullptr);
    for (NodeId v = 0; v < n; ++v) if (!prep.has_pred[v]) xhat[v] = pass0.x[v];
    sol.stats.cg_iterations += pass0.iterations;
    sol.stats.cg_converged = sol.stats.cg_converged && pass0.converged;
  }
  for (size_t e = 0; e < edges.size(); ++e) oe[e].value = moved[e] + beta[e] * xhat[edges[e].fit.a];
  NetworkSolution osol = SolveNetwork(n, oe, oopt, xhat);
  to_t_ref(osol);
  apply_gauge(osol, &rho);
  sol.stats.cg_iterations += osol.iterations;
  sol.stats.cg_converged = sol.stats.cg_converged && osol.converged;
  sol.num_components = osol.num_components;

  const std::vector<double> osig = node_sigma(oe, osol);  // at t_solve

  sol.nodes.assign(n, NodeEstimate{});
  for (NodeId v = 0; v < n; ++v) {
    NodeEstimate& ne = sol.nodes[v];
    ne.component = osol.component[v];
    if (ne.component == kNoComponent) continue;
    ne.valid = true;
    ne.offset_ns = osol.x[v];
    ne.drift = rho[v];
    ne.offset_sigma_ns = std::hypot(osig[v], dsig[v] * lever);
    ne.drift_sigma = dsig[v];
    if (tracking()) Track(v, osol.x[v] - rho[v] * lever, osig[v], prep, sol);
    ne.error_bound_ns = options_.bound_sigmas * ne.offset_sigma_ns + options_.asymmetry_allowance_ns;
  }
  for (size_t e = 0; e < edges.size(); ++e) {
    EdgeReport& rep = sol.edges[e];
    ++sol.nodes[rep.fit.a].degree;
    ++sol.nodes[rep.fit.b].degree;
    rep.residual_ns = osol.residual[e];
    rep.d_min_fwd_ns = rep.fit.margin_ns - rep.residual_ns;
    rep.d_min_rev_ns = rep.fit.margin_ns + rep.residual_ns;
    rep.weight = osol.weight[e];
  }
}

void Estimator::Track(NodeId v, double x_solve, double x_sigma, Prepared& prep, Solution& sol) {
  NodeEstimate& ne = sol.nodes[v];
  const double window_sigma = ne.offset_sigma_ns;  // this window alone, at t_ref
  const double window_drift_sigma = ne.drift_sigma;
  const double w = options_.track_wander_ppb_per_sqrt_s * 1e-9;
  const double q = w * w / 1e9;
  const double sx2 = x_sigma * x_sigma, sr2 = ne.drift_sigma * ne.drift_sigma;
  TrackState s{x_solve, ne.drift, sx2, 0, sr2, 1};
  if (v < prev_.size() && prev_[v].valid && prev_[v].tracked) {
    const PrevNode& p = prev_[v];
    TrackState pr{p.offset_ns, p.drift, p.pxx, p.pxr, p.prr, p.track_windows};
    // Wander counts from the previous solve instant: the move from there to
    // its t_ref (below) adds none, as in an untracked window (the discipline's
    // allowances cover wander after t_ref).
    Propagate(pr, static_cast<double>(prep.t_solve - p.t_ref_ns), q, static_cast<double>(prep.t_solve - p.t_solve_ns));
    // Kalman update with z = (x_solve, drift), R = diag(sx2, sr2), H = I.
    const double s11 = pr.pxx + sx2, s12 = pr.pxr, s22 = pr.prr + sr2;
    const double det = s11 * s22 - s12 * s12;
    const double nx = x_solve - pr.x, nr = ne.drift - pr.r;
    const double d2 = (s22 * nx * nx - 2 * s12 * nx * nr + s11 * nr * nr) / det;
    if (det > 0 && d2 <= kTrackGate * kTrackGate) {
      // K = P S^-1
      const double k11 = (pr.pxx * s22 - pr.pxr * s12) / det, k12 = (pr.pxr * s11 - pr.pxx * s12) / det;
      const double k21 = (pr.pxr * s22 - pr.prr * s12) / det, k22 = (pr.prr * s11 - pr.pxr * s12) / det;
      s.x = pr.x + k11 * nx + k12 * nr;
      s.r = pr.r + k21 * nx + k22 * nr;
      // P = (I - K) P
      s.pxx = (1 - k11) * pr.pxx - k12 * pr.pxr;
      s.pxr = (1 - k11) * pr.pxr - k12 * pr.prr;
      s.prr = (1 - k22) * pr.prr - k21 * pr.pxr;
      s.windows = pr.windows + 1;
    }
  }
  Propagate(s, static_cast<double>(sol.t_ref_ns - prep.t_solve), q, 0);
  ne.offset_ns = s.x;
  ne.drift = s.r;
  // The filter treats windows as independent; on the testbed their errors
  // persist over several windows (load episodes), so its sigma alone is
  // overconfident. The bound keeps at least kTrackSigmaFloor of one window's.
  // A young track (see track_warmup_windows) keeps a wider floor, for the
  // drift too: a window's drift comes from 2 s of stamps whose load episodes
  // bias its slope, and on the loaded testbed the drift errors of young
  // tracks were 1.2-1.9x their sigma at the median and up to 8x (the bound
  // grows with the drift sigma between windows).
  const bool warming = s.windows <= options_.track_warmup_windows;
  const double floor = warming ? options_.track_warmup_sigma_multiple : kTrackSigmaFloor;
  ne.offset_sigma_ns = std::max(std::sqrt(std::max(s.pxx, 0.0)), floor * window_sigma);
  ne.drift_sigma = std::sqrt(std::max(s.prr, 0.0));
  if (warming) ne.drift_sigma = std::max(ne.drift_sigma, floor * window_drift_sigma);
  ne.track_windows = s.windows;
  prep.track[v] = s;
}

void Estimator::ApplyMarginExcess(int64_t window_end_ns, Solution& sol) {
  if (!(options_.margin_excess_sigmas > 0)) return;
  for (EdgeReport& rep : sol.edges) {
    const double m = rep.fit.margin_ns;
    if (!std::isfinite(m)) continue;
    const uint64_t key = (uint64_t{rep.fit.a} << 32) | rep.fit.b;
    auto [it, fresh] = margin_floor_.try_emplace(key, MarginFloor{m, window_end_ns});
    MarginFloor& f = it->second;
    if (!fresh) {
      rep.margin_excess_ns = std::max(0.0, m - f.floor_ns);
      f.floor_ns = std::min(f.floor_ns + options_.margin_floor_rise_ns, m);
      f.seen_ns = window_end_ns;
    }
  }
  // Edges not seen for a while (a peer gone) are forgotten.
  std::erase_if(margin_floor_, [&](const auto& kv) {
    return window_end_ns - kv.second.seen_ns > options_.continuity_max_age_ns;
  });
}

Result<Solution> Estimator::Solve(int64_t window_end_ns) {
  if (!TimeInRange(window_end_ns)) return InvalidArgument("clocksync: window end must be within +-2^62 ns");
  if (have_prev_ && window_end_ns <= prev_t_ref_) {
    return InvalidArgument("clocksync: Solve(" + std::to_string(window_end_ns) +
                           ") must be after the previous window end " + std::to_string(prev_t_ref_));
  }
  Solution sol;
  sol.t_ref_ns = window_end_ns;
  sol.stats.pairs = records_.size();
  sol.stats.unmatched_samples = pending_old_.size();
  sol.stats.rejected = rejected_;
  rejected_ = 0;
  pending_old_ = std::move(pending_);
  pending_.clear();

  Prepared prep;
  NodeId max_id = max_id_;
  for (const EdgeSummary& s : remote_) max_id = std::max(max_id, s.b);
  prep.num_nodes = std::max<uint32_t>(max_id + 1, static_cast<uint32_t>(prev_.size()));
  if (purity_.size() < prep.num_nodes) purity_.resize(prep.num_nodes, PurityFilter(options_.purity));
  prep.pred_offset.assign(prep.num_nodes, 0.0);
  prep.has_pred.assign(prep.num_nodes, 0);
  for (NodeId v = 0; v < prev_.size(); ++v) {
    PrevNode& p = prev_[v];
    if (p.valid && window_end_ns - p.t_ref_ns > options_.continuity_max_age_ns) p.valid = false;
    if (!p.valid) continue;
    prep.has_pred[v] = 1;
    prep.pred_offset[v] = p.offset_ns + p.drift * static_cast<double>(window_end_ns - p.t_ref_ns);
  }
  prep.gauge_w.assign(prep.num_nodes, 0.0);
  prep.gauge_offset.assign(prep.num_nodes, 0.0);
  prep.gauge_drift.assign(prep.num_nodes, 0.0);
  if (options_.gauge == GaugeMode::kContinuous) {
    for (NodeId v = 0; v < prev_.size(); ++v) {
      if (!prep.has_pred[v]) continue;
      prep.gauge_w[v] = 1;
      prep.gauge_offset[v] = prep.pred_offset[v];
      prep.gauge_drift[v] = prev_[v].drift;
    }
  } else if (options_.gauge == GaugeMode::kAnchored) {
    for (const auto& [v, m] : anchors_) {
      if (v >= prep.num_nodes) continue;  // not in this solve
      const double dt = static_cast<double>(window_end_ns - m.t_ref_ns);
      const double bound = std::max(1.0, m.error_bound_ns + options_.bound_sigmas * m.drift_sigma * std::abs(dt));
      prep.gauge_w[v] = 1.0 / (bound * bound);
      prep.gauge_offset[v] = m.offset_ns + m.drift * dt;
      prep.gauge_drift[v] = m.drift;
    }
  }
  anchors_.clear();

  FitEdges(window_end_ns, prep, sol);
  ApplyMarginExcess(window_end_ns, sol);
  // The offset solve's instant: the median reference (data centre) of the
  // local edges, i.e. the middle of this window; t_ref if there are none.
  std::vector<int64_t> centres;
  for (const EdgeReport& r : sol.edges) if (r.local) centres.push_back(r.fit.t_ref_ns);
  prep.t_solve = window_end_ns;
  if (!centres.empty()) {
    std::nth_element(centres.begin(), centres.begin() + static_cast<std::ptrdiff_t>(centres.size() / 2), centres.end());
    prep.t_solve = std::min(window_end_ns, centres[centres.size() / 2]);
  }
  if (tracking()) prep.track.assign(prep.num_nodes, TrackState{});
  SolveNetworkAndGauge(prep, sol);

  records_.clear();
  remote_.clear();
  have_prev_ = true;
  prev_t_ref_ = window_end_ns;
  prev_.resize(sol.nodes.size());
  for (NodeId v = 0; v < sol.nodes.size(); ++v) {
    const NodeEstimate& e = sol.nodes[v];
    if (!e.valid) continue;
    const TrackState t = tracking() ? prep.track[v] : TrackState{};
    prev_[v] = {true, tracking(), window_end_ns, prep.t_solve, e.offset_ns, e.drift, t.pxx, t.pxr, t.prr, t.windows};
  }
  return sol;
}

}  // namespace lockstep::clocksync
