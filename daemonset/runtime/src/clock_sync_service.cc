#include "lockstep/agent/runtime/clock_sync_service.h"

#include <algorithm>
#include <iterator>
#include <unordered_set>

namespace lockstep::agent {
namespace {

constexpr size_t kMaxTxRefs = 8192;
constexpr size_t kMaxVerified = 8192;
constexpr size_t kMaxUnfed = 65536;

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

ClockSyncService::ClockSyncService(ProbeTransport& transport, const NodeClock& node_clock, const Clock& clock,
                                   const PacketCodec& codec, ClockSyncOptions options, metrics::Registry& registry)
    : transport_(transport),
      node_clock_(node_clock),
      clock_(clock),
      codec_(codec),
      options_(std::move(options)),
      self_(NodeIdFromName(options_.self_name)),
      filter_(codec_, self_),
      joiner_(self_),
      packet_seq_(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(clock.Wall().time_since_epoch()).count())),
      rng_state_(options_.seed),
      model_(self_, ClockModelOptions{.window_ns = options_.window.count(),
                                      .lock_threshold_ns = static_cast<double>(options_.max_error_bound_ns),
                                      .asymmetry_allowance_ns = static_cast<double>(options_.asymmetry_allowance_ns),
                                      .signer = options_.signer}),
      sent_(registry.Counter("lockstep_probe_sent_total", "Probe packets sent, by type", {"type"})),
      received_(registry.Counter("lockstep_probe_received_total", "Authenticated probe packets accepted, by type",
                                 {"type"})),
      dropped_(registry.Counter("lockstep_probe_dropped_total",
                                "Received probe datagrams dropped (never trusted), by reason", {"reason"})),
      send_errors_(registry.Counter("lockstep_probe_send_errors_total", "Probe sends that failed")),
      unstamped_(registry.Counter("lockstep_probe_rx_unstamped_total",
                                  "Probes received without a kernel timestamp (not used for clock sync)")),
      pairs_(registry.Counter("lockstep_probe_pairs_total", "Complete coded pairs joined, by direction",
                              {"direction"})),
      offset_(registry.Gauge("lockstep_clock_offset_ns", "Local clock minus fabric time (ns)")),
      drift_(registry.Gauge("lockstep_clock_drift_ppb", "Drift of the local clock against fabric time (ppb)")),
      error_bound_(registry.Gauge("lockstep_clock_error_bound_ns", "Error bound of fabric time (ns)")),
      state_(registry.Gauge("lockstep_clock_state", "Clock sync state (1 for the current state)", {"state"})),
      peers_(registry.Gauge("lockstep_clock_peers", "Own edges fitted in the last window")),
      pure_fraction_(registry.Gauge("lockstep_clock_pure_probe_fraction", "Pure coded pairs / all pairs, last window")),
      graph_nodes_(registry.Gauge("lockstep_clock_graph_nodes", "Nodes in our connected probe graph")),
      windows_total_(registry.Counter("lockstep_clock_windows_total", "Clock sync windows closed")) {
  for (int r = 0; r < kNumDropReasons; ++r) dropped_.Inc({DropReasonName(static_cast<DropReason>(r))}, 0);
  for (const char* s : {"FREERUN", "LOCKED", "HOLDOVER"}) state_.Set({s}, s == std::string("FREERUN") ? 1 : 0);
  // Pair sequences, like packet sequences, start at the wall clock so that a
  // restarted agent's pairs are newer than anything its peers still hold.
  pair_seq_ = packet_seq_;
  published_ = model_.discipline();
  MonoTime now = clock_.Monotonic();
  next_window_ = now + options_.window;
  ApplyPeers(options_.selected, options_.known, now);
}

void ClockSyncService::SetPeers(std::vector<PeerTarget> selected, std::vector<PeerTarget> known) {
  std::lock_guard lock(peers_mu_);
  pending_peers_ = PeerUpdate{std::move(selected), std::move(known)};
}

void ClockSyncService::SetKnown(const std::vector<PeerTarget>& selected, const std::vector<PeerTarget>& known) {
  known_.clear();
  public_keys_.clear();
  std::unordered_set<NodeId> ids;
  for (const auto* list : {&known, &selected}) {
    for (const PeerTarget& p : *list) {
      known_[p.id] = p;
      ids.insert(p.id);
      if (p.public_key.empty()) continue;
      if (auto k = NodePublicKey::FromBase64(p.public_key); k.ok()) public_keys_.insert_or_assign(p.id, *k);
    }
  }
  // Only known nodes are heard, probed back or kept state for.
  joiner_.RetainOnly(ids);
  filter_.SetKnownSenders(std::move(ids));
}

void ClockSyncService::ApplyPeers(std::vector<PeerTarget> selected, std::vector<PeerTarget> known, MonoTime now) {
  SetKnown(selected, known);
  std::unordered_map<NodeId, const PeerTarget*> wanted;
  for (const PeerTarget& p : selected) {
    if (p.id != self_) wanted[p.id] = &p;
  }
  for (auto it = targets_.begin(); it != targets_.end();) {
    auto k = known_.find(it->first);
    if (k == known_.end() || k->second.endpoint.port == 0) {
      it = targets_.erase(it);  // no longer known, or no published endpoint
      continue;
    }
    auto& [id, t] = *it++;
    t.selected = wanted.contains(id);
    if (k->second.endpoint == t.peer.endpoint) continue;
    // The peer moved (a restarted agent): its pair state is meaningless now.
    joiner_.Forget(id);
    t.peer.endpoint = k->second.endpoint;
  }
  for (const auto& [id, p] : wanted) {
    auto [it, fresh] = targets_.try_emplace(id);
    if (fresh) it->second = Target{*p, Phase(now), now, true, 0};
  }
  PublishTargetNames();
}

void ClockSyncService::PublishTargetNames() {
  std::vector<std::string> names;
  for (const auto& [id, t] : targets_) names.push_back(t.peer.name);
  std::sort(names.begin(), names.end());
  std::lock_guard lock(names_mu_);
  target_names_ = std::move(names);
}

MonoTime ClockSyncService::Phase(MonoTime now) {
  auto interval = std::max<int64_t>(options_.interval.count(), 1);
  return now + std::chrono::nanoseconds(static_cast<int64_t>(SplitMix(rng_state_) % static_cast<uint64_t>(interval)));
}

void ClockSyncService::RunOnce(std::chrono::nanoseconds max_wait) {
  Exchange(std::min(next_window_, clock_.Monotonic() + max_wait));
  CloseWindowIfDue();
}

void ClockSyncService::Exchange() { Exchange(clock_.Monotonic()); }

void ClockSyncService::Exchange(MonoTime until) {
  MonoTime now = clock_.Monotonic();
  std::optional<PeerUpdate> update;
  {
    std::lock_guard lock(peers_mu_);
    update.swap(pending_peers_);
  }
  if (update) ApplyPeers(std::move(update->selected), std::move(update->known), now);
  SendDue(now);
  MonoTime deadline = until;
  for (const auto& [id, t] : targets_) deadline = std::min(deadline, t.next_send);
  events_.clear();
  // Sleep until the next send or window, then read what arrived meanwhile:
  // every datagram and TX stamp carries its kernel time, so reading them in
  // one batch per wake-up changes no measurement (one wake-up per send
  // instead of one per datagram and per TX stamp as well).
  if (lockstep::Status s = transport_.Collect(std::max(deadline - now, std::chrono::nanoseconds(0)), events_);
      !s.ok()) {
    send_errors_.Inc();
  }
  Handle(events_, clock_.Monotonic());
}

void ClockSyncService::CloseWindowIfDue() {
  MonoTime now = clock_.Monotonic();
  if (now < next_window_) return;
  CloseWindow();
  while (next_window_ <= now) next_window_ += options_.window;
}

void ClockSyncService::SendDue(MonoTime now) {
  bool changed = false;
  for (auto it = targets_.begin(); it != targets_.end();) {
    Target& t = it->second;
    if (!t.selected && now - t.last_heard > options_.responder_timeout) {
      joiner_.Forget(t.peer.id);
      it = targets_.erase(it);
      changed = true;
      continue;
    }
    if (now >= t.next_send) {
      SendTo(t);
      t.next_send += options_.interval;
      if (t.next_send <= now) t.next_send = now + options_.interval;  // we fell behind: do not burst
    }
    ++it;
  }
  if (changed) PublishTargetNames();
}

void ClockSyncService::SendTo(Target& t) {
  const uint64_t pair_seq = ++pair_seq_;
  ProbeBody body;
  body.pair_seq = pair_seq;
  body.spacing_ns = static_cast<uint32_t>(options_.spacing.count());
  body.tx_app_ns = node_clock_.NowNs();
  if (auto prev = joiner_.TakePrevTx(t.peer.id)) {
    body.prev_valid = true;
    body.prev_pair_seq = prev->pair_seq;
    body.prev_tx_ns = prev->tx_ns;
  }
  Packet a{self_, t.peer.id, packet_seq_++, body};
  body.index = 1;
  body.tx_app_ns += options_.spacing.count();
  Packet b{self_, t.peer.id, packet_seq_++, body};
  auto ea = codec_.Encode(a), eb = codec_.Encode(b);
  if (!ea.ok() || !eb.ok()) return;  // cannot happen: fields are in range
  auto ids = transport_.SendPair(t.peer.endpoint, *ea, *eb, options_.spacing);
  if (!ids.ok()) {
    send_errors_.Inc();
    return;
  }
  sent_.Inc({"probe"}, 2);
  for (int i = 0; i < 2; ++i) {
    tx_refs_[(*ids)[i]] = TxRef{t.peer.id, pair_seq, i};
    tx_order_.push_back((*ids)[i]);
  }
  while (tx_order_.size() > kMaxTxRefs) {
    tx_refs_.erase(tx_order_.front());
    tx_order_.pop_front();
  }
  // The report: RX stamps we owe this peer, and a slice of the gossip.
  ReportBody report;
  report.rx = joiner_.TakeRxRecords(t.peer.id, kMaxRxRecords);
  if (t.reports % static_cast<uint64_t>(std::max(options_.gossip_every, 1)) != 0) {
    ++t.reports;
  } else if (std::unique_lock lock(mu_, std::try_to_lock); lock.owns_lock()) {
    ++t.reports;  // a busy model (a solve) keeps the turn for the next report
    report.edges = model_.EdgesToGossip(kMaxEdgeRecords);
    report.models = model_.ModelsToGossip(kMaxModelRecords);
  }
  if (report.rx.empty() && report.edges.empty() && report.models.empty()) return;
  auto er = codec_.Encode(Packet{self_, t.peer.id, packet_seq_++, std::move(report)});
  if (!er.ok()) return;
  if (transport_.Send(t.peer.endpoint, *er).ok()) {
    sent_.Inc({"report"});
  } else {
    send_errors_.Inc();
  }
}

void ClockSyncService::Handle(const TransportEvents& ev, MonoTime now) {
  for (const TxCompletion& tx : ev.tx_stamps) {
    auto it = tx_refs_.find(tx.tx_id);
    if (it == tx_refs_.end()) continue;  // a report, or too old
    joiner_.OnLocalTx(it->second.peer, it->second.pair_seq, it->second.index, tx.tx_ns);
    tx_refs_.erase(it);
  }
  bool targets_changed = false;
  const ReceiverClocks clocks{
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.Wall().time_since_epoch()).count(),
      node_clock_.NowNs()};
  for (const ReceivedDatagram& d : ev.received) {
    auto accepted = filter_.Accept(d.bytes, clocks);
    if (auto* reason = std::get_if<DropReason>(&accepted)) {
      dropped_.Inc({DropReasonName(*reason)});
      continue;
    }
    Packet& p = std::get<Packet>(accepted);
    // Every known node that probes us is probed back, so each edge has both
    // directions; always at the endpoint discovery published, never at the
    // datagram's source address (which a key holder can forge). The filter
    // admits only known senders.
    auto k = known_.find(p.sender);
    if (k != known_.end() && k->second.endpoint.port != 0) {
      auto [it, fresh] = targets_.try_emplace(p.sender);
      if (fresh) {
        it->second.peer = k->second;
        it->second.next_send = Phase(now);
        targets_changed = true;
      }
      it->second.last_heard = now;
    }
    if (const auto* probe = std::get_if<ProbeBody>(&p.body)) {
      received_.Inc({"probe"});
      // A user-space stamp is a different (worse) measurement: keep it out of
      // the model. Linux enables RX stamping lazily, so the first packets
      // after start can miss one.
      if (d.kernel_stamp) {
        joiner_.OnProbe(p.sender, *probe, d.rx_ns);
      } else {
        unstamped_.Inc();
      }
    } else {
      auto& report = std::get<ReportBody>(p.body);
      received_.Inc({"report"});
      joiner_.OnReport(p.sender, report);
      DropUnknownNodes(report);
      DropUnsigned(report);
      std::move(report.edges.begin(), report.edges.end(), std::back_inserter(unfed_.edges));
      std::move(report.models.begin(), report.models.end(), std::back_inserter(unfed_.models));
    }
  }
  std::vector<CodedPair> ready = joiner_.TakeReady();
  for (const CodedPair& pair : ready) pairs_.Inc({pair.src == self_ ? "outbound" : "inbound"});
  complete_pairs_ += ready.size();
  unfed_.pairs.insert(unfed_.pairs.end(), ready.begin(), ready.end());
  FeedModel();
  if (targets_changed) PublishTargetNames();
}

