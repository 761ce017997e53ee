// FabricService: fabric failover on this host. It drives the fabric decision
// core (fabric::PathMonitor) with real probes and carries its decisions out
// on the RouteActuator:
//
//   Start():   re-learns the pins a previous run left (owned routes that map
//              to a known peer and rail are adopted, the rest are deleted;
//              none is left on a down interface), then watches every
//              rail x peer path.
//   RunOnce(): sleeps until the next event (a tick, a probe timeout; no
//              wake-up per datagram; woken much later than that, the node
//              was stalled: the timeouts in the stall restart,
//              PathMonitor::ExcuseStall), drains the socket, feeds the peers'
//              acks to the monitor (at their kernel receive time) and
//              records their probes for our acks, then sends the tick's
//              probes in one batch (each forced out of its rail, from our
//              host address, to the peer's host address, each carrying the
//              ack of the peer path whose probes arrive on the interface it
//              leaves by, so acks retrace their probes' links; symmetric
//              probing, fabric_probe.h; an ack no probe of ours carries
//              leaves alone out of the interface its probes came in on, to
//              the peer's configured host address, never the datagram's
//              source), and applies the monitor's decisions: PinPeer -> Replace(<peer>/32 via the rail's
//              gateway, src host address, rto_min 10 ms), UnpinPeer ->
//              Delete. A failed route change is retried by a level-based
//              reconcile against the monitor's pins. When traffic leaves a
//              rail (and every 200 ms while a rail is down), the rail's
//              unresolved neighbours are released: packets queued on them
//              would hold up TCP's retransmission (route_actuator.h).
//   Stop:      nothing to do: working routes stay (the next Start adopts them).
//   SetPeers(): (Kubernetes mode) a new peer set from peer discovery, handed
//              to the service thread and applied by its next RunOnce():
//              paths of removed peers are dropped (their pins removed),
//              new peers' paths start unknown. With await_peers, Start()
//              defers adopting and reconciling the routes found until the
//              first peer set arrives (without peers every owned route
//              would look stale).
//
// One-way delays ride on the probes when clock sync is LOCKED at both ends
// (fabric_now returns a value): the receiver computes each probe's delay at
// its kernel receive time and returns it in its ack; otherwise acks carry
// none and ranking falls back to round trips (less the time the peer held
// the ack). Gauges and the status snapshot are published every
// publish_every (1 s) and right after a change of path state or pin. Malformed, unauthenticated, misdirected,
// unknown-sender, stale and replayed datagrams are dropped and counted by
// reason (lockstep_fabric_probe_dropped_total, added up per wake-up).
//
// Freshness (fabric_probe.h, "Replays"): every packet carries the sender's
// per-boot epoch under the MAC. Per known peer the service keeps the latest
// epoch seen: an older one is stale (unless nothing fresh came from the peer
// for a stats window: a restart with its clock set back); a newer one means
// the peer restarted, and only that starts the ack windows of its paths again. Within an epoch
// a probe whose seq was already received is a replay, one before the ack
// window stale; either is dropped whole (its ack too) before it can move
// what we acknowledge or wake an urgent reply. Urgent replies are also
// rate-limited per peer (twice what its paths can legitimately ask for;
// lockstep_fabric_urgent_replies_limited_total): the ack then rides on the
// next regular packet. Our own epoch is the wall clock at construction;
// before any path's seqs span renew_epoch_after we take a new one.
//
// Thread-safety: Start() and RunOnce() from one thread; SetPeers(),
// StatusJson(), Health() and TakeFlapAlerts() from any thread.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/agent/fabric_probe.h"
#include "lockstep/agent/fabric_setup.h"
#include "lockstep/agent/fabric_socket.h"
#include "lockstep/agent/route_actuator.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path_monitor.h"

