#include "lockstep/agent/ack_book.h"

#include <algorithm>
#include <set>

namespace lockstep::agent {

AckBook::AckBook(AckBookOptions options) : options_(std::move(options)) {}

void AckBook::SetKnown(const std::vector<uint32_t>& ids) {
  std::map<uint32_t, Peer> kept;
  for (size_t i = 0; i < known_.size(); ++i) kept.emplace(known_[i], peers_[i]);
  known_ = ids;
  peers_.assign(known_.size(), Peer{});
  for (size_t i = 0; i < known_.size(); ++i) {
    if (auto it = kept.find(known_[i]); it != kept.end()) peers_[i] = it->second;
  }
  const std::set<uint32_t> known(known_.begin(), known_.end());
  std::erase_if(entries_, [&](const auto& entry) { return !known.contains(entry.first.node); });
}

int AckBook::PeerIndex(uint32_t node) const {
  for (size_t i = 0; i < known_.size(); ++i) {
    if (known_[i] == node) return static_cast<int>(i);
  }
  return -1;
}

void AckBook::SetOurPaths(std::map<WirePath, fabric::PathId> ours) {
  ours_ = std::move(ours);
  for (auto& [key, e] : entries_) e.has_carrier = HasCarrier(key, e.ifindex);
}

std::optional<fabric::PathId> AckBook::OurPath(const WirePath& path) const {
  auto it = ours_.find(path);
  if (it == ours_.end()) return std::nullopt;
  return it->second;
}

AckBook::Entries::iterator AckBook::AtOrAfter(const WirePath& key) {
  return std::lower_bound(entries_.begin(), entries_.end(), key,
                          [](const auto& entry, const WirePath& k) { return entry.first < k; });
}

// A probe of ours leaves through the interface the peer path's probes
// arrive on: kept in Entry::has_carrier, set when its interface changes and
// when our paths change, read on every wake-up.
bool AckBook::HasCarrier(const WirePath& key, int ifindex) const {
  const auto& rails = options_.rail_ifindex;
  for (size_t r = 0; r < rails.size(); ++r) {
    if (rails[r] == ifindex && ours_.contains({key.node, static_cast<int>(r), key.index})) return true;
  }
  return false;
}

bool AckBook::TakeUrgentReply(Peer& peer, MonoTime now) {
  // Twice what the peer's paths can ask for: after a miss each path sends
  // at most missThreshold - 1 urgent probes, one per urgent timeout, and the
  // next miss comes a probe interval later.
  const double per_interval = 2.0 * std::max(1, options_.miss_threshold - 1) *
                              std::max<double>(1.0, static_cast<double>(options_.rail_ifindex.size()));
  if (peer.urgent_refilled == MonoTime{}) {
    peer.urgent_tokens = per_interval;
  } else if (now > peer.urgent_refilled) {
    peer.urgent_tokens =
        std::min(per_interval, peer.urgent_tokens + per_interval * (now - peer.urgent_refilled).count() /
                                                        static_cast<double>(options_.probe_interval.count()));
  }
  peer.urgent_refilled = std::max(peer.urgent_refilled, now);
  if (peer.urgent_tokens < 1.0) return false;
  peer.urgent_tokens -= 1.0;
  return true;
}

AckBook::Verdict AckBook::OnPacket(const Packet& p, MonoTime now) {
  Verdict v;
  Peer& peer = peers_[static_cast<size_t>(PeerIndex(p.sender))];
  // Freshness first (fabric_probe.h, "Replays"): nothing of a stale or
  // replayed packet is used, its ack included.
  if (p.epoch < peer.epoch && now - peer.last_accepted <= options_.stats_window) {
    v.drop = FabricDrop::kStale;  // a previous boot of the peer
    return v;
  }
  if (p.epoch != peer.epoch) {
    // Newer: signed evidence that the peer restarted, its seqs begin again.
    // Older after a stats window of silence from the peer: a restart whose
    // wall clock is behind its previous start (fabric_probe.h).
    if (peer.epoch != 0) {
      std::erase_if(entries_, [&](const auto& entry) { return entry.first.node == p.sender; });
      v.restarted = true;
      v.older_epoch = p.epoch < peer.epoch;
    }
    peer.epoch = p.epoch;
  }
  if (!p.seq) {
    peer.last_accepted = now;  // an ack-only packet of the current epoch
    return v;
  }
  const WirePath key{p.sender, p.rail, p.index};
  auto it = AtOrAfter(key);
  const bool fresh = it == entries_.end() || it->first != key;
  if (fresh) it = entries_.insert(it, {key, Entry{}});
  Entry& e = it->second;
  switch (e.window.OnReceive(*p.seq, p.received, p.one_way_delay)) {
    case fabric::Receipt::kNew:
    case fabric::Receipt::kLate:
      break;
    case fabric::Receipt::kDuplicate:
      v.drop = FabricDrop::kReplayed;
      return v;
    case fabric::Receipt::kStale:
      v.drop = FabricDrop::kStale;
      return v;
  }
  peer.last_accepted = now;
  if (fresh || e.ifindex != p.ifindex) {
    e.ifindex = p.ifindex;
    e.has_carrier = HasCarrier(key, e.ifindex);
  }
  // A fast probe is acked within a fast gap; an idle one may wait for our
  // idle tick (AckOnlyWake). An urgent one wakes us anyway.
  if (!p.slow && !p.urgent) e.fast_until = std::max(e.fast_until, p.received + fabric::kFastTickHold);
  if (p.urgent && !e.urgent) {  // acked by the next batch, within the peer's budget
    if (TakeUrgentReply(peer, now)) {
      e.urgent = true;
    } else {
      v.urgent_limited = true;
    }
  }
  return v;
}

void AckBook::BeginBatch() {
  for (auto& [key, e] : entries_) e.carried = false;
}

std::optional<AckBook::Carried> AckBook::Carry(uint32_t dest, int ifindex, int index, MonoTime now) {
  // A scan of this peer's paths (adjacent: a handful).
  std::pair<WirePath, Entry>* pick = nullptr;
  for (auto it = AtOrAfter({dest, 0, 0}); it != entries_.end() && it->first.node == dest; ++it) {
    const auto& [k, e] = *it;
    if (e.carried || e.ifindex != ifindex) continue;
    if (!pick || (k.index == index && pick->first.index != index)) pick = &*it;
  }
  if (!pick) return std::nullopt;
  Entry& e = pick->second;
  e.window.MarkAcked();
  e.carried = true;
  return Carried{.ack = e.window.Ack(now), .rail = pick->first.rail, .index = pick->first.index};
}

void AckBook::TakeAckOnly(bool tick, MonoTime now, std::vector<AckOnly>& out) {
  for (auto& [key, e] : entries_) {
    const bool is_urgent = std::exchange(e.urgent, false);
    if (!is_urgent && (!e.window.pending() || e.carried || (!tick && e.has_carrier))) continue;
    const int peer = PeerIndex(key.node);
    if (peer < 0) continue;
    e.window.MarkAcked();
    out.push_back({.peer = peer, .path = key, .ifindex = e.ifindex, .urgent = is_urgent, .ack = e.window.Ack(now)});
  }
}

bool AckBook::AckOnlyDue() const {
  for (const auto& [key, e] : entries_) {
    if (e.urgent || (e.window.pending() && !e.has_carrier)) return true;
  }
  return false;
}

std::optional<Nanos> AckBook::AckOnlyWake(MonoTime now) const {
  std::optional<Nanos> wake;
  for (const auto& [key, e] : entries_) {
    if (e.has_carrier) continue;
    const bool fast = now < e.fast_until || options_.idle_wake <= Nanos(0);
    const Nanos need = fast ? options_.probe_interval : options_.idle_wake;
    if (!wake || need < *wake) wake = need;
  }
  return wake;
}

void AckBook::DropQuiet(MonoTime now) {
  std::erase_if(entries_, [&](const auto& entry) {
    auto last = entry.second.window.last_received();
    return !last || now - *last > options_.stats_window;
  });
}

}  // namespace lockstep::agent
