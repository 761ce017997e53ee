#include "lockstep/agent/packet_filter.h"

namespace lockstep::agent {

std::variant<Packet, DropReason> PacketFilter::Accept(std::span<const uint8_t> bytes) {
  auto decoded = codec_.Decode(bytes);
  DropReason reason{};
  if (auto* r = std::get_if<DropReason>(&decoded)) {
    reason = *r;
  } else {
    const Packet& p = std::get<Packet>(decoded);
    if (p.dest != self_) {
      reason = DropReason::kMisdirected;
    } else if (!known_.empty() && !known_.contains(p.sender)) {
      reason = DropReason::kUnknownSender;
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
