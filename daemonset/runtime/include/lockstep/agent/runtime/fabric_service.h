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
//              would hold up TCP's retransmission (ports/route_actuator.h).
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
// Its parts: the service drains the socket, batches the probes, takes new
// peer sets and its epoch, and drives the monitor; AckBook (pure) keeps
// the ack state and judges freshness; RouteApplier carries pins out on the
// RouteActuator and reconciles; FabricPublisher publishes the metrics, the
// status snapshot and the health view.
//
// Thread-safety: Start() and RunOnce() from one thread; SetPeers(),
// StatusJson(), Health() and TakeFlapAlerts() from any thread.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/agent/ack_book.h"
#include "lockstep/agent/fabric_probe.h"
#include "lockstep/agent/runtime/fabric_publisher.h"
#include "lockstep/agent/fabric_setup.h"
#include "lockstep/agent/ports/fabric_socket.h"
#include "lockstep/agent/ports/route_actuator.h"
#include "lockstep/agent/ports/traffic_source.h"
#include "lockstep/agent/peer_activity.h"
#include "lockstep/agent/runtime/route_applier.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/fabric/congestion.h"
#include "lockstep/fabric/fabric_map.h"
#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path_monitor.h"

namespace lockstep::agent {

struct FabricServiceOptions {
  std::string self_name;
  FabricSetup setup;
  fabric::FabricOptions fabric;
  int peer_port = 0;  // every peer's fabric probe port (fabric.port is the same on every host)
  // Paths probed per (rail, peer) (agent.yaml fabric.pathsPerRail): path i's
  // probes carry FabricSend.path = i, which the socket sends from that
  // path's own UDP source port, so the fabric's ECMP hash spreads the paths
  // over its spines. The route choice treats a rail as its worst path
  // (fabric::RailChoices).
  int paths_per_rail = 1;
  uint64_t seed = 1;                                                    // probe jitter
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
  // The paths' latency SLAs (agent.yaml latency:), judged at each publish
  // while clock sync is LOCKED (fabric_now has a value).
  fabric::LatencySlaOptions latency{};
  // Congestion localisation (congestion_publisher.h): the fabric's map as
  // far as known (lockstep-agent run --fabric-topology; empty: each rail's
  // uplink only) and the judge's thresholds.
  fabric::FabricMap topology{};
  fabric::CongestionOptions congestion{};
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
  // The latency SLA breaches due an Event since the last call.
  std::vector<FabricLatencyBreach> TakeLatencyBreaches();
  // Links flagged congested and paths rising alone since the last call.
  std::vector<CongestionFinding> TakeCongestionFindings();
  const fabric::PathMonitor& monitor() const { return monitor_; }

  // Tiered probing (fabric/probe_tiers.h): the source of the node's TCP
  // connections, read every second on the prober's thread; a peer whose
  // connections moved bytes within the last 10 s is active, and only active
  // peers' pinned paths are probed fast for carrying traffic. Without a
  // source (or while it fails) every peer counts as active. Call before
  // Start().
  void SetTrafficSource(std::unique_ptr<TrafficSource> source) { traffic_ = std::move(source); }
  // This boot's epoch as sent (fabric_probe.h). Read from the service thread.
  uint64_t epoch() const { return epoch_; }

 private:
  // The tick's probes (each with its path's ack) and ack-only packets, in one batch.
  void SendDue(MonoTime now, std::optional<int64_t> fabric_now);
  // Every second: the active peers from the traffic source, the tier gauges.
  void UpdateActivity(MonoTime now);
  // One datagram drained at `now` (fabric time then: fabric_now).
  void Handle(const FabricDatagram& d, MonoTime now, std::optional<int64_t> fabric_now);
  // Every 200 ms: neighbours of down rails released, quiet peers' ack state dropped.
  void Sweep(MonoTime now);
  // The monitor's decisions: published (logs, counters) and carried out on the routes.
  void Apply(const fabric::Decisions& d);
  void Reconcile(MonoTime now);
  Status Adopt(MonoTime now);  // re-learns owned routes (see Start); the List error
  void ApplyPendingPeers(MonoTime now);
  void WatchPeers(const std::vector<std::string>& names, MonoTime now);
  const FabricPeer* PeerByName(const std::string& name) const;
  void SetKnown(std::vector<FabricPeer> known);  // known_ and the ack book's peers
  void CountDrop(FabricDrop d) { ++drops_pending_[static_cast<size_t>(d)]; }
  void FlushCounts();      // drops and limited urgent replies, into their metrics
  void RenewEpoch();

  FabricSocket& socket_;
  const Clock& clock_;
  const FabricProbeCodec& codec_;
  FabricNow fabric_now_;
  FabricServiceOptions options_;
  NodeId self_;
  fabric::PathMonitor monitor_;
  AckBook acks_;           // what we acknowledge, and our paths as the peers' acks name them
  RouteApplier routes_;    // pins -> kernel routes
  FabricPublisher publisher_;  // metrics, status, health, logs of changes
  // Peer names stay at the edges (metrics, status, routes, logs): per
  // received datagram and per probe sent, paths are found by integers.
  // Each watched path of ours, by fabric::PathId (rebuilt by WatchPeers).
  struct Probed {
    const FabricPeer* peer = nullptr;  // in options_.setup.peers
    uint32_t seq = 0;                  // its last probe seq
  };
  std::vector<Probed> probed_;
  std::map<fabric::PathKey, uint32_t> seqs_;  // last seqs, kept across WatchPeers (a re-added path goes on)
  std::vector<FabricPeer> known_;  // whose probes we answer (probed peers included); AckBook's peer indices
  std::vector<FabricDatagram> inbox_;
  // The batch being sent (one tick's packets), kept to reuse their storage:
  // every container is reused tick after tick, no allocation per probe once
  // they have grown.
  struct Batch {
    std::vector<std::array<uint8_t, kFabricProbeSize>> bytes;
    std::vector<FabricSend> sends;
    std::vector<int> rail;                  // the rail of each probe; -1: ack-only
    std::vector<const FabricPeer*> peer;    // the peer of each
    struct Probe {
      fabric::PathId path = 0;
      uint32_t seq = 0;
      bool urgent = false;
    };
    std::vector<Probe> probes;              // each probe of the batch
    std::vector<AckBook::AckOnly> ack_only;
  };
  Batch out_;
  MonoTime next_sweep_{};
  std::vector<fabric::PathId> tick_;  // the paths this tick probes (tiers)
  std::unique_ptr<TrafficSource> traffic_;
  PeerActivity activity_{std::chrono::seconds(10)};
  MonoTime next_activity_{};
  bool traffic_failed_ = false;  // logged once
  uint64_t epoch_ = 0;                 // ours
  uint32_t first_seq_ = 1;             // FirstSeq(epoch_)
  bool renew_epoch_ = false;           // a path's seqs span renew_epoch_after
  std::array<uint64_t, kFabricDropKinds> drops_pending_{};  // counted into dropped_ once per wake-up
  uint64_t urgent_limited_pending_ = 0;
  bool adopted_ = false;           // the start-up route adoption ran

  mutable std::mutex mu_;
  std::optional<std::pair<std::vector<FabricPeer>, std::vector<FabricPeer>>> pending_peers_;  // GUARDED_BY(mu_)

  metrics::Family& urgent_;
  metrics::Family& dropped_;
  metrics::Family& send_errors_;
  metrics::Family& urgent_limited_;
  metrics::Family& peer_restarts_;
  metrics::Family& tier_paths_;
  metrics::Family& active_peers_;
};

}  // namespace lockstep::agent
