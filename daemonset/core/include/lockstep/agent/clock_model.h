// ClockModel: this node's share of the distributed Huygens solve, on top of
// lockstep_clocksync (Estimator + ClockDiscipline).
//
// Each node measures only its own edges (PairJoiner gives it complete coded
// pairs in both directions). Per window it
//   1. feeds those pairs to a clocksync::Estimator, plus every fresh edge fit
//      gossiped by other nodes (AddEdgeSummary);
//   2. Solve()s: purity filter, max-margin edge fits, network effect, with
//      GaugeMode::kAnchored: the models the nodes serve, gossiped like edges
//      (AddRemoteModel), are the anchors of the gauge, so every node solves
//      for the same fabric time, a newcomer joins it at once, and losing a node
//      moves it by nanoseconds (the first windows of a cold start, without any
//      model yet, fall back to the mean clock);
//   3. offers its own NodeModel to a clocksync::ClockDiscipline, which answers
//      fabric-time reads with an error bound and FREERUN/LOCKED/HOLDOVER.
// Its own fitted edges and its served model go into gossip tables, which rotate
// through EdgesToGossip()/ModelsToGossip() into the reports the agent sends to
// its peers (flooding: what a node hears it passes on, newest record per edge or
// node wins, stale ones age out).
//
// Ids: wire NodeIds (64-bit name hashes) are mapped to dense clocksync ids in
// order of first sight (we are 0). A gossiped fit carries t_ref on a's clock,
// which is what the estimator expects; when the dense order of a and b differs
// from the wire order the record is flipped (FlipEdge). Staleness of gossip is
// judged on our clock using the previous solution's offsets.
//
// Pure (callers pass local clock readings); thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "lockstep/agent/node_signer.h"
#include "lockstep/agent/pair_joiner.h"
#include "lockstep/agent/probe_packet.h"
#include "lockstep/clocksync/clock_discipline.h"
#include "lockstep/clocksync/estimator.h"

namespace lockstep::agent {

using ClockSyncState = clocksync::ClockState;
inline const char* ClockSyncStateName(ClockSyncState s) { return clocksync::ClockStateName(s); }

struct ClockModelOptions {
  int64_t window_ns = 2'000'000'000;
  double lock_threshold_ns = 1000;  // clockSync.maxErrorBoundNs
  double asymmetry_allowance_ns = 0;  // clockSync.asymmetryAllowanceNs
  int max_edge_age_windows = 3;     // gossip older than this is dropped
  // Signs our own gossip records (edges we fitted, the model we serve); null:
  // they go out unsigned (receivers that know our public key drop them).
  const NodeSigner* signer = nullptr;
};

// The outcome of one window.
struct ClockEstimate {
  bool valid = false;         // false: no fitted edge connects us this window
  bool adopted = false;       // the discipline took it (bound <= lock threshold)
  int64_t window_end_local_ns = 0;
  double offset_ns = 0;       // local - fabric at the window end
  double drift_ppb = 0;       // d(local - fabric)/dF
  double error_bound_ns = 0;  // at the window end
  int peers = 0;              // own fitted edges (degree)
  int graph_nodes = 0;        // nodes in our connected component
  int graph_edges = 0;        // edges in the solve (own + gossiped)
  double pure_fraction = 0;   // pure pairs / pairs this window
  uint64_t pairs = 0;
};

// A fabric-time reading, ClockBound-style. In FREERUN the bound is unbounded:
// error_bound_ns = INT64_MAX, earliest/latest = INT64_MIN/INT64_MAX.
struct TimeReading {
  int64_t local_ns = 0;  // the local clock reading this refers to
  int64_t now_ns = 0;    // fabric time (local time in FREERUN without a model)
  int64_t earliest_ns = 0;
  int64_t latest_ns = 0;
  int64_t error_bound_ns = 0;
  double offset_ns = 0;  // local - fabric
  ClockSyncState state = ClockSyncState::kFreerun;
};

// A fabric-time reading of `local_ns` from a discipline (ClockModel::Read).
TimeReading ReadDiscipline(const clocksync::ClockDiscipline& discipline, int64_t local_ns);

class ClockModel {
 public:
  // REQUIRES: options valid (positive window).
  ClockModel(NodeId self, const ClockModelOptions& options);

  void AddPair(const CodedPair& pair);
  // A gossiped edge fit (kept if newer than what we hold for that edge).
  void AddRemoteEdge(const EdgeRecord& edge);
  ClockEstimate CloseWindow(int64_t local_now);
  // A gossiped served model (kept if newer than what we hold for that node).
  void AddRemoteModel(const ModelRecord& model);
  // Up to `max` records, rotating through own and relayed edges.
  std::vector<EdgeRecord> EdgesToGossip(size_t max);
  // Up to `max` records, rotating through our own and relayed served models.
  std::vector<ModelRecord> ModelsToGossip(size_t max);
  TimeReading Read(int64_t local_ns) const { return ReadDiscipline(discipline_, local_ns); }
  // What Read() needs, a small value that changes only in CloseWindow: a
  // reader can copy it and read without holding up the next window's solve.
  const clocksync::ClockDiscipline& discipline() const { return discipline_; }

  const ClockEstimate& last() const { return last_; }
  const clocksync::NodeModel& model() const { return discipline_.model(); }

 private:
  clocksync::NodeId Dense(NodeId wire);
  // c_node - c_self from the last solution, 0 if unknown.
  double RelativeOffset(NodeId wire) const;

  NodeId self_;
  ClockModelOptions options_;
  clocksync::Estimator estimator_;
  clocksync::ClockDiscipline discipline_;
  std::unordered_map<NodeId, clocksync::NodeId> dense_;
  std::vector<NodeId> wire_;  // by dense id
  std::map<std::pair<NodeId, NodeId>, EdgeRecord> gossip_;  // by wire (a, b): newest fit
  std::unordered_map<NodeId, double> relative_offset_;      // c_node - c_self, last solution
  size_t gossip_cursor_ = 0;
  std::map<NodeId, ModelRecord> models_;  // served models by wire node id: newest
  size_t model_cursor_ = 0;
  ClockEstimate last_;
};

// Converts between a clocksync::EdgeSummary (dense ids) and an EdgeRecord
// (wire ids), flipping the direction when the id orders disagree:
// b relative to a on a's clock <-> a relative to b on b's clock.
EdgeRecord FlipEdge(const EdgeRecord& e);

}  // namespace lockstep::agent