namespace lockstep::agent {

struct FabricServiceOptions {
  std::string self_name;
  FabricSetup setup;
  fabric::FabricOptions fabric;
  int peer_port = 0;  // every peer's fabric probe port (fabric.port is the same on every host)
  uint64_t seed = 1;  // probe jitter
  std::chrono::nanoseconds reconcile_every = std::chrono::seconds(30);  // level-based route repair
  // Kubernetes mode: setup.peers starts empty and SetPeers() provides them;
  // the start-up route adoption waits for the first peer set.
  bool await_peers = false;
  // Gauges, the status snapshot and the health view (their percentiles are
  // a visible part of the prober's user time); a change of path state or
  // pin is published at once (at most every 20 ms) whatever this says.
  std::chrono::nanoseconds publish_every = std::chrono::seconds(1);
  // This boot's epoch on the wire (fabric_probe.h); 0: the wall clock in ns
  // at construction. It must grow from one start of the agent to the next.
  uint64_t epoch = 0;
  // Probes per path after which we take a new epoch (seqs compare modulo
  // 2^32 and a stale replay must never look newer; ~350 days at 71/s).
  uint32_t renew_epoch_after = uint32_t{1} << 31;
};

// One local rail as FabricHealth reports it (from fabric::RailView).
struct FabricRailHealth {
  std::string name{};  // the rail's interface
  int paths = 0;       // one per probed peer
  int usable = 0;      // up or suspect
  int failed = 0;    // down or recovering
  bool down = false;  // every path with a verdict failed (and at least one did)
  int flaps_last_hour = 0;
  bool alerting = false;  // flaps above flapAlertPerHour
  std::vector<std::string> failed_peers{};  // peers whose path on this rail is down or recovering, by name
  bool operator==(const FabricRailHealth&) const = default;
};

// What FabricHealth needs from the service: one entry per configured rail,
// in rail order, as of the last publish (publish_every, 1 s, and at once
// after a change).
struct FabricHealthView {
  std::vector<FabricRailHealth> rails{};
  int flaps_last_hour = 0;              // all rails
  std::optional<WallTime> last_flap{};  // wall clock when the latest flap was seen
  int peers = 0;                      // peers probed
  // The prober's stalls (fabric::StallView): persistent while one was
  // judged (beyond the excuse budget) within the last stall window.
  bool prober_stalled = false;
  uint64_t stalls = 0, stalls_judged = 0;  // since the start
  bool operator==(const FabricHealthView&) const = default;
};

// A rail's flap alert as raised (once per raise; see fabric::FlapAlert).
struct FabricFlapAlert {
  std::string rail{};
  int flaps_last_hour = 0;
  int threshold = 0;  // flapAlertPerHour
};

class FabricService {
 public:
  // Fabric time now in ns while clock sync is LOCKED, else nullopt.
  using FabricNow = std::function<std::optional<int64_t>()>;

  // All references must outlive the service. REQUIRES: Validate(options.fabric).ok().
  FabricService(FabricSocket& socket, RouteActuator& actuator, const Clock& clock, const FabricProbeCodec& codec,
                FabricNow fabric_now, FabricServiceOptions options, metrics::Registry& registry);

  // Adopts and reconciles the routes found, then starts probing. Returns the
  // error of listing the owned routes (the service still runs: probes and
  // metrics work, route changes are retried by the reconcile).
  Status Start();
  // One iteration; waits at most `max_wait` (less when a probe is due).
  void RunOnce(std::chrono::nanoseconds max_wait);

  // Hands a new peer set to the service thread (applied by the next
  // RunOnce). `probed`: the peers to watch (paths, pins); `known`: every
  // peer whose probes we answer (probed ones are added). Entries for this
  // node, without a host address, or with our own host address are
  // ignored; of peers sharing a host address only the first (by name) is
  // kept (logged).
  void SetPeers(std::vector<FabricPeer> probed, std::vector<FabricPeer> known);

  // `fabric status` (GET /fabric): rails, paths, peers and their routes.
  nlohmann::json StatusJson() const;
  // Rails, flaps and the last flap as of the last publish.
  FabricHealthView Health() const;
  // The flap alerts raised since the last call (each raise once).
  std::vector<FabricFlapAlert> TakeFlapAlerts();
  const fabric::PathMonitor& monitor() const { return monitor_; }
  // This boot's epoch as sent (fabric_probe.h). Read from the service thread.
  uint64_t epoch() const { return epoch_; }