void ClockSyncService::FeedModel() {
  if (unfed_.empty()) return;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    // A solve runs (or a status read): keep them for the next call, within
    // bounds (a solve lasting many windows would be the bug to look at).
    auto trim = [](auto& v) {
      if (v.size() > kMaxUnfed) v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() - kMaxUnfed));
    };
    trim(unfed_.pairs);
    trim(unfed_.edges);
    trim(unfed_.models);
    return;
  }
  for (const EdgeRecord& e : unfed_.edges) model_.AddRemoteEdge(e);
  for (const ModelRecord& m : unfed_.models) model_.AddRemoteModel(m);
  for (const CodedPair& pair : unfed_.pairs) model_.AddPair(pair);
  unfed_.pairs.clear();
  unfed_.edges.clear();
  unfed_.models.clear();
}

bool ClockSyncService::Knows(NodeId id) const { return id == self_ || known_.contains(id); }

void ClockSyncService::DropUnknownNodes(ReportBody& report) {
  // Gossip about nodes we do not know would grow our tables (and the solve)
  // without bound: a key holder could invent any number of node ids.
  auto drop = [&](auto& records, auto unknown) {
    auto end = std::remove_if(records.begin(), records.end(), unknown);
    auto n = static_cast<uint64_t>(records.end() - end);
    if (n > 0) dropped_.Inc({DropReasonName(DropReason::kUnknownNode)}, static_cast<double>(n));
    records.erase(end, records.end());
  };
  drop(report.edges, [&](const EdgeRecord& e) { return !Knows(e.a) || !Knows(e.b); });
  drop(report.models, [&](const ModelRecord& m) { return !Knows(m.node); });
}

