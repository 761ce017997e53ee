// ClockSyncService: runs the probe mesh for clock sync on the ports it is
// given (ProbeTransport, NodeClock, Clock) and keeps fabric time.
//
// Each RunOnce():
//   1. sends a coded pair to every target whose interval elapsed (targets are
//      the selected peers plus every known node that probes us, so each edge is
//      probed in both directions); each pair carries the kernel TX stamps of
//      the previous pair to that target; right after it, a report with the RX
//      stamps we owe that target and, every gossip_every-th time, a slice of
//      the edge-fit gossip;
//   2. waits up to the next deadline for traffic, filters it (PacketFilter:
//      auth, replay, destination, sender; drops counted by reason), joins the
//      pieces into complete pairs (PairJoiner) and feeds the ClockModel;
//   3. closes a window every windowSeconds: the ClockModel solves and its
//      ClockDiscipline serves fabric time until the next window.
//
// The peer set can change at run time (Kubernetes discovery): SetPeers()
// hands a new set over and the next RunOnce() applies it. Peers no longer
// selected become responders (probed back while they probe us, dropped after
// responder_timeout); a peer whose endpoint changed (a restarted agent) starts
// over with fresh pair state.
//
// The agent with fabric failover runs steps 1-2 on the fabric prober's thread
// instead (Exchange(), after each of the prober's wake-ups, so the node wakes
// once for both) and step 3 on another (CloseWindowIfDue()): the prober never
// waits for a window's solve.
//
// Thread-safety: RunOnce() from one thread, or Exchange() from one thread and
// NextWindow()/CloseWindowIfDue() from one other; Read()/Status()/SetPeers()
// from any thread.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lockstep/agent/clock_model.h"
#include "lockstep/agent/ports/node_clock.h"
#include "lockstep/agent/node_signer.h"
#include "lockstep/agent/packet_filter.h"
#include "lockstep/agent/pair_joiner.h"
#include "lockstep/agent/ports/probe_transport.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/common/pi_mutex.h"

namespace lockstep::agent {

struct PeerTarget {
  std::string name;
  NodeId id = 0;
  Endpoint endpoint;
  // Ed25519, base64 (FabricHealth status.nodePublicKey, or a standalone peer's
  // publicKey); empty: unknown.
  std::string public_key{};
  bool operator==(const PeerTarget&) const = default;
};

struct ClockSyncOptions {
  std::string self_name;
  std::vector<PeerTarget> selected;  // peers we chose to probe
  // Every configured node; `selected` are known too. Only known nodes are
  // heard (others: unknown_sender) and probed back, at their endpoint here
  // (never at a datagram's source address). A port of 0 means "no published
  // endpoint": such a node is heard but not probed back.
  std::vector<PeerTarget> known;
  std::chrono::nanoseconds interval = std::chrono::milliseconds(20);
  // Within a coded pair. The purity check compares the stamped TX spacing with
  // the RX spacing, so this only needs to exceed the stamping jitter; the
  // transport spins for it (5 us x ~1600 pairs/s = 0.8% of a core).
  std::chrono::nanoseconds spacing = std::chrono::microseconds(5);
  int gossip_every = 5;  // edge gossip rides on every n-th report to a target
  std::chrono::nanoseconds window = std::chrono::seconds(2);
  std::chrono::nanoseconds responder_timeout = std::chrono::seconds(5);
  int64_t max_error_bound_ns = 1000;
  int64_t asymmetry_allowance_ns = 0;  // added to every error bound
  uint64_t seed = 1;  // phases of the probe schedule
  // Signs this node's own gossip records (must outlive the service); null:
  // unsigned. Records from others are verified against their PeerTarget
  // public_key: a bad signature, or no key for a node while we know others'
  // keys, drops the record (bad_signature / unknown_signer). While no known node
  // has a key at all (a standalone config without publicKey), records are
  // taken unverified.
  const NodeSigner* signer = nullptr;
};

// What `clock status` and GET /status show.
struct ClockStatus {
  TimeReading reading;
  ClockEstimate estimate;        // the latest window's (may be invalid)
  clocksync::NodeModel model;    // the model in use (adopted by the discipline)
  std::vector<std::string> peers;  // current probe targets
  uint64_t windows = 0;
  int64_t since_model_ns = -1;   // fabric ns since the model's reference, -1 if none
};

class ClockSyncService {
 public:
  // All references must outlive the service.
  ClockSyncService(ProbeTransport& transport, const NodeClock& node_clock, const Clock& clock,
                   const PacketCodec& codec, ClockSyncOptions options, metrics::Registry& registry);

  // One iteration; waits at most `max_wait` for traffic.
  void RunOnce(std::chrono::nanoseconds max_wait);

  // Steps 1-2 without waiting, for a thread that wakes for its own reasons
  // (the fabric prober, every few ms): sends the pairs due by now, reads and
  // handles what arrived. A target's pair goes out at the first call after
  // its send time, each target keeping its own phase and rate. Never blocks
  // on a window's solve: pairs and gossip heard meanwhile are fed to the
  // model on a later call, and a report whose gossip turn finds the model
  // busy goes without and gossips on the next one.
  void Exchange();
  // Step 3 for such a setup, from one other thread: when the next window
  // closes, and closing it (the solve; on_window) once that time has come.
  MonoTime NextWindow() const { return next_window_; }
  void CloseWindowIfDue();
  // Called after each window with its estimate (e.g. to discipline the host
  // clock). REQUIRES: set before the first RunOnce().
  void OnWindow(std::function<void(const ClockEstimate&, const TimeReading&)> fn) { on_window_ = std::move(fn); }