 private:
  // The tick's probes (each with its path's ack) and ack-only packets, in one batch.
  void SendDue(MonoTime now, std::optional<int64_t> fabric_now);
  // One datagram drained at `now` (fabric time then: fabric_now).
  void Handle(const FabricDatagram& d, MonoTime now, std::optional<int64_t> fabric_now);
  struct WirePath;
  struct AckState;
  // A probe of ours leaves through the interface the peer path's probes
  // arrive on. Kept in AckState::has_carrier: set when its interface
  // changes and when the watched paths change (RefreshCarriers), read on
  // every wake-up.
  bool HasCarrier(const WirePath& key, const AckState& a) const;
  void RefreshCarriers();
  bool AckOnlyDue() const;    // an ack no probe of ours can carry is pending, or an urgent one
  bool AckOnlyPaths() const;  // a peer path no probe of ours can carry
  void NoteStall(MonoTime now, std::chrono::nanoseconds stalled, fabric::Stall verdict);  // metrics, rate-limited warning
  // Every 200 ms: neighbours of down rails released, quiet peers' ack state dropped.
  void Sweep(MonoTime now);
  void Apply(const fabric::Decisions& d);
  // RouteActuator::ReleaseUnresolvedNeighbours (errors logged; what was
  // released too when log_released: not in the 200 ms sweep of a down rail).
  void ReleaseNeighbours(int rail, bool log_released);
  void Reconcile(MonoTime now);
  void Publish(MonoTime now);  // gauges and the status snapshot
  Status Adopt(MonoTime now);  // re-learns owned routes (see Start); the List error
  void ApplyPendingPeers(MonoTime now);
  void WatchPeers(const std::vector<std::string>& names, MonoTime now);
  const FabricPeer* PeerByWireId(uint32_t id) const;        // known peers
  // What we keep per known peer (parallel to known_): its epoch, the urgent
  // reply budget.
  struct PeerState {
    uint64_t epoch = 0;  // the latest seen; 0: none yet
    double urgent_tokens = 0;
    MonoTime urgent_refilled{};
    MonoTime last_accepted{};  // its latest packet that passed the freshness checks
  };
  PeerState& StateOf(const FabricPeer* peer) { return peer_state_[static_cast<size_t>(peer - known_.data())]; }
  // Takes one urgent reply from the peer's budget; false when spent.
  bool TakeUrgentReply(PeerState& ps, MonoTime now);
  void CountDrop(FabricDrop d) { ++drops_pending_[static_cast<size_t>(d)]; }
  void FlushCounts();      // drops and limited urgent replies, into their metrics
  void RenewEpoch();
  const FabricPeer* PeerByName(const std::string& name) const;

