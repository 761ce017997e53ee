#include "lockstep/agent/packet_filter.h"

#include <algorithm>
#include <cmath>

namespace lockstep::agent {
namespace {

// |t - now| <= kMaxClockSkewNs without overflowing for any int64 t.
bool Near(int64_t t, int64_t now) {
  int64_t d = 0;
  if (__builtin_sub_overflow(t, now, &d)) return false;
  return d <= kMaxClockSkewNs && d >= -kMaxClockSkewNs;
}

bool FitPlausible(double offset_ns, double drift) {
  return std::fabs(offset_ns) <= static_cast<double>(kMaxClockSkewNs) && std::fabs(drift) <= kMaxDrift;
}

}  // namespace

bool TimesPlausible(const Packet& p, int64_t local_ns) {
  if (const auto* probe = std::get_if<ProbeBody>(&p.body)) {
    if (!Near(probe->tx_app_ns, local_ns)) return false;
    return !probe->prev_valid || (Near(probe->prev_tx_ns[0], local_ns) && Near(probe->prev_tx_ns[1], local_ns));
  }
  const auto& report = std::get<ReportBody>(p.body);
  for (const RxRecord& r : report.rx) {
    for (int64_t t : r.rx_ns) {
      if (t != 0 && !Near(t, local_ns)) return false;
    }
  }
  for (const EdgeRecord& e : report.edges) {
    if (!Near(e.t_ref_ns, local_ns) || !FitPlausible(e.offset_ns, e.drift)) return false;
  }
  for (const ModelRecord& m : report.models) {
    if (!Near(m.t_ref_ns, local_ns) || !FitPlausible(m.offset_ns, m.drift) ||
        !(m.error_bound_ns <= static_cast<float>(kMaxClockSkewNs))) {
      return false;
    }
  }
  return true;
}

void PacketFilter::SetKnownSenders(std::unordered_set<NodeId> known) {
  known_ = std::move(known);
  for (auto it = senders_.begin(); it != senders_.end();) {
    it = known_->contains(it->first) ? std::next(it) : senders_.erase(it);
  }
}

std::variant<Packet, DropReason> PacketFilter::Accept(std::span<const uint8_t> bytes,
                                                      std::optional<ReceiverClocks> now) {
  auto decoded = codec_.Decode(bytes);
  DropReason reason{};
  if (auto* r = std::get_if<DropReason>(&decoded)) {
    reason = *r;
  } else {
    const Packet& p = std::get<Packet>(decoded);
    if (p.dest != self_) {
      reason = DropReason::kMisdirected;
    } else if (known_ && !known_->contains(p.sender)) {
      reason = DropReason::kUnknownSender;
    } else if (now && p.seq > static_cast<uint64_t>(std::max<int64_t>(now->wall_ns, 0)) + kMaxClockSkewNs) {
      reason = DropReason::kSeqAhead;
    } else if (now && !TimesPlausible(p, now->local_ns)) {
      reason = DropReason::kImplausibleTime;
    } else {
      auto it = senders_.find(p.sender);
      if (it == senders_.end()) {
        if (senders_.size() >= max_senders_) Evict();
        it = senders_.emplace(p.sender, SenderState{}).first;
      }
      it->second.last_used = ++tick_;
      if (it->second.window.Accept(p.seq)) {
        ++accepted_;
        return decoded;
      }
      reason = DropReason::kReplayed;
    }
  }
  ++dropped_[static_cast<size_t>(reason)];
  return reason;
}

void PacketFilter::Evict() {
  auto oldest = senders_.begin();
  for (auto it = senders_.begin(); it != senders_.end(); ++it) {
    if (it->second.last_used < oldest->second.last_used) oldest = it;
  }
  if (oldest != senders_.end()) senders_.erase(oldest);
}

}  // namespace lockstep::agent