std::optional<DropReason> ClockSyncService::CheckSignature(NodeId signer, const std::vector<uint8_t>& bytes,
                                                          const Signature& sig) {
  if (signer == self_) return std::nullopt;  // our own, relayed back (the model ignores it)
  auto key = public_keys_.find(signer);
  if (key == public_keys_.end()) return DropReason::kUnknownSigner;
  std::string id(bytes.begin(), bytes.end());
  id.append(sig.begin(), sig.end());
  if (verified_.contains(id)) return std::nullopt;
  if (!key->second.Verify(bytes, sig)) return DropReason::kBadSignature;
  verified_.insert(id);
  verified_order_.push_back(std::move(id));
  while (verified_order_.size() > kMaxVerified) {
    verified_.erase(verified_order_.front());
    verified_order_.pop_front();
  }
  return std::nullopt;
}

void ClockSyncService::DropUnsigned(ReportBody& report) {
  if (public_keys_.empty()) return;  // no keys configured at all: unverified (see ClockSyncOptions::signer)
  auto drop = [&](auto& records, auto check) {
    auto end = std::remove_if(records.begin(), records.end(), [&](const auto& r) {
      std::optional<DropReason> why = check(r);
      if (why) dropped_.Inc({DropReasonName(*why)});
      return why.has_value();
    });
    records.erase(end, records.end());
  };
  drop(report.edges, [&](const EdgeRecord& e) { return CheckSignature(e.signer(), SigningBytes(e), e.sig); });
  drop(report.models, [&](const ModelRecord& m) { return CheckSignature(m.node, SigningBytes(m), m.sig); });
}

