#include "lockstep/agent/fabric_service.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>
#include <variant>

#include "lockstep/agent/route_reconcile.h"
#include "lockstep/common/log.h"

namespace lockstep::agent {
namespace {

using fabric::PathKey;
using fabric::PathState;

constexpr PathState kStates[] = {PathState::kUnknown, PathState::kUp, PathState::kSuspect, PathState::kDown,
                                 PathState::kRecovering};
constexpr auto kSweepEvery = std::chrono::milliseconds(200);
constexpr auto kChangePublishGap = std::chrono::milliseconds(20);  // bounds publishing in a flap storm
constexpr auto kStallLogEvery = std::chrono::seconds(10);

double Seconds(std::optional<Nanos> d) { return d ? std::chrono::duration<double>(*d).count() : -1.0; }
nlohmann::json NsOrNull(std::optional<Nanos> d) {
  return d ? nlohmann::json(static_cast<int64_t>(d->count())) : nlohmann::json(nullptr);
}

// Home paths hash the pair {self, peer}: the monitor needs our name.
fabric::FabricOptions WithSelf(fabric::FabricOptions o, const std::string& self) {
  o.self = self;
  return o;
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
      actuator_(actuator),
      clock_(clock),
      codec_(codec),
      fabric_now_(std::move(fabric_now)),
      options_(std::move(options)),
      self_(NodeIdFromName(options_.self_name)),
      monitor_(WithSelf(options_.fabric, options_.self_name), options_.seed),
      state_(registry.Gauge("lockstep_fabric_path_state",
                            "1 for the state each path (local rail -> peer) is in, 0 for the others",
                            {"peer", "rail", "state"})),
      loss_(registry.Gauge("lockstep_fabric_path_loss_ratio", "Probe loss of the path over the stats window",
                           {"peer", "rail"})),
      owd_(registry.Gauge("lockstep_fabric_path_one_way_delay_seconds",
                          "One-way delay of the path from fabric time (only while clock sync is LOCKED)",
                          {"peer", "rail", "quantile"})),
      rtt_(registry.Gauge("lockstep_fabric_path_rtt_seconds", "Probe round trip of the path",
                          {"peer", "rail", "quantile"})),
      sent_(registry.Counter("lockstep_fabric_probes_sent_total", "Path probes sent", {"peer", "rail"})),
      urgent_(registry.Counter("lockstep_fabric_urgent_probes_total",
                               "Urgent probes sent to confirm a missed probe at once (counted in probes_sent too)",
                               {"peer", "rail"})),
      replies_(registry.Counter("lockstep_fabric_probe_replies_total",
                                "Path probes the peer acknowledged in time (symmetric probing: acks ride on its probes)",
                                {"peer", "rail"})),
      misses_(registry.Counter("lockstep_fabric_probe_misses_total", "Path probes without an ack in time",
                               {"peer", "rail"})),
      peer_rail_(registry.Gauge("lockstep_fabric_peer_rail",
                                "The rail this host's traffic to the peer is pinned to; -1: static ECMP (no pin)",
                                {"peer"})),
      flaps_window_(registry.Gauge("lockstep_fabric_flaps_last_hour", "Rail flaps (every path of the rail failed) in the last hour",
                                   {"rail"})),
      flaps_total_(registry.Counter("lockstep_fabric_flaps_total", "Rail flaps: every path of the rail failed after it delivered",
                                    {"rail"})),
      alerts_(registry.Counter("lockstep_fabric_flap_alerts_total",
                               "Flap alerts: the rail's flaps in the last hour rose above flapAlertPerHour",
                               {"rail"})),
      rail_down_(registry.Gauge("lockstep_fabric_rail_down", "1 while every path of the rail has failed", {"rail"})),
      dropped_(registry.Counter("lockstep_fabric_probe_dropped_total", "Fabric probe datagrams dropped, by reason",
                                {"reason"})),
      answered_(registry.Counter("lockstep_fabric_probes_answered_total",
                                 "Ack-only packets sent: to peers that probe a path we do not (our probes carry the "
                                 "other acks; probes sent + these = fabric packets sent)",
                                 {"peer"})),
      send_errors_(registry.Counter("lockstep_fabric_send_errors_total", "Probe or ack-only sends the kernel refused (rail=\"reply\": ack-only)",
                                    {"rail"})),
      route_changes_(registry.Counter("lockstep_fabric_route_changes_total",
                                      "Route changes for pins (pin, unpin, reconcile), by result",
                                      {"action", "result"})),
      stalls_(registry.Counter("lockstep_fabric_prober_stalls_total",
                               "Wake-ups of the prober later than the urgent timeout past their due time (a stalled "
                               "node: within the excuse budget, probe timeouts that fell in the stall were restarted, "
                               "not counted as misses)")),
      stalls_judged_(registry.Counter("lockstep_fabric_prober_stalls_judged_total",
                                      "Prober stalls beyond the excuse budget (stallExcuses per stall window): "
                                      "judged, their probe timeouts counted as misses")),
      prober_stalled_(registry.Gauge("lockstep_fabric_prober_stalled",
                                     "1 while a stall was judged within the last stall window: the prober is late "
                                     "so often that stalls are no longer excused (FabricHealth ProberStalled)")),
      urgent_limited_(registry.Counter("lockstep_fabric_urgent_replies_limited_total",
                                       "Urgent probes not answered at once because their peer's urgent reply budget "
                                       "was spent (their ack rides on the next regular packet)")),
      peer_restarts_(registry.Counter("lockstep_fabric_peer_restarts_total",
                                      "Peers seen to restart: an authenticated packet with a newer epoch (boot)",
                                      {"peer"})) {
  known_ = options_.setup.peers;
  peer_state_.assign(known_.size(), PeerState{});
  epoch_ = options_.epoch != 0 ? options_.epoch : WallNs(clock_);
  first_seq_ = FirstSeq(epoch_);
  urgent_limited_.Inc({}, 0);
  stalls_judged_.Inc({}, 0);
  prober_stalled_.Set(0);
  for (FabricDrop d : kAllFabricDrops) dropped_.Inc({FabricDropName(d)}, 0);
  for (const RailInfo& r : options_.setup.rails) {
    flaps_total_.Inc({r.name}, 0);
    alerts_.Inc({r.name}, 0);
  }
}

const FabricPeer* FabricService::PeerByWireId(uint32_t id) const {
  for (const FabricPeer& p : known_) {
    if (WireNodeId(p.id) == id) return &p;
  }
  return nullptr;
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
  next_reconcile_ = now + options_.reconcile_every;
  Publish(now);
  return result;
}

Status FabricService::Adopt(MonoTime now) {
  adopted_ = true;
  auto listed = actuator_.List();
  if (!listed.ok()) {
    retry_at_ = now + std::chrono::seconds(1);
    return listed.error();
  }
  std::vector<OwnedRoute> keep;
  for (const OwnedRoute& r : *listed) {
    if (auto pin = PinFromRoute(options_.setup, r)) {
      monitor_.AdoptPin(pin->first, pin->second);
      installed_rail_[pin->first] = pin->second.rail;
      // Kept as found (PlanRoutes replaces it only if it differs from what
      // we would install, say an older rto_min).
      if (auto want = PinRoute(options_.setup, pin->second)) keep.push_back(*want);
      log::Info("adopted a pin from the previous run", {{"route", r.ToString()}});
    }
  }
  auto plan = ReconcileRoutes(actuator_, keep);
  if (!plan.ok()) {
    log::Warn("start-up route reconcile failed; retrying later", {{"error", plan.error().message}});
    retry_at_ = now + std::chrono::seconds(1);
  } else {
    for (const auto& d : plan->remove) log::Info("removed a stale owned route", {{"destination", d.ToString()}});
    route_changes_.Inc({"reconcile", "ok"});
  }
  return Status::Ok();
}

void FabricService::WatchPeers(const std::vector<std::string>& names, MonoTime now) {
  for (fabric::PathId id = 0; id < probed_.size(); ++id) seqs_[monitor_.Key(id)] = probed_[id].seq;
  Apply(monitor_.SetPaths(
      names.empty() ? std::vector<PathKey>{}
                    : fabric::EnumeratePaths(static_cast<int>(options_.setup.rails.size()), names),
      now));
  // SetPaths renumbered the paths: index what the hot path needs by id.
  probed_.assign(monitor_.size(), Probed{});
  ours_.clear();
  for (fabric::PathId id = 0; id < monitor_.size(); ++id) {
    const PathKey& key = monitor_.Key(id);
    const FabricPeer* peer = PeerByName(key.peer);
    // A path new in this epoch starts at FirstSeq (stored: the last one sent).
    probed_[id] = {peer, seqs_.try_emplace(key, first_seq_ - 1).first->second};
    if (peer) ours_.emplace(WirePath{WireNodeId(peer->id), key.rail, key.index}, id);
  }
  RefreshCarriers();
  // A peer that left takes its series with it (at 10k nodes, peers come
  // and go; their gauges would otherwise report the last state forever).
  std::set<std::string> gone;
  for (auto it = published_totals_.begin(); it != published_totals_.end();) {
    if (std::find(names.begin(), names.end(), it->first.peer) != names.end()) {
      ++it;
      continue;
    }
    const PathKey& k = it->first;
    const std::string rail = k.rail < static_cast<int>(options_.setup.rails.size())
                                 ? options_.setup.rails[k.rail].name
                                 : std::to_string(k.rail);
    for (PathState st : kStates) state_.Remove({k.peer, rail, fabric::ToString(st)});
    loss_.Remove({k.peer, rail});
    for (const char* q : {"0.5", "0.99"}) {
      owd_.Remove({k.peer, rail, q});
      rtt_.Remove({k.peer, rail, q});
    }
    sent_.Remove({k.peer, rail});
    replies_.Remove({k.peer, rail});
    misses_.Remove({k.peer, rail});
    gone.insert(k.peer);
    it = published_totals_.erase(it);
  }
  for (const std::string& peer : gone) {
    peer_rail_.Remove({peer});
    installed_rail_.erase(peer);
  }
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
      if (WireNodeId(p.id) == WireNodeId(self_) ||
          std::any_of(out.begin(), out.end(), [&](const FabricPeer& o) { return WireNodeId(o.id) == WireNodeId(p.id); })) {
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
  log::Info("fabric peers changed", {{"probed", std::to_string(probed.size())},
                                     {"known", std::to_string(known.size())}});
  options_.setup.peers = std::move(probed);
  // Peers that stay known keep their epoch and urgent budget.
  std::map<uint32_t, PeerState> states;
  for (size_t i = 0; i < known_.size(); ++i) states.emplace(WireNodeId(known_[i].id), peer_state_[i]);
  known_ = std::move(known);
  peer_state_.assign(known_.size(), PeerState{});
  for (size_t i = 0; i < known_.size(); ++i) {
    if (auto it = states.find(WireNodeId(known_[i].id)); it != states.end()) peer_state_[i] = it->second;
  }
  std::set<uint32_t> known_ids;
  for (const FabricPeer& p : known_) known_ids.insert(WireNodeId(p.id));
  std::erase_if(acks_, [&](const auto& entry) { return !known_ids.contains(entry.first.node); });
  if (!adopted_) {
    if (Status st = Adopt(now); !st.ok()) {
      log::Warn("fabric failover: cannot list owned routes; retrying", {{"error", st.error().message}});
    }
  }
  WatchPeers(names, now);
}

std::vector<std::pair<FabricService::WirePath, FabricService::AckState>>::iterator FabricService::AckAtOrAfter(
    const WirePath& key) {
  return std::lower_bound(acks_.begin(), acks_.end(), key,
                          [](const auto& entry, const WirePath& k) { return entry.first < k; });
}

bool FabricService::HasCarrier(const WirePath& key, const AckState& a) const {
  const auto& rails = options_.setup.rails;
  for (size_t r = 0; r < rails.size(); ++r) {
    if (rails[r].ifindex == a.ifindex && ours_.contains({key.node, static_cast<int>(r), key.index})) return true;
  }
  return false;
}

void FabricService::RefreshCarriers() {
  for (auto& [key, a] : acks_) a.has_carrier = HasCarrier(key, a);
}

bool FabricService::AckOnlyDue() const {
  for (const auto& [key, a] : acks_) {
    if (a.urgent || (a.window.pending() && !a.has_carrier)) return true;
  }
  return false;
}

void FabricService::SendDue(MonoTime now, std::optional<int64_t> fabric_now) {
  const bool tick = monitor_.TakeProbeTick(now);  // every path's probe
  const std::vector<fabric::PathId> urgent = monitor_.TakeUrgent();
  if (!tick && urgent.empty() && !AckOnlyDue()) return;
  // Every container here is a member reused tick after tick: no allocation
  // per probe once they have grown.
  out_bytes_.clear();
  out_.clear();
  out_rail_.clear();
  reply_peer_.clear();
  sent_probes_.clear();
  for (auto& [key, a] : acks_) a.carried = false;
  const uint32_t self = WireNodeId(self_);
  // A probe for `path`; an urgent one goes to the peer's urgent port (which
  // wakes its prober: the ack comes back within a round trip) and carries
  // no ack, leaving the tick's carriers as they are.
  auto add_probe = [&](fabric::PathId id, bool is_urgent) {
    const PathKey& path = monitor_.Key(id);
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
    if (seq - first_seq_ >= options_.renew_epoch_after) renew_epoch_ = true;  // after this batch
    if (fabric_now) p.tx_fabric = static_cast<uint32_t>(static_cast<uint64_t>(*fabric_now));
    // Each probe carries the ack of a peer path whose probes arrive on the
    // interface it leaves by (the same path index first, else the first in
    // key order): the ack retraces the links of the probes it acknowledges,
    // whatever the rails are called at the other end. A scan of this
    // peer's paths (adjacent in acks_: a handful).
    std::pair<WirePath, AckState>* pick = nullptr;
    for (auto it = AckAtOrAfter({p.dest, 0, 0}); !is_urgent && it != acks_.end() && it->first.node == p.dest;
         ++it) {
      const auto& [k, a] = *it;
      if (a.carried || a.ifindex != rail.ifindex) continue;
      if (!pick || (k.index == path.index && pick->first.index != path.index)) pick = &*it;
    }
    if (pick) {
      pick->second.window.MarkAcked();
      p.ack = pick->second.window.Ack(now);
      p.ack_rail = static_cast<uint8_t>(pick->first.rail);
      p.ack_path_index = static_cast<uint8_t>(pick->first.index);
      pick->second.carried = true;
    }
    out_bytes_.push_back(codec_.Encode(p));
    out_.push_back({.dest = peer->host_address,
                    .port = options_.peer_port + (is_urgent ? kUrgentPortOffset : 0),
                    .ifindex = rail.ifindex,
                    .source = options_.setup.host_address});
    out_rail_.push_back(path.rail);
    reply_peer_.push_back(peer);
    sent_probes_.push_back({id, seq, is_urgent});
    if (is_urgent) urgent_.Inc({path.peer, rail.name});
  };
  if (tick) {
    for (fabric::PathId id = 0; id < monitor_.size(); ++id) add_probe(id, false);
  }
  for (fabric::PathId id : urgent) add_probe(id, true);
  // Acks no probe of ours carries (a peer that probes a path we do not,
  // or more of its paths arriving on one interface than we probe through
  // it) leave alone, out of the interface their probes arrive on: at every
  // tick, and in between for paths no probe of ours could carry.
  // An urgent probe's ack leaves at once, to the peer's urgent port, even
  // when a probe of this tick carries it to the regular one.
  for (auto& [key, a] : acks_) {
    const bool is_urgent = std::exchange(a.urgent, false);
    if (!is_urgent && (!a.window.pending() || a.carried || (!tick && a.has_carrier))) continue;
    const FabricPeer* peer = PeerByWireId(key.node);
    if (!peer) continue;
    FabricProbe p;
    p.sender = self;
    p.dest = WireNodeId(peer->id);
    p.epoch = epoch_;
    a.window.MarkAcked();
    p.ack = a.window.Ack(now);
    p.ack_rail = static_cast<uint8_t>(key.rail);
    p.ack_path_index = static_cast<uint8_t>(key.index);
    out_bytes_.push_back(codec_.Encode(p));
    out_.push_back({.dest = peer->host_address,
                    .port = options_.peer_port + (is_urgent ? kUrgentPortOffset : 0),
                    .ifindex = a.ifindex,
                    .source = options_.setup.host_address});
    out_rail_.push_back(-1);
    reply_peer_.push_back(peer);
  }
  // One batch (sendmmsg) per tick; spans are set once out_bytes_ stops growing.
  for (size_t i = 0; i < out_.size(); ++i) out_[i].bytes = out_bytes_[i];
  socket_.SendBatch(out_);
  for (size_t i = 0; i < out_.size(); ++i) {
    // A send the kernel refuses (the rail has no route) is a lost probe:
    // the monitor times it out like any other.
    if (!out_[i].sent) {
      send_errors_.Inc({out_rail_[i] < 0 ? std::string("reply") : options_.setup.rails[out_rail_[i]].name});
    } else if (out_rail_[i] < 0) {
      ++answered_pending_[reply_peer_[i]->name];  // counted into the metric at Publish
    }
  }
  for (const SentProbe& p : sent_probes_) monitor_.OnProbeSent(p.path, p.seq, now, p.urgent);
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

bool FabricService::TakeUrgentReply(PeerState& ps, MonoTime now) {
  // Twice what the peer's paths can ask for: after a miss each path sends
  // at most missThreshold - 1 urgent probes, one per urgent timeout, and the
  // next miss comes a probe interval later.
  const double per_interval = 2.0 * std::max(1, options_.fabric.miss_threshold - 1) *
                              std::max<double>(1.0, static_cast<double>(options_.setup.rails.size()));
  if (ps.urgent_refilled == MonoTime{}) {
    ps.urgent_tokens = per_interval;
  } else if (now > ps.urgent_refilled) {
    ps.urgent_tokens = std::min(per_interval, ps.urgent_tokens + per_interval * (now - ps.urgent_refilled).count() /
                                                                    static_cast<double>(options_.fabric.probe_interval.count()));
  }
  ps.urgent_refilled = std::max(ps.urgent_refilled, now);
  if (ps.urgent_tokens < 1.0) return false;
  ps.urgent_tokens -= 1.0;
  return true;
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
  const FabricPeer* peer = PeerByWireId(p.sender);
  if (!peer) {
    CountDrop(FabricDrop::kUnknownSender);
    return;
  }
  // Freshness first (fabric_probe.h, "Replays"): nothing of a stale or
  // replayed packet is used, its ack included.
  PeerState& ps = StateOf(peer);
  if (p.epoch < ps.epoch && now - ps.last_accepted <= options_.fabric.stats_window) {
    CountDrop(FabricDrop::kStale);  // a previous boot of the peer
    return;
  }
  if (p.epoch != ps.epoch) {
    // Newer: signed evidence that the peer restarted, its seqs begin again.
    // Older after a stats window of silence from the peer: a restart whose
    // wall clock is behind its previous start (fabric_probe.h).
    if (ps.epoch != 0) {
      std::erase_if(acks_, [&](const auto& entry) { return entry.first.node == p.sender; });
      peer_restarts_.Inc({peer->name});
      log::Info(p.epoch > ps.epoch ? "fabric peer restarted (a newer epoch): its paths' ack windows start again"
                                   : "fabric peer silent for a stats window came back with an older epoch (its "
                                     "clock went back across a restart?): its paths' ack windows start again",
                {{"peer", peer->name}});
    }
    ps.epoch = p.epoch;
  }
  const WirePath key{p.sender, p.rail, p.path_index};
  if (p.seq) {
    // Its one-way delay from fabric time at the kernel's receive stamp (the
    // datagram may have waited in the socket until this wake-up).
    std::optional<int64_t> rx_fabric;
    if (fabric_now) rx_fabric = *fabric_now - std::chrono::duration_cast<Nanos>(now - d.received).count();
    const std::optional<int64_t> owd = OneWayDelayNs(p.tx_fabric, rx_fabric);
    auto it = AckAtOrAfter(key);
    const bool fresh = it == acks_.end() || it->first != key;
    if (fresh) it = acks_.insert(it, {key, AckState{}});
    AckState& a = it->second;
    switch (a.window.OnReceive(*p.seq, d.received, owd ? std::optional<Nanos>(Nanos(*owd)) : std::nullopt)) {
      case fabric::Receipt::kNew:
      case fabric::Receipt::kLate:
        break;
      case fabric::Receipt::kDuplicate:
        CountDrop(FabricDrop::kReplayed);
        return;
      case fabric::Receipt::kStale:
        CountDrop(FabricDrop::kStale);
        return;
    }
    ps.last_accepted = now;
    if (fresh || a.ifindex != d.ifindex) {
      a.ifindex = d.ifindex;
      a.has_carrier = HasCarrier(key, a);
    }
    if (d.urgent && !a.urgent) {  // acked in this wake-up's SendDue, within the peer's budget
      if (TakeUrgentReply(ps, now)) {
        a.urgent = true;
      } else {
        ++urgent_limited_pending_;
      }
    }
  }
  if (!p.seq) ps.last_accepted = now;  // an ack-only packet of the current epoch
  if (p.ack) {
    auto ours = ours_.find({p.sender, p.ack_rail, p.ack_path_index});
    if (ours == ours_.end()) {
      // A probe of a path we do not watch may carry an ack (the peer acks
      // what it received before we stopped); an ack alone for it is stray.
      if (!p.seq) CountDrop(FabricDrop::kUnmatched);
      return;
    }
    Apply(monitor_.OnAck(ours->second, *p.ack, d.received));
  }
}

void FabricService::Apply(const fabric::Decisions& d) {
  if (!d.empty()) changed_ = true;  // published at once (see RunOnce)
  for (const fabric::Transition& t : d.transitions) {
    const std::string rail = t.path.rail < static_cast<int>(options_.setup.rails.size())
                                 ? options_.setup.rails[t.path.rail].name
                                 : std::to_string(t.path.rail);
    log::Write(t.to == PathState::kDown ? log::Level::kWarn : log::Level::kInfo, "fabric path state changed",
               {{"path", fabric::ToString(t.path)},
                {"rail", rail},
                {"from", fabric::ToString(t.from)},
                {"to", fabric::ToString(t.to)},
                {"flap", t.flap ? "true" : "false"}});
  }
  for (const fabric::RailFlap& f : d.flaps) {
    const std::string rail = f.rail < static_cast<int>(options_.setup.rails.size()) ? options_.setup.rails[f.rail].name
                                                                                    : std::to_string(f.rail);
    flaps_total_.Inc({rail});
    last_flap_wall_ = clock_.Wall();
    log::Warn("fabric rail flapped: every path of the rail failed", {{"rail", rail}});
  }
  for (const fabric::FlapAlert& a : d.alerts) {
    const std::string rail = a.rail < static_cast<int>(options_.setup.rails.size())
                                 ? options_.setup.rails[a.rail].name
                                 : std::to_string(a.rail);
    alerts_.Inc({rail});
    {
      std::lock_guard lock(mu_);
      if (alerts_raised_.size() < 1024) {
        alerts_raised_.push_back({rail, a.flaps_in_window, options_.fabric.flap_alert_per_hour});
      }
    }
    log::Warn("fabric flap alert: a rail flaps more than flapAlertPerHour",
              {{"rail", rail},
               {"flaps_last_hour", std::to_string(a.flaps_in_window)},
               {"threshold", std::to_string(options_.fabric.flap_alert_per_hour)}});
  }
  std::set<int> left;  // rails traffic was moved off
  for (const fabric::RouteAction& a : d.actions) {
    Status s;
    std::string what;
    if (const auto* pin = std::get_if<fabric::PinPeer>(&a)) {
      auto route = PinRoute(options_.setup, pin->path);
      if (!route) continue;
      what = "pin";
      s = actuator_.Replace(*route);
      if (s.ok()) {
        log::Info("pinned a peer's traffic to a healthy rail", {{"peer", pin->peer}, {"route", route->ToString()}});
        auto [it, fresh] = installed_rail_.try_emplace(pin->peer, pin->path.rail);
        if (!fresh && it->second != pin->path.rail) left.insert(it->second);
        it->second = pin->path.rail;
      }
    } else {
      const auto& unpin = std::get<fabric::UnpinPeer>(a);
      const FabricPeer* peer = PeerByName(unpin.peer);
      if (!peer) continue;
      what = "unpin";
      s = actuator_.Delete({peer->host_address, 32});
      if (!s.ok() && s.code() == ErrorCode::kNotFound) s = Status::Ok();  // already gone: done
      if (s.ok()) {
        log::Info("unpinned a peer: its traffic is back on static ECMP", {{"peer", unpin.peer}});
        if (auto it = installed_rail_.find(unpin.peer); it != installed_rail_.end()) {
          left.insert(it->second);
          installed_rail_.erase(it);
        }
      }
    }
    route_changes_.Inc({what, s.ok() ? "ok" : "error"});
    if (!s.ok()) {
      log::Error("fabric route change failed; the reconcile retries it", {{"action", fabric::ToString(a)},
                                                                         {"error", s.error().message}});
      retry_at_ = std::min(retry_at_, clock_.Monotonic() + std::chrono::seconds(1));
    }
  }
  for (int rail : left) ReleaseNeighbours(rail, true);
}

void FabricService::ReleaseNeighbours(int rail, bool log_released) {
  if (rail < 0 || rail >= static_cast<int>(options_.setup.rails.size())) return;
  const std::string& name = options_.setup.rails[rail].name;
  auto released = actuator_.ReleaseUnresolvedNeighbours(name);
  if (!released.ok()) {
    log::Warn("cannot release unresolved neighbours of a failed rail", {{"rail", name}, {"error", released.error().message}});
  } else if (*released > 0 && log_released) {
    log::Info("released unresolved neighbours (and the packets queued on them) of a rail traffic left",
              {{"rail", name}, {"entries", std::to_string(*released)}});
  }
}

void FabricService::Reconcile(MonoTime now) {
  std::vector<PathKey> pins;
  for (const auto& [peer, path] : monitor_.Pins()) pins.push_back(path);
  auto plan = ReconcileRoutes(actuator_, PinRoutes(options_.setup, pins));
  route_changes_.Inc({"reconcile", plan.ok() ? "ok" : "error"});
  if (!plan.ok()) log::Warn("fabric route reconcile failed; retrying", {{"error", plan.error().message}});
  retry_at_ = plan.ok() ? MonoTime::max() : now + std::chrono::seconds(1);
  next_reconcile_ = now + options_.reconcile_every;
}

void FabricService::RunOnce(std::chrono::nanoseconds max_wait) {
  // One wake-up per event: the next tick (probes), probe timeouts and
  // re-admissions. Datagrams arriving in between do not wake the thread:
  // they wait in the socket with their kernel receive time, which is what
  // acks and delays are computed from.
  MonoTime now = clock_.Monotonic();
  MonoTime due = now + max_wait;
  if (auto next = monitor_.NextWakeup()) due = std::min(due, *next);
  if (AckOnlyPaths()) due = std::min(due, now + options_.fabric.probe_interval);
  inbox_.clear();
  (void)socket_.Poll(std::max<std::chrono::nanoseconds>(due - now, std::chrono::nanoseconds(0)), inbox_);
  now = clock_.Monotonic();
  // Woken (or done with the last round) much later than due: the node was
  // stalled, and silence in the stall says nothing about the paths.
  if (const fabric::Stall st = monitor_.ExcuseStall(due, now); st != fabric::Stall::kNone) {
    NoteStall(now, now - due, st);
  }
  ApplyPendingPeers(now);
  const std::optional<int64_t> fabric_now = fabric_now_ ? fabric_now_() : std::nullopt;
  // Acks first: one that arrived before its probe's timeout counts though
  // it is read after it.
  for (const FabricDatagram& d : inbox_) Handle(d, now, fabric_now);
  FlushCounts();
  Apply(monitor_.Tick(now));
  SendDue(now, fabric_now);
  if (adopted_ && (now >= next_reconcile_ || now >= retry_at_)) Reconcile(now);
  if (now >= next_sweep_) Sweep(now);
  // Periodically for the percentiles, and soon after any change of state or
  // pin so `fabric status`, the metrics and FabricHealth follow failovers.
  if (now >= next_publish_ || (changed_ && now >= last_publish_ + kChangePublishGap)) Publish(now);
}

void FabricService::NoteStall(MonoTime now, std::chrono::nanoseconds stalled, fabric::Stall verdict) {
  stalls_.Inc();
  if (verdict == fabric::Stall::kJudged) {
    stalls_judged_.Inc();
    ++judged_unlogged_;
    if (!stalled_published_) changed_ = true;  // the ProberStalled condition: published at once
  }
  worst_stall_ = std::max(worst_stall_, stalled);
  ++stalls_unlogged_;
  if (now < next_stall_log_) return;
  log::Warn(judged_unlogged_ > 0
                ? "fabric prober stalls persistently: beyond the excuse budget its stalls are judged, so paths can "
                  "be declared down by the stalls themselves (check CPU steal and load, the agent's CPU limit and "
                  "SCHED_FIFO)"
                : "fabric prober stalled: woke late, so probe timeouts in the stall were restarted (is the node "
                  "overloaded?)",
            {{"stalls", std::to_string(stalls_unlogged_)},
             {"judged", std::to_string(judged_unlogged_)},
             {"longest_ms", std::to_string(std::chrono::duration<double, std::milli>(worst_stall_).count())}});
  next_stall_log_ = now + kStallLogEvery;
  worst_stall_ = {};
  stalls_unlogged_ = 0;
  judged_unlogged_ = 0;
}

bool FabricService::AckOnlyPaths() const {
  for (const auto& [key, a] : acks_) {
    if (!a.has_carrier) return true;
  }
  return false;
}

void FabricService::Sweep(MonoTime now) {
  next_sweep_ = now + kSweepEvery;
  // A rail whose every path failed: packets that went to it before the
  // move may wait on its unresolved neighbours; free them (see Apply).
  for (const fabric::RailView& r : monitor_.Rails(now)) {
    if (r.down) ReleaseNeighbours(r.rail, false);
  }
  // Stop acknowledging peers that went quiet (peers that left: ApplyPendingPeers).
  std::erase_if(acks_, [&](const auto& entry) {
    auto last = entry.second.window.last_received();
    return !last || now - *last > options_.fabric.stats_window;
  });
}

void FabricService::Publish(MonoTime now) {
  next_publish_ = now + options_.publish_every;
  last_publish_ = now;
  changed_ = false;
  for (auto& [peer, n] : answered_pending_) {
    if (n > 0) answered_.Inc({peer}, static_cast<double>(n));
    n = 0;
  }
  const auto& rails = options_.setup.rails;
  auto rail_name = [&](int r) { return r < static_cast<int>(rails.size()) ? rails[r].name : std::to_string(r); };
  nlohmann::json paths = nlohmann::json::array();
  std::map<int, std::vector<std::string>> failed_peers;
  for (const fabric::PathView& v : monitor_.Paths(now)) {
    const std::string rail = rail_name(v.path.rail);
    if (v.state == PathState::kDown || v.state == PathState::kRecovering) {
      failed_peers[v.path.rail].push_back(v.path.peer);
    }
    for (PathState s : kStates) state_.Set({v.path.peer, rail, fabric::ToString(s)}, s == v.state ? 1 : 0);
    loss_.Set({v.path.peer, rail}, v.stats.loss);
    owd_.Set({v.path.peer, rail, "0.5"}, Seconds(v.stats.owd_p50));
    owd_.Set({v.path.peer, rail, "0.99"}, Seconds(v.stats.owd_p99));
    rtt_.Set({v.path.peer, rail, "0.5"}, Seconds(v.stats.rtt_p50));
    rtt_.Set({v.path.peer, rail, "0.99"}, Seconds(v.stats.rtt_p99));
    fabric::PathStats& last = published_totals_[v.path];
    sent_.Inc({v.path.peer, rail}, static_cast<double>(v.stats.probes_sent - last.probes_sent));
    replies_.Inc({v.path.peer, rail}, static_cast<double>(v.stats.replies - last.replies));
    misses_.Inc({v.path.peer, rail}, static_cast<double>(v.stats.misses - last.misses));
    last = v.stats;
    nlohmann::json readmit = nullptr;
    if (v.readmit_at) readmit = std::chrono::duration_cast<std::chrono::milliseconds>(*v.readmit_at - now).count();
    paths.push_back({{"peer", v.path.peer},
                     {"rail", v.path.rail},
                     {"interface", rail},
                     {"path", v.path.index},
                     {"state", fabric::ToString(v.state)},
                     {"loss", v.stats.loss},
                     {"owd_p50_ns", NsOrNull(v.stats.owd_p50)},
                     {"owd_p99_ns", NsOrNull(v.stats.owd_p99)},
                     {"rtt_p50_ns", NsOrNull(v.stats.rtt_p50)},
                     {"rtt_p99_ns", NsOrNull(v.stats.rtt_p99)},
                     {"probes_sent", v.stats.probes_sent},
                     {"replies", v.stats.replies},
                     {"misses", v.stats.misses},
                     {"hold_down_level", v.hold_down_level},
                     {"readmit_in_ms", readmit},
                     {"flaps_last_hour", v.flaps_in_window}});
  }
  nlohmann::json peers = nlohmann::json::array();
  for (const FabricPeer& p : options_.setup.peers) {
    auto pin = monitor_.Pin(p.name);
    peer_rail_.Set({p.name}, pin ? pin->rail : -1);
    nlohmann::json route = nullptr;
    if (pin) {
      if (auto r = PinRoute(options_.setup, *pin)) route = r->ToString();
    }
    peers.push_back({{"peer", p.name},
                     {"host_address", FormatIpv4(p.host_address)},
                     {"via", pin ? rail_name(pin->rail) : "ecmp"},
                     {"route", route}});
  }
  nlohmann::json rail_views = nlohmann::json::array();
  FabricHealthView health;
  for (size_t r = 0; r < rails.size(); ++r) health.rails.push_back({.name = rails[r].name});
  health.flaps_last_hour = monitor_.FlapsInWindow(now);
  health.last_flap = last_flap_wall_;
  health.peers = static_cast<int>(options_.setup.peers.size());
  const fabric::StallView stalls = monitor_.Stalls(now);
  health.prober_stalled = stalls.persistent;
  health.stalls = stalls.stalls;
  health.stalls_judged = stalls.judged;
  stalled_published_ = stalls.persistent;
  prober_stalled_.Set(stalls.persistent ? 1 : 0);
  for (const fabric::RailView& r : monitor_.Rails(now)) {
    const std::string name = rail_name(r.rail);
    if (r.rail >= 0 && r.rail < static_cast<int>(health.rails.size())) {
      FabricRailHealth& h = health.rails[r.rail];
      h.paths = r.paths;
      h.usable = r.usable;
      h.failed = r.failed;
      h.down = r.down;
      h.flaps_last_hour = r.flaps_in_window;
      h.alerting = r.alerting;
      h.failed_peers = failed_peers[r.rail];
      std::sort(h.failed_peers.begin(), h.failed_peers.end());
    }
    flaps_window_.Set({name}, r.flaps_in_window);
    rail_down_.Set({name}, r.down ? 1 : 0);
    rail_views.push_back({{"rail", r.rail},
                          {"interface", name},
                          {"gateway", r.rail < static_cast<int>(rails.size())
                                          ? FormatIpv4(rails[r.rail].gateway.gateway)
                                          : std::string()},
                          {"paths", r.paths},
                          {"usable", r.usable},
                          {"failed", r.failed},
                          {"down", r.down},
                          {"flaps_last_hour", r.flaps_in_window},
                          {"alerting", r.alerting}});
  }
  nlohmann::json last_flap = nullptr;
  if (auto lf = monitor_.LastFlap()) last_flap = std::chrono::duration<double>(now - *lf).count();
  nlohmann::json status = {{"node", options_.self_name},
                           {"host_address", FormatIpv4(options_.setup.host_address)},
                           {"failover", options_.fabric.failover_enabled},
                           {"probe_interval_ms", std::chrono::duration<double, std::milli>(
                                                     options_.fabric.probe_interval)
                                                     .count()},
                           {"miss_threshold", options_.fabric.miss_threshold},
                           {"flaps_last_hour", monitor_.FlapsInWindow(now)},
                           {"last_flap_seconds_ago", last_flap},
                           {"prober_stalls", stalls.stalls},
                           {"prober_stalls_judged", stalls.judged},
                           {"prober_stalled", stalls.persistent},
                           {"rails", rail_views},
                           {"paths", paths},
                           {"peers", peers}};
  std::lock_guard lock(mu_);
  status_ = std::move(status);
  health_ = std::move(health);
}

FabricHealthView FabricService::Health() const {
  std::lock_guard lock(mu_);
  return health_;
}

std::vector<FabricFlapAlert> FabricService::TakeFlapAlerts() {
  std::lock_guard lock(mu_);
  return std::exchange(alerts_raised_, {});
}

nlohmann::json FabricService::StatusJson() const {
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace lockstep::agent
