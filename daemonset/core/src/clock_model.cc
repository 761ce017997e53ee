#include "lockstep/agent/clock_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::agent {
namespace {

clocksync::EstimatorOptions EstimatorOptionsFor(const ClockModelOptions& options) {
  clocksync::EstimatorOptions o;
  o.asymmetry_allowance_ns = options.asymmetry_allowance_ns;
  o.gauge = clocksync::GaugeMode::kAnchored;  // fabric time continues across joins and losses
  return o;
}

clocksync::DisciplineOptions DisciplineOptionsFor(const ClockModelOptions& o) {
  clocksync::DisciplineOptions d;
  d.lock_threshold_ns = o.lock_threshold_ns;
  d.holdover_after_ns = o.window_ns * 5 / 2;
  return d;
}

int64_t ClampBound(double b) {
  if (!(b < 9.2e18)) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(std::ceil(b));
}

// Gossip the filter would not have let in (PacketFilter's acceptance window):
// kept out here too, so no record can reach int64 overflow in FlipEdge or the
// estimator, whoever calls us.
bool Plausible(int64_t t_ref_ns, double offset_ns, double drift) {
  constexpr int64_t kMaxAbs = int64_t{1} << 62;
  return t_ref_ns <= kMaxAbs && t_ref_ns >= -kMaxAbs && std::fabs(offset_ns) <= static_cast<double>(kMaxClockSkewNs) &&
         std::fabs(drift) <= kMaxDrift;
}

// |a - b| in double: no int64 overflow whatever the inputs.
double AbsDiff(double a, double b) { return std::fabs(a - b); }

// Up to `max` values of `table`, continuing from `cursor` (round robin).
template <typename Map>
auto Rotate(const Map& table, size_t& cursor, size_t max) {
  std::vector<typename Map::mapped_type> out;
  if (table.empty() || max == 0) return out;
  std::vector<const typename Map::mapped_type*> all;
  for (const auto& [key, v] : table) all.push_back(&v);
  size_t n = std::min(max, all.size());
  for (size_t k = 0; k < n; ++k) out.push_back(*all[(cursor + k) % all.size()]);
  cursor = (cursor + n) % all.size();
  return out;
}

}  // namespace

EdgeRecord FlipEdge(const EdgeRecord& e) {
  EdgeRecord f = e;
  std::swap(f.a, f.b);
  f.t_ref_ns = e.t_ref_ns + std::llround(e.offset_ns);  // the same instant on b's clock
  f.offset_ns = -e.offset_ns;
  f.drift = -e.drift / (1.0 + e.drift);
  return f;
}

ClockModel::ClockModel(NodeId self, const ClockModelOptions& options)
    : self_(self),
      options_(options),
      estimator_(std::move(*clocksync::Estimator::Create(EstimatorOptionsFor(options)))),
      discipline_(DisciplineOptionsFor(options)) {
  Dense(self_);
}

clocksync::NodeId ClockModel::Dense(NodeId wire) {
  auto [it, fresh] = dense_.emplace(wire, static_cast<clocksync::NodeId>(wire_.size()));
  if (fresh) wire_.push_back(wire);
  return it->second;
}

double ClockModel::RelativeOffset(NodeId wire) const {
  auto it = relative_offset_.find(wire);
  return it == relative_offset_.end() ? 0.0 : it->second;
}

void ClockModel::AddPair(const CodedPair& p) {
  if (p.src == p.dst || (p.src != self_ && p.dst != self_)) return;
  clocksync::ProbePair pair{Dense(p.src), Dense(p.dst), p.tx0_ns, p.rx0_ns, p.tx1_ns, p.rx1_ns};
  (void)estimator_.AddPair(pair);  // rejects are counted by the estimator
}

void ClockModel::AddRemoteEdge(const EdgeRecord& edge) {
  if (edge.a >= edge.b || !(edge.offset_sigma_ns > 0) || !(edge.drift_sigma > 0)) return;
  if (!Plausible(edge.t_ref_ns, edge.offset_ns, edge.drift)) return;
  if (edge.a == self_ || edge.b == self_) return;  // our own edges we measure ourselves
  auto key = std::make_pair(edge.a, edge.b);
  auto it = gossip_.find(key);
  if (it != gossip_.end() && it->second.t_ref_ns >= edge.t_ref_ns) return;  // not newer
  gossip_[key] = edge;
}

void ClockModel::AddRemoteModel(const ModelRecord& model) {
  if (model.node == self_) return;  // we know what we serve
  if (!Plausible(model.t_ref_ns, model.offset_ns, model.drift)) return;
  auto it = models_.find(model.node);
  if (it != models_.end() && it->second.t_ref_ns >= model.t_ref_ns) return;  // not newer
  models_[model.node] = model;
}

