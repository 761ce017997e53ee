#include "lockstep/agent/runtime/fabric_service.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <variant>

#include "lockstep/common/log.h"

namespace lockstep::agent {
namespace {

constexpr auto kSweepEvery = std::chrono::milliseconds(200);
// The socket buffers hold this much of the paths' arrivals (a probe per path
// per interval, as many urgent probes and acks again), so that a stall of
// the node delays probes instead of dropping one on every path at once.
constexpr auto kReceiveHeadroom = std::chrono::milliseconds(100);
constexpr size_t kMinReceiveDatagrams = 256;

// Home paths hash the pair {self, peer}: the monitor needs our name.
fabric::FabricOptions WithSelf(fabric::FabricOptions o, const std::string& self) {
  o.self = self;
  return o;
}

AckBookOptions AckOptions(const FabricServiceOptions& o) {
  AckBookOptions a{.stats_window = o.fabric.stats_window,
                   .probe_interval = o.fabric.probe_interval,
                   .miss_threshold = o.fabric.miss_threshold};
  if (fabric::IdleTicks(o.fabric)) {
    a.idle_wake = Nanos(static_cast<int64_t>(static_cast<double>(o.fabric.idle_tick.count()) * (1 + o.fabric.jitter)));
  }
  for (const RailInfo& r : o.setup.rails) a.rail_ifindex.push_back(r.ifindex);
  return a;
}

std::vector<uint32_t> WireIds(const std::vector<FabricPeer>& peers) {
  std::vector<uint32_t> ids;
  ids.reserve(peers.size());
  for (const FabricPeer& p : peers) ids.push_back(WireNodeId(p.id));
  return ids;
}

uint64_t WallNs(const Clock& clock) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(clock.Wall().time_since_epoch()).count();
  return ns > 0 ? static_cast<uint64_t>(ns) : 1;
}

}  // namespace

FabricService::FabricService(FabricSocket& socket, RouteActuator& actuator, const Clock& clock,
                             const FabricProbeCodec& codec, FabricNow fabric_now, FabricServiceOptions options,
                             metrics::Registry& registry)
    : socket_(socket),
      clock_(clock),
      codec_(codec),
      fabric_now_(std::move(fabric_now)),
      options_(std::move(options)),
      self_(NodeIdFromName(options_.self_name)),
      monitor_(WithSelf(options_.fabric, options_.self_name), options_.seed),
      acks_(AckOptions(options_)),
      routes_(actuator, clock_, options_.setup, options_.reconcile_every, registry),
      publisher_(options_.self_name, options_.setup, options_.fabric, options_.publish_every, clock_, registry,
                 options_.latency, options_.topology, options_.congestion),
      urgent_(registry.Counter("lockstep_fabric_urgent_probes_total",
                               "Urgent probes sent to confirm a missed probe at once (counted in probes_sent too)",
                               {"peer", "rail"})),
      dropped_(registry.Counter("lockstep_fabric_probe_dropped_total", "Fabric probe datagrams dropped, by reason",
                                {"reason"})),
      send_errors_(registry.Counter("lockstep_fabric_send_errors_total",
                                    "Probe or ack-only sends the kernel refused (rail=\"reply\": ack-only)", {"rail"})),
      urgent_limited_(registry.Counter("lockstep_fabric_urgent_replies_limited_total",
                                       "Urgent probes not answered at once because their peer's urgent reply budget "
                                       "was spent (their ack rides on the next regular packet)")),
      peer_restarts_(registry.Counter("lockstep_fabric_peer_restarts_total",
                                      "Peers seen to restart: an authenticated packet with a newer epoch (boot)",
                                      {"peer"})),
      tier_paths_(registry.Gauge("lockstep_fabric_probe_tier_paths",
                                 "Paths by probe tier at the last tick (fast: every interval; idle: the rotation, "
                                 "each at least every probe.idlePathIntervalMs)",
                                 {"tier"})),
      active_peers_(registry.Gauge("lockstep_fabric_active_peers",
                                   "Peers whose TCP connections moved bytes in the last 10 s (-1: not known, every "
                                   "peer counts as active)")) {
  SetKnown(options_.setup.peers);
  // A rail under a latency SLA is probed fast on every path (see
  // SetAlwaysFastRails): an SLA the idle rotation starved of samples would
  // never be judged.
  std::set<int> sla_rails;
  for (const auto& [rail, sla] : options_.latency.per_rail) sla_rails.insert(rail);
  monitor_.SetAlwaysFastRails(options_.latency.all_rails.has_value(), std::move(sla_rails));
  epoch_ = options_.epoch != 0 ? options_.epoch : WallNs(clock_);
  first_seq_ = FirstSeq(epoch_);
  urgent_limited_.Inc({}, 0);
  for (FabricDrop d : kAllFabricDrops) dropped_.Inc({FabricDropName(d)}, 0);
}