  FabricSocket& socket_;
  RouteActuator& actuator_;
  const Clock& clock_;
  const FabricProbeCodec& codec_;
  FabricNow fabric_now_;
  FabricServiceOptions options_;
  NodeId self_;
  fabric::PathMonitor monitor_;
  // Peer names stay at the edges (metrics, status, routes, logs): per
  // received datagram and per probe sent, paths are found by integers.
  // A path as the wire names it: a node's 32-bit wire id, a rail and a path
  // index of that node (a peer's path, or ours as a peer's ack names it).
  struct WirePath {
    uint32_t node = 0;  // WireNodeId
    int rail = 0;
    int index = 0;
    auto operator<=>(const WirePath&) const = default;
  };
  // Each watched path of ours, by fabric::PathId (rebuilt by WatchPeers).
  struct Probed {
    const FabricPeer* peer = nullptr;  // in options_.setup.peers
    uint32_t seq = 0;                  // its last probe seq
  };
  std::vector<Probed> probed_;
  std::map<WirePath, fabric::PathId> ours_;  // our watched paths as the peers' acks name them
  std::map<fabric::PathKey, uint32_t> seqs_;  // last seqs, kept across WatchPeers (a re-added path goes on)
  // What we received of each peer path (peer, its rail and path index), to ack.
  struct AckState {
    fabric::AckWindow window;
    int ifindex = 0;  // where its probes arrive (ack-only packets leave there)
    bool has_carrier = false;  // HasCarrier for this ifindex and the watched paths
    bool carried = false;  // SendDue: a probe of this tick carries its ack
    bool urgent = false;   // an urgent probe arrived: ack it at once, to the peer's urgent port
  };
  // Sorted by WirePath (a peer's paths adjacent), in one block: the prober
  // wakes with cold caches, and a map's nodes cost a miss each.
  std::vector<std::pair<WirePath, AckState>> acks_;
  // acks_'s first entry at or after `key`.
  std::vector<std::pair<WirePath, AckState>>::iterator AckAtOrAfter(const WirePath& key);
  std::vector<FabricDatagram> inbox_;
  // The batch being sent (one tick's packets), kept to reuse their storage.
  std::vector<std::array<uint8_t, kFabricProbeSize>> out_bytes_;
  std::vector<FabricSend> out_;
  std::vector<int> out_rail_;                // the rail of each probe; -1: ack-only
  std::vector<const FabricPeer*> reply_peer_;  // the peer of each (valid during SendDue)
  struct SentProbe {
    fabric::PathId path = 0;
    uint32_t seq = 0;
    bool urgent = false;
  };
  std::vector<SentProbe> sent_probes_;  // SendDue: each probe of the batch
  std::map<std::string, uint64_t> answered_pending_;  // ack-only packets sent since the last Publish, per peer
  MonoTime retry_at_ = MonoTime::max();  // after a failed route change
  MonoTime next_reconcile_{};
  MonoTime next_publish_{};
  MonoTime next_sweep_{};
  MonoTime last_publish_{};
  bool changed_ = false;  // a transition or route action since the last publish
  std::map<fabric::PathKey, fabric::PathStats> published_totals_;
  std::vector<FabricPeer> known_;  // whose probes we answer (probed peers included)
  std::vector<PeerState> peer_state_;  // parallel to known_
  uint64_t epoch_ = 0;                 // ours
  uint32_t first_seq_ = 1;             // FirstSeq(epoch_)
  bool renew_epoch_ = false;           // a path's seqs span renew_epoch_after
  std::array<uint64_t, kFabricDropKinds> drops_pending_{};  // counted into dropped_ once per wake-up
  uint64_t urgent_limited_pending_ = 0;
  bool adopted_ = false;           // the start-up route adoption ran
  std::map<std::string, int> installed_rail_;  // peer -> the rail of the pin in the kernel
  std::optional<WallTime> last_flap_wall_;

  mutable std::mutex mu_;
  nlohmann::json status_;  // GUARDED_BY(mu_)
  FabricHealthView health_;  // GUARDED_BY(mu_)
  std::vector<FabricFlapAlert> alerts_raised_;  // GUARDED_BY(mu_)
  std::optional<std::pair<std::vector<FabricPeer>, std::vector<FabricPeer>>> pending_peers_;  // GUARDED_BY(mu_)

  metrics::Family& state_;
  metrics::Family& loss_;
  metrics::Family& owd_;
  metrics::Family& rtt_;
  metrics::Family& sent_;
  metrics::Family& urgent_;
  metrics::Family& replies_;
  metrics::Family& misses_;
  metrics::Family& peer_rail_;
  metrics::Family& flaps_window_;
  metrics::Family& flaps_total_;
  metrics::Family& alerts_;
  metrics::Family& rail_down_;
  metrics::Family& dropped_;
  metrics::Family& answered_;
  metrics::Family& send_errors_;
  metrics::Family& route_changes_;
  metrics::Family& stalls_;
  metrics::Family& stalls_judged_;
  metrics::Family& prober_stalled_;
  metrics::Family& urgent_limited_;
  metrics::Family& peer_restarts_;
  MonoTime next_stall_log_{};  // stall warnings: at most one per kStallLogEvery
  std::chrono::nanoseconds worst_stall_{};  // the longest since the last warning
  int stalls_unlogged_ = 0;
  int judged_unlogged_ = 0;
  bool stalled_published_ = false;  // prober_stalled as of the last publish
};

}  // namespace lockstep::agent