ClockEstimate ClockModel::CloseWindow(int64_t local_now) {
  ClockEstimate est;
  est.window_end_local_ns = local_now;
  const double max_age = static_cast<double>(options_.max_edge_age_windows) * static_cast<double>(options_.window_ns);
  // Served models anchor the gauge; their t_ref is in fabric time.
  const int64_t fabric_now = discipline_.has_model() ? clocksync::ToFabric(discipline_.model(), local_now) : local_now;
  for (auto it = models_.begin(); it != models_.end();) {
    const ModelRecord& m = it->second;
    // Too old, or dated in the future (it would never age out and, being
    // "newest", would block the node's real model).
    if (AbsDiff(static_cast<double>(fabric_now), static_cast<double>(m.t_ref_ns)) > max_age) {
      it = models_.erase(it);
      continue;
    }
    (void)estimator_.AddAnchor(Dense(m.node), {true, m.t_ref_ns, m.offset_ns, m.drift, m.error_bound_ns,
                                               m.drift_sigma});
    ++it;
  }
  for (auto it = gossip_.begin(); it != gossip_.end();) {
    const EdgeRecord& r = it->second;
    double t_ref_ours = static_cast<double>(r.t_ref_ns) - RelativeOffset(r.a);
    if (AbsDiff(static_cast<double>(local_now), t_ref_ours) > max_age) {
      it = gossip_.erase(it);
      continue;
    }
    if (r.a != self_ && r.b != self_) {
      // The estimator wants t_ref on (dense) a's clock, as the record has it
      // for wire a; flip when the orders disagree.
      EdgeRecord e = r;
      clocksync::NodeId da = Dense(e.a), db = Dense(e.b);
      if (da > db) {
        e = FlipEdge(r);
        std::swap(da, db);
      }
      (void)estimator_.AddEdgeSummary({da, db, e.t_ref_ns, e.offset_ns, e.drift, e.margin_ns, e.offset_sigma_ns,
                                       e.drift_sigma, e.drift_identified});
    }
    ++it;
  }
  auto solved = estimator_.Solve(local_now);
  if (!solved.ok()) {
    last_ = est;
    return est;
  }
  const clocksync::Solution& sol = *solved;
  est.pairs = sol.stats.pairs;
  est.pure_fraction = sol.stats.pairs ? static_cast<double>(sol.stats.pure_pairs) / static_cast<double>(sol.stats.pairs) : 0;
  est.graph_edges = static_cast<int>(sol.edges.size());
  // Own fitted edges join the gossip table under wire ids.
  for (const clocksync::EdgeReport& rep : sol.edges) {
    if (!rep.local) continue;
    EdgeRecord e{wire_[rep.fit.a],
                 wire_[rep.fit.b],
                 rep.fit.t_ref_ns,
                 rep.fit.offset_ns,
                 rep.fit.drift,
                 static_cast<float>(rep.fit.margin_ns),
                 static_cast<float>(rep.fit.offset_sigma_ns),
                 static_cast<float>(rep.fit.drift_sigma),
                 rep.fit.drift_identified};
    // Dense a is us (id 0), so t_ref is on our clock; store with wire a < b
    // and t_ref on wire a's clock.
    if (e.a > e.b) e = FlipEdge(e);
    e.signed_by_b = e.b == self_;
    if (options_.signer != nullptr) e.sig = options_.signer->Sign(SigningBytes(e));
    gossip_[{e.a, e.b}] = e;
  }
  const clocksync::NodeId me = 0;
  if (me < sol.nodes.size() && sol.nodes[me].valid) {
    const clocksync::NodeEstimate& n = sol.nodes[me];
    est.valid = true;
    est.offset_ns = n.offset_ns;
    est.drift_ppb = n.drift * 1e9;
    est.error_bound_ns = n.error_bound_ns;
    est.peers = static_cast<int>(n.degree);
    relative_offset_.clear();
    for (clocksync::NodeId i = 0; i < sol.nodes.size(); ++i) {
      if (!sol.nodes[i].valid || sol.nodes[i].component != n.component) continue;
      ++est.graph_nodes;
      relative_offset_[wire_[i]] = sol.nodes[i].offset_ns - n.offset_ns;
    }
  }
  est.adopted = discipline_.Update(sol.Model(me), local_now);
  if (est.adopted) {
    const clocksync::NodeModel& m = discipline_.model();
    ModelRecord own{self_, m.t_ref_ns, m.offset_ns, m.drift, static_cast<float>(m.error_bound_ns),
                    static_cast<float>(m.drift_sigma)};
    if (options_.signer != nullptr) own.sig = options_.signer->Sign(SigningBytes(own));
    models_[self_] = own;
  }
  last_ = est;
  return est;
}

std::vector<EdgeRecord> ClockModel::EdgesToGossip(size_t max) { return Rotate(gossip_, gossip_cursor_, max); }

std::vector<ModelRecord> ClockModel::ModelsToGossip(size_t max) { return Rotate(models_, model_cursor_, max); }

TimeReading ReadDiscipline(const clocksync::ClockDiscipline& discipline, int64_t local_ns) {
  clocksync::TimeReading r = discipline.Now(local_ns);
  TimeReading out;
  out.local_ns = local_ns;
  out.now_ns = r.fabric_ns;
  out.state = r.state;
  out.offset_ns = static_cast<double>(local_ns - r.fabric_ns);
  out.error_bound_ns = ClampBound(r.error_bound_ns);
  out.earliest_ns = r.earliest_ns;
  out.latest_ns = r.latest_ns;
  return out;
}

}  // namespace lockstep::agent