void FabricService::SetKnown(std::vector<FabricPeer> known) {
  known_ = std::move(known);
  acks_.SetKnown(WireIds(known_));
}

const FabricPeer* FabricService::PeerByName(const std::string& name) const {
  for (const FabricPeer& p : options_.setup.peers) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Status FabricService::Start() {
  const MonoTime now = clock_.Monotonic();
  Status result;
  if (!options_.await_peers) result = Adopt(now);
  std::vector<std::string> peers;
  for (const FabricPeer& p : options_.setup.peers) peers.push_back(p.name);
  if (adopted_) WatchPeers(peers, now);
  ApplyPendingPeers(now);
  routes_.ScheduleReconcile(now);
  publisher_.Publish(now, monitor_, fabric_now_ && fabric_now_().has_value());
  return result;
}

Status FabricService::Adopt(MonoTime now) {
  adopted_ = true;
  auto pins = routes_.Adopt(now);
  if (!pins.ok()) return pins.error();
  for (const auto& [peer, path] : *pins) monitor_.AdoptPin(peer, path);
  return Status::Ok();
}

void FabricService::WatchPeers(const std::vector<std::string>& names, MonoTime now) {
  for (fabric::PathId id = 0; id < probed_.size(); ++id) seqs_[monitor_.Key(id)] = probed_[id].seq;
  Apply(monitor_.SetPaths(names.empty() ? std::vector<fabric::PathKey>{}
                                        : fabric::EnumeratePaths(static_cast<int>(options_.setup.rails.size()), names,
                                                                 std::max(1, options_.paths_per_rail)),
                          now));
  // SetPaths renumbered the paths: index what the hot path needs by id.
  probed_.assign(monitor_.size(), Probed{});
  std::map<WirePath, fabric::PathId> ours;
  for (fabric::PathId id = 0; id < monitor_.size(); ++id) {
    const fabric::PathKey& key = monitor_.Key(id);
    const FabricPeer* peer = PeerByName(key.peer);
    // A path new in this epoch starts at FirstSeq (stored: the last one sent).
    probed_[id] = {peer, seqs_.try_emplace(key, first_seq_ - 1).first->second};
    if (peer) ours.emplace(WirePath{WireNodeId(peer->id), key.rail, key.index}, id);
  }
  acks_.SetOurPaths(std::move(ours));
  const auto intervals =
      static_cast<size_t>((kReceiveHeadroom + options_.fabric.probe_interval - std::chrono::nanoseconds(1)) /
                          options_.fabric.probe_interval);
  socket_.ReserveReceive(std::max(kMinReceiveDatagrams, monitor_.size() * 2 * std::max<size_t>(intervals, 1)));
  publisher_.SetPathCount(monitor_.size());
  // A peer that left takes its series and its installed pin with it.
  for (const std::string& peer : publisher_.ForgetPeersExcept(names)) routes_.Forget(peer);
}

void FabricService::SetPeers(std::vector<FabricPeer> probed, std::vector<FabricPeer> known) {
  std::lock_guard lock(mu_);
  pending_peers_.emplace(std::move(probed), std::move(known));
}

void FabricService::ApplyPendingPeers(MonoTime now) {
  std::optional<std::pair<std::vector<FabricPeer>, std::vector<FabricPeer>>> update;
  {
    std::lock_guard lock(mu_);
    update.swap(pending_peers_);
  }
  if (!update) return;
  // Clean: by name, without ourselves, without addresses we cannot use.
  auto clean = [&](std::vector<FabricPeer> in) {
    std::sort(in.begin(), in.end(), [](const FabricPeer& a, const FabricPeer& b) { return a.name < b.name; });
    std::vector<FabricPeer> out;
    std::map<uint32_t, std::string> owner;
    for (FabricPeer& p : in) {
      if (p.name.empty() || p.name == options_.self_name || p.id == self_ || p.host_address == 0 ||
          p.host_address == options_.setup.host_address) {
        continue;
      }
      if (!out.empty() && out.back().name == p.name) continue;
      if (WireNodeId(p.id) == WireNodeId(self_) || std::any_of(out.begin(), out.end(), [&](const FabricPeer& o) {
            return WireNodeId(o.id) == WireNodeId(p.id);
          })) {
        log::Warn("fabric peer's 32-bit wire id collides with another node's; ignoring it (rename one node)",
                  {{"peer", p.name}});
        continue;
      }
      if (auto [it, fresh] = owner.emplace(p.host_address, p.name); !fresh) {
        log::Warn("fabric peers share a host address; ignoring the second",
                  {{"peer", p.name}, {"other", it->second}, {"host_address", FormatIpv4(p.host_address)}});
        continue;
      }
      out.push_back(std::move(p));
    }
    return out;
  };
  std::vector<FabricPeer> probed = clean(std::move(update->first));
  std::vector<FabricPeer> known = std::move(update->second);
  known.insert(known.end(), probed.begin(), probed.end());
  known = clean(std::move(known));
  if (probed == options_.setup.peers && known == known_) return;
  std::vector<std::string> names, kept;
  for (const FabricPeer& p : probed) {
    names.push_back(p.name);
    const FabricPeer* old = PeerByName(p.name);
    if (old && old->host_address == p.host_address) kept.push_back(p.name);
  }
  // First drop removed peers (and peers whose address changed) while the
  // setup still maps their routes, so their pins are removed.
  if (adopted_) WatchPeers(kept, now);
  log::Info("fabric peers changed",
            {{"probed", std::to_string(probed.size())}, {"known", std::to_string(known.size())}});
  options_.setup.peers = std::move(probed);
  // Peers that stay known keep their epoch and urgent budget; the ack
  // state of peers no longer known is dropped.
  SetKnown(std::move(known));
  if (!adopted_) {
    if (Status st = Adopt(now); !st.ok()) {
      log::Warn("fabric failover: cannot list owned routes; retrying", {{"error", st.error().message}});
    }
  }
  WatchPeers(names, now);
}

void FabricService::SendDue(MonoTime now, std::optional<int64_t> fabric_now) {
  const bool tick = monitor_.TakeProbeTick(now, tick_);  // the tiers' paths (probe_tiers.h)
  const std::vector<fabric::PathId> urgent = monitor_.TakeUrgent();
  if (!tick && urgent.empty() && !acks_.AckOnlyDue()) return;
  // Every container here is a member reused tick after tick: no allocation
  // per probe once they have grown.
  out_.bytes.clear();
  out_.sends.clear();
  out_.rail.clear();
  out_.peer.clear();
  out_.probes.clear();
  out_.ack_only.clear();
  acks_.BeginBatch();
  const uint32_t self = WireNodeId(self_);
  // A probe for `path`; an urgent one is flagged so (its arrival wakes the
  // peer's prober: the ack comes back within a round trip) and carries no
  // ack, leaving the tick's carriers as they are.
  auto add_probe = [&](fabric::PathId id, bool is_urgent) {
    const fabric::PathKey& path = monitor_.Key(id);
    Probed& probed = probed_[id];
    const FabricPeer* peer = probed.peer;
    if (!peer || path.rail >= static_cast<int>(options_.setup.rails.size())) return;
    const RailInfo& rail = options_.setup.rails[path.rail];
    FabricProbe p;
    p.rail = static_cast<uint8_t>(path.rail);
    p.path_index = static_cast<uint8_t>(path.index);
    p.sender = self;
    p.dest = WireNodeId(peer->id);
    p.epoch = epoch_;
    uint32_t& seq = probed.seq;
    if (++seq == 0) seq = 1;  // 0 is "no probe" on the wire
    p.seq = seq;
    p.slow = !is_urgent && monitor_.SlowProbe(id);  // the peer may ack it at its idle tick
    p.urgent = is_urgent;  // same port, same 5-tuple: the same ECMP path as the probes it confirms
    if (seq - first_seq_ >= options_.renew_epoch_after) renew_epoch_ = true;  // after this batch
    if (fabric_now) p.tx_fabric = static_cast<uint32_t>(static_cast<uint64_t>(*fabric_now));
    // Each probe carries the ack of a peer path whose probes arrive on the
    // interface it leaves by: the ack retraces the links of the probes it
    // acknowledges, whatever the rails are called at the other end.
    if (!is_urgent) {
      if (auto carried = acks_.Carry(p.dest, rail.ifindex, path.index, now)) {
        p.ack = carried->ack;
        p.ack_rail = static_cast<uint8_t>(carried->rail);
        p.ack_path_index = static_cast<uint8_t>(carried->index);
      }
    }
    out_.bytes.push_back(codec_.Encode(p));
    out_.sends.push_back({.dest = peer->host_address,
                          .port = options_.peer_port,
                          .ifindex = rail.ifindex,
                          .source = options_.setup.host_address,
                          .path = path.index});
    out_.rail.push_back(path.rail);
    out_.peer.push_back(peer);
    out_.probes.push_back({id, seq, is_urgent});
    if (is_urgent) urgent_.Inc({path.peer, rail.name});
  };
  for (fabric::PathId id : tick_) add_probe(id, false);
  for (fabric::PathId id : urgent) add_probe(id, true);
  // Acks no probe of ours carries (a peer that probes a path we do not,
  // or more of its paths arriving on one interface than we probe through
  // it) leave alone, out of the interface their probes arrive on: at every
  // tick, and in between for paths no probe of ours could carry.
  // An urgent probe's ack leaves at once, flagged urgent (it wakes the
  // peer's prober), even when a probe of this tick carries it too.
  acks_.TakeAckOnly(tick, now, out_.ack_only);
  for (const AckBook::AckOnly& a : out_.ack_only) {
    const FabricPeer* peer = &known_[static_cast<size_t>(a.peer)];
    FabricProbe p;
    p.sender = self;
    p.dest = WireNodeId(peer->id);
    p.epoch = epoch_;
    p.ack = a.ack;
    p.ack_rail = static_cast<uint8_t>(a.path.rail);
    p.ack_path_index = static_cast<uint8_t>(a.path.index);
    p.urgent = a.urgent;
    out_.bytes.push_back(codec_.Encode(p));
    out_.sends.push_back({.dest = peer->host_address,
                          .port = options_.peer_port,
                          .ifindex = a.ifindex,
                          .source = options_.setup.host_address});
    out_.rail.push_back(-1);
    out_.peer.push_back(peer);
  }
  // One batch (sendmmsg) per tick; spans are set once out_.bytes stops growing.
  for (size_t i = 0; i < out_.sends.size(); ++i) out_.sends[i].bytes = out_.bytes[i];
  socket_.SendBatch(out_.sends);
  for (size_t i = 0; i < out_.sends.size(); ++i) {
    // A send the kernel refuses (the rail has no route) is a lost probe:
    // the monitor times it out like any other.
    if (!out_.sends[i].sent) {
      send_errors_.Inc({out_.rail[i] < 0 ? std::string("reply") : options_.setup.rails[out_.rail[i]].name});
    } else if (out_.rail[i] < 0) {
      publisher_.CountAnswered(out_.peer[i]->name);  // counted into the metric at Publish
    }
  }
  for (const Batch::Probe& p : out_.probes) monitor_.OnProbeSent(p.path, p.seq, now, p.urgent);
  if (renew_epoch_) RenewEpoch();
}

void FabricService::RenewEpoch() {
  renew_epoch_ = false;
  epoch_ = std::max(epoch_ + 1, WallNs(clock_));
  first_seq_ = FirstSeq(epoch_);
  for (Probed& p : probed_) p.seq = first_seq_ - 1;
  seqs_.clear();
  log::Info("fabric probe seqs span their limit: took a new epoch (peers start our windows again)",
            {{"epoch", std::to_string(epoch_)}});
}

void FabricService::FlushCounts() {
  for (size_t i = 0; i < drops_pending_.size(); ++i) {
    if (drops_pending_[i] == 0) continue;
    dropped_.Inc({FabricDropName(kAllFabricDrops[i])}, static_cast<double>(drops_pending_[i]));
    drops_pending_[i] = 0;
  }
  if (urgent_limited_pending_ > 0) {
    urgent_limited_.Inc({}, static_cast<double>(urgent_limited_pending_));
    urgent_limited_pending_ = 0;
  }
}

void FabricService::Handle(const FabricDatagram& d, MonoTime now, std::optional<int64_t> fabric_now) {
  auto decoded = codec_.Decode(d.bytes());
  if (auto* drop = std::get_if<FabricDrop>(&decoded)) {
    CountDrop(*drop);
    return;
  }
  const FabricProbe& p = std::get<FabricProbe>(decoded);
  if (p.dest != WireNodeId(self_)) {
    CountDrop(FabricDrop::kMisdirected);
    return;
  }
  const int peer = acks_.PeerIndex(p.sender);
  if (peer < 0) {
    CountDrop(FabricDrop::kUnknownSender);
    return;
  }
  AckBook::Packet packet{.sender = p.sender,
                         .epoch = p.epoch,
                         .rail = p.rail,
                         .index = p.path_index,
                         .seq = p.seq,
                         .received = d.received,
                         .ifindex = d.ifindex,
                         .urgent = d.urgent,
                         .one_way_delay = std::nullopt,
                         .slow = p.slow};
  if (p.seq && fabric_now) {
    // Its one-way delay from fabric time at the kernel's receive stamp (the
    // datagram may have waited in the socket until this wake-up).
    const int64_t rx_fabric = *fabric_now - std::chrono::duration_cast<Nanos>(now - d.received).count();
    if (const std::optional<int64_t> owd = OneWayDelayNs(p.tx_fabric, rx_fabric)) packet.one_way_delay = Nanos(*owd);
  }
  // Freshness first (fabric_probe.h, "Replays"): nothing of a stale or
  // replayed packet is used, its ack included.
  const AckBook::Verdict v = acks_.OnPacket(packet, now);
  if (v.restarted) {
    const std::string& name = known_[static_cast<size_t>(peer)].name;
    peer_restarts_.Inc({name});
    log::Info(!v.older_epoch ? "fabric peer restarted (a newer epoch): its paths' ack windows start again"
                             : "fabric peer silent for a stats window came back with an older epoch (its "
                               "clock went back across a restart?): its paths' ack windows start again",
              {{"peer", name}});
  }
  if (v.drop) {
    CountDrop(*v.drop);
    return;
  }
  if (v.urgent_limited) ++urgent_limited_pending_;
  // A peer's fast probe is acked within one fast gap: no idle ticks here
  // while they come (an urgent one is acked on arrival anyway).
  if (p.seq && !p.slow && !d.urgent) monitor_.HoldFastTicks(now, now + fabric::kFastTickHold);
  if (p.ack) {
    auto ours = acks_.OurPath({p.sender, p.ack_rail, p.ack_path_index});
    if (!ours) {
      // A probe of a path we do not watch may carry an ack (the peer acks
      // what it received before we stopped); an ack alone for it is stray.
      if (!p.seq) CountDrop(FabricDrop::kUnmatched);
      return;
    }
    Apply(monitor_.OnAck(*ours, *p.ack, d.received));
  }
}

void FabricService::Apply(const fabric::Decisions& d) {
  publisher_.OnDecisions(d);
  routes_.Apply(d.actions);
}

void FabricService::Reconcile(MonoTime now) {
  std::vector<fabric::PathKey> pins;
  for (const auto& [peer, path] : monitor_.Pins()) pins.push_back(path);
  routes_.Reconcile(now, pins);
}

void FabricService::RunOnce(std::chrono::nanoseconds max_wait) {
  // One wake-up per event: the next tick (probes), probe timeouts and
  // re-admissions. Datagrams arriving in between do not wake the thread:
  // they wait in the socket with their kernel receive time, which is what
  // acks and delays are computed from.
  MonoTime now = clock_.Monotonic();
  MonoTime due = now + max_wait;
  if (auto next = monitor_.NextWakeup()) due = std::min(due, *next);
  // Acks no probe of ours carries: as often as the peer's probes need them
  // (a node on idle ticks stays on them for a peer's idle probes).
  if (const std::optional<Nanos> wake = acks_.AckOnlyWake(now)) due = std::min(due, now + *wake);
  inbox_.clear();
  (void)socket_.Poll(std::max<std::chrono::nanoseconds>(due - now, std::chrono::nanoseconds(0)), inbox_);
  now = clock_.Monotonic();
  // Woken (or done with the last round) much later than due: the node was
  // stalled, and silence in the stall says nothing about the paths.
  if (const fabric::Stall st = monitor_.ExcuseStall(due, now); st != fabric::Stall::kNone) {
    publisher_.NoteStall(now, now - due, st);
  }
  ApplyPendingPeers(now);
  const std::optional<int64_t> fabric_now = fabric_now_ ? fabric_now_() : std::nullopt;
  // Acks first: one that arrived before its probe's timeout counts though
  // it is read after it. In the order they arrived (kernel stamps), not the
  // order they were read: the urgent socket is read first, and an urgent ack
  // handled before an earlier regular one would time out, on its path, the
  // probe that earlier ack answered in time.
  auto by_arrival = [](const FabricDatagram& a, const FabricDatagram& b) { return a.received < b.received; };
  if (!std::is_sorted(inbox_.begin(), inbox_.end(), by_arrival)) {
    std::stable_sort(inbox_.begin(), inbox_.end(), by_arrival);  // most wake-ups: nothing urgent, already in order
  }
  for (const FabricDatagram& d : inbox_) Handle(d, now, fabric_now);
  FlushCounts();
  Apply(monitor_.Tick(now));
  SendDue(now, fabric_now);
  if (now >= next_activity_) UpdateActivity(now);
  if (adopted_ && routes_.ReconcileDue(now)) Reconcile(now);
  if (now >= next_sweep_) Sweep(now);
  // Periodically for the percentiles, and soon after any change of state or
  // pin so `fabric status`, the metrics and FabricHealth follow failovers.
  if (publisher_.Due(now)) publisher_.Publish(now, monitor_, fabric_now.has_value());
}

void FabricService::UpdateActivity(MonoTime now) {
  next_activity_ = now + std::chrono::seconds(1);
  std::optional<std::set<std::string>> active;
  if (traffic_) {
    auto flows = traffic_->Flows();
    if (flows.ok()) {
      activity_.Update(now, *flows);
      active.emplace();
      for (const FabricPeer& p : options_.setup.peers) {
        if (activity_.Active(p.host_address, now)) active->insert(p.name);
      }
      traffic_failed_ = false;
    } else if (!std::exchange(traffic_failed_, true)) {
      log::Warn("fabric: cannot list TCP connections; probing every peer's pinned path fast",
                {{"error", flows.error().message}});
    }
  }
  active_peers_.Set({}, active ? static_cast<double>(active->size()) : -1.0);
  monitor_.SetActivePeers(std::move(active));
  const fabric::ProbeTiers& tiers = monitor_.tiers();
  tier_paths_.Set({"fast"}, static_cast<double>(tiers.fast()));
  tier_paths_.Set({"idle"}, static_cast<double>(tiers.idle()));
}

void FabricService::Sweep(MonoTime now) {
  next_sweep_ = now + kSweepEvery;
  // A rail whose every path failed: packets that went to it before the
  // move may wait on its unresolved neighbours; free them (see RouteApplier).
  for (const fabric::RailView& r : monitor_.Rails(now)) {
    if (r.down) routes_.ReleaseNeighbours(r.rail, false);
  }
  // Stop acknowledging peers that went quiet (peers that left: ApplyPendingPeers).
  acks_.DropQuiet(now);
}

FabricHealthView FabricService::Health() const { return publisher_.Health(); }

std::vector<FabricFlapAlert> FabricService::TakeFlapAlerts() { return publisher_.TakeFlapAlerts(); }

std::vector<FabricLatencyBreach> FabricService::TakeLatencyBreaches() { return publisher_.TakeLatencyBreaches(); }

std::vector<CongestionFinding> FabricService::TakeCongestionFindings() { return publisher_.TakeCongestionFindings(); }

nlohmann::json FabricService::StatusJson() const { return publisher_.StatusJson(); }

}  // namespace lockstep::agent
