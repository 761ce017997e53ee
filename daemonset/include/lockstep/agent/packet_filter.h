// PacketFilter: the receive-side gate for probe traffic. Decodes and
// authenticates a datagram (PacketCodec), then checks destination, sender and
// replay (a ReplayWindow per sender). Only authenticated packets create
// per-sender state, and that state is bounded (least recently seen senders are
// evicted). Counts every drop by reason. Pure; thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "lockstep/agent/probe_packet.h"
#include "lockstep/agent/replay_window.h"

namespace lockstep::agent {

class PacketFilter {
 public:
  PacketFilter(const PacketCodec& codec, NodeId self, size_t max_senders = 4096)
      : codec_(codec), self_(self), max_senders_(max_senders) {}

  // Senders outside this set are dropped as kUnknownSender. An empty set (the
  // default) accepts any authenticated sender.
  void SetKnownSenders(std::unordered_set<NodeId> known) { known_ = std::move(known); }

  std::variant<Packet, DropReason> Accept(std::span<const uint8_t> bytes);

  uint64_t dropped(DropReason r) const { return dropped_[static_cast<size_t>(r)]; }
  uint64_t accepted() const { return accepted_; }

 private:
  struct SenderState {
    ReplayWindow window;
    uint64_t last_used = 0;
  };
  void Evict();

  const PacketCodec& codec_;
  NodeId self_;
  size_t max_senders_;
  std::unordered_set<NodeId> known_;
  std::unordered_map<NodeId, SenderState> senders_;
  uint64_t tick_ = 0;
  uint64_t accepted_ = 0;
  std::array<uint64_t, kNumDropReasons> dropped_{};
};

}  // namespace lockstep::agent