  // Replaces options.selected / options.known from the next RunOnce() on.
  void SetPeers(std::vector<PeerTarget> selected, std::vector<PeerTarget> known);

  TimeReading Read() const;
  // Updates the offset / error bound / state gauges to now (state can change
  // between windows, e.g. into HOLDOVER). Thread-safe.
  void RefreshGauges() const;
  // Status at local reading `local_ns` (default: now).
  ClockStatus Status(std::optional<int64_t> local_ns = std::nullopt) const;
  const PacketFilter& filter() const { return filter_; }
  uint64_t complete_pairs() const { return complete_pairs_; }

 private:
  struct Target {
    PeerTarget peer;
    MonoTime next_send;
    MonoTime last_heard;
    bool selected = false;
    uint64_t reports = 0;
  };
  struct TxRef {
    NodeId peer;
    uint64_t pair_seq;
    int index;
  };
  // Steps 1-2, waiting for traffic until `until` or the next send.
  void Exchange(MonoTime until);
  // Hands what Handle() collected to the model unless a solve holds it.
  void FeedModel();
  void SendDue(MonoTime now);
  void SendTo(Target& t);
  void Handle(const TransportEvents& ev, MonoTime now);
  void CloseWindow();
  MonoTime Phase(MonoTime now);
  void ApplyPeers(std::vector<PeerTarget> selected, std::vector<PeerTarget> known, MonoTime now);
  void SetKnown(const std::vector<PeerTarget>& selected, const std::vector<PeerTarget>& known);
  void PublishTargetNames();
  bool Knows(NodeId id) const;
  void DropUnknownNodes(ReportBody& report);
  void DropUnsigned(ReportBody& report);
  // kUnknownSigner, kBadSignature, or nullopt if `sig` by `signer` verifies.
  std::optional<DropReason> CheckSignature(NodeId signer, const std::vector<uint8_t>& bytes,
                                           const Signature& sig);

  ProbeTransport& transport_;
  const NodeClock& node_clock_;
  const Clock& clock_;
  const PacketCodec& codec_;
  ClockSyncOptions options_;
  NodeId self_;
  PacketFilter filter_;
  PairJoiner joiner_;
  std::unordered_map<NodeId, PeerTarget> known_;
  std::unordered_map<NodeId, NodePublicKey> public_keys_;  // of known nodes that have one
  // Signatures already verified (gossip repeats the same records many times):
  // a record identical to one verified before is not verified again.
  std::unordered_set<std::string> verified_;
  std::deque<std::string> verified_order_;
  std::unordered_map<NodeId, Target> targets_;
  std::unordered_map<uint32_t, TxRef> tx_refs_;
  std::deque<uint32_t> tx_order_;
  uint64_t packet_seq_;
  uint64_t pair_seq_ = 0;
  uint64_t rng_state_;
  MonoTime next_window_;
  uint64_t complete_pairs_ = 0;
  TransportEvents events_;
  // Heard but not yet in the model (a solve held it); Exchange's thread only.
  struct Unfed {
    std::vector<CodedPair> pairs;
    std::vector<EdgeRecord> edges;
    std::vector<ModelRecord> models;
    bool empty() const { return pairs.empty() && edges.empty() && models.empty(); }
  } unfed_;
  std::function<void(const ClockEstimate&, const TimeReading&)> on_window_;

  struct PeerUpdate {
    std::vector<PeerTarget> selected;
    std::vector<PeerTarget> known;
  };
  std::mutex peers_mu_;
  std::optional<PeerUpdate> pending_peers_;  // GUARDED_BY(peers_mu_)

  mutable std::mutex mu_;
  // Read() (the fabric prober, SCHED_FIFO, on every wake-up) copies this
  // instead of taking mu_, which a window's solve holds for a while; a copy
  // of the model's discipline, published after each window. Priority-
  // inheriting: a normal thread holding it is lent the prober's priority.
  mutable PiMutex read_mu_;
  clocksync::ClockDiscipline published_;  // GUARDED_BY(read_mu_)
  ClockModel model_;                   // GUARDED_BY(mu_)
  mutable std::mutex names_mu_;
  std::vector<std::string> target_names_;  // GUARDED_BY(names_mu_)
  uint64_t windows_ = 0;               // GUARDED_BY(mu_)

  metrics::Family& sent_;
  metrics::Family& received_;
  metrics::Family& dropped_;
  metrics::Family& send_errors_;
  metrics::Family& unstamped_;
  metrics::Family& pairs_;
  metrics::Family& offset_;
  metrics::Family& drift_;
  metrics::Family& error_bound_;
  metrics::Family& state_;
  metrics::Family& peers_;
  metrics::Family& pure_fraction_;
  metrics::Family& graph_nodes_;
  metrics::Family& windows_total_;
};

}  // namespace lockstep::agent