void ClockSyncService::CloseWindow() {
  ClockEstimate est;
  TimeReading reading;
  {
    std::lock_guard lock(mu_);
    est = model_.CloseWindow(node_clock_.NowNs());
    ++windows_;
    reading = model_.Read(node_clock_.NowNs());
    std::lock_guard read_lock(read_mu_);
    published_ = model_.discipline();
  }
  windows_total_.Inc();
  RefreshGauges();
  peers_.Set(est.peers);
  pure_fraction_.Set(est.pure_fraction);
  graph_nodes_.Set(est.graph_nodes);
  if (on_window_) on_window_(est, reading);
}

void ClockSyncService::RefreshGauges() const {
  TimeReading reading;
  double drift = 0;
  {
    std::lock_guard lock(mu_);
    reading = model_.Read(node_clock_.NowNs());
    drift = model_.model().valid ? model_.model().drift * 1e9 : 0.0;
  }
  offset_.Set(reading.offset_ns);
  drift_.Set(drift);
  error_bound_.Set(static_cast<double>(reading.error_bound_ns));
  for (auto s : {ClockSyncState::kFreerun, ClockSyncState::kLocked, ClockSyncState::kHoldover}) {
    state_.Set({ClockSyncStateName(s)}, s == reading.state ? 1 : 0);
  }
}

TimeReading ClockSyncService::Read() const {
  clocksync::ClockDiscipline discipline;
  {
    std::lock_guard lock(read_mu_);
    discipline = published_;
  }
  return ReadDiscipline(discipline, node_clock_.NowNs());
}

ClockStatus ClockSyncService::Status(std::optional<int64_t> local_ns) const {
  std::lock_guard lock(mu_);
  ClockStatus s;
  s.reading = model_.Read(local_ns ? *local_ns : node_clock_.NowNs());
  s.estimate = model_.last();
  s.model = model_.model();
  {
    std::lock_guard names(names_mu_);
    s.peers = target_names_;
  }
  s.windows = windows_;
  if (s.model.valid) s.since_model_ns = s.reading.now_ns - s.model.t_ref_ns;
  return s;
}

}  // namespace lockstep::agent
