// PacketFilter: the receive-side gate for probe traffic. Decodes and
// authenticates a datagram (PacketCodec), then checks destination, sender,
// plausibility against the receiver's clocks and replay (a ReplayWindow per
// sender). Only authenticated packets from known senders create per-sender
// state, and that state is bounded (least recently seen senders are evicted;
// senders that leave the known set are forgotten). Counts every drop by reason.
// Pure; thread-compatible.
//
// Acceptance window (with ReceiverClocks): a packet's sequence must not exceed
// the receiver's wall clock + kMaxClockSkewNs (sequences start at the sender's
// wall clock and then grow slower than it); every timestamp it carries (probe TX
// stamps, report RX stamps, gossiped t_refs) must be within kMaxClockSkewNs of
// the receiver's node clock (0 in an RX record means "lost" and is allowed);
// gossiped fits must have |offset| <= kMaxClockSkewNs and |drift| <= kMaxDrift.
// So no accepted value can push the clock-sync arithmetic near int64 overflow,
// and a forged sequence can silence a sender for at most kMaxClockSkewNs.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "lockstep/agent/probe_packet.h"
#include "lockstep/agent/replay_window.h"

namespace lockstep::agent {

// The receiver's clocks at the time a datagram is handled.
struct ReceiverClocks {
  int64_t wall_ns = 0;   // CLOCK_REALTIME (the sequence numbers' domain)
  int64_t local_ns = 0;  // the node clock (the timestamps' domain)
};

// True if every timestamp and fit in `p` is within the acceptance window
// around `local_ns` (see above).
bool TimesPlausible(const Packet& p, int64_t local_ns);

class PacketFilter {
 public:
  PacketFilter(const PacketCodec& codec, NodeId self, size_t max_senders = 4096)
      : codec_(codec), self_(self), max_senders_(max_senders) {}

  // Senders outside this set are dropped as kUnknownSender (an empty set drops
  // everyone); state of senders no longer in it is forgotten. Until the first
  // call any authenticated sender is accepted (tests, the fuzzer).
  void SetKnownSenders(std::unordered_set<NodeId> known);

  // Without `now` the plausibility checks are skipped (tests, the fuzzer).
  std::variant<Packet, DropReason> Accept(std::span<const uint8_t> bytes,
                                          std::optional<ReceiverClocks> now = std::nullopt);

  uint64_t dropped(DropReason r) const { return dropped_[static_cast<size_t>(r)]; }
  uint64_t accepted() const { return accepted_; }
  size_t tracked_senders() const { return senders_.size(); }

 private:
  struct SenderState {
    ReplayWindow window;
    uint64_t last_used = 0;
  };
  void Evict();

  const PacketCodec& codec_;
  NodeId self_;
  size_t max_senders_;
  std::optional<std::unordered_set<NodeId>> known_;
  std::unordered_map<NodeId, SenderState> senders_;
  uint64_t tick_ = 0;
  uint64_t accepted_ = 0;
  std::array<uint64_t, kNumDropReasons> dropped_{};
};

}  // namespace lockstep::agent
