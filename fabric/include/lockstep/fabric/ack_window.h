// Symmetric probing (NTP symmetric mode, with QUIC/RTP-style ack ranges):
// each end of a path sends one packet per interval, and each packet carries
// both the sender's own probe (its per-path seq) and an acknowledgement of
// what it has received of the other end's probes on the same path: the
// latest seq, a 32-bit bitmap of the 32 seqs before it, that seq's one-way
// delay (measured at receipt from fabric time) and how long the ack was
// held before it left. There are no separate replies.
//
// AckWindow is the receiving side of one path (peer x the peer's rail and
// path index): what to acknowledge. Acked() is the sending side: which of
// our seqs an acknowledgement covers. Seqs are 32-bit and wrap; comparisons
// are modulo 2^32. Pure; thread-compatible.
//
// Freshness: a seq is taken once. A repeat, or one from before the window
// (more than kAckBitmapBits behind the latest), is refused and changes
// nothing: a replayed probe must not move what we acknowledge (an ack that
// no longer covers the sender's recent probes would take its path down).
// Nothing here infers that the peer restarted: the caller learns that from
// authenticated evidence (the agent's per-boot epoch, fabric_probe.h) and
// calls Reset().
#pragma once

#include <cstdint>
#include <optional>

#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

// Seqs the bitmap covers behind the latest one.
inline constexpr uint32_t kAckBitmapBits = 32;

// Seqs up to this far ahead of the latest move the window; further ahead is
// taken for a replay from long ago (the comparison is modulo 2^32). Between
// two probes of a live window far fewer are lost (its state is dropped
// after seconds of silence); senders take a new epoch long before a path's
// seqs could wrap into this range.
inline constexpr uint32_t kMaxSeqAdvance = uint32_t{1} << 24;

// What OnReceive made of a seq.
enum class Receipt {
  kNew,        // the latest now (or the first)
  kLate,       // within the window, not seen before (reordered): acked in the bitmap
  kDuplicate,  // seen already: a replay (or a network duplicate); nothing changed
  kStale,      // before the window, or implausibly far ahead: a replay; nothing changed
};
const char* ToString(Receipt r);

// An acknowledgement as carried by a probe.
struct AckField {
  uint32_t seq = 0;     // the latest seq received
  uint32_t bitmap = 0;  // bit i: seq - 1 - i was received too
  std::optional<Nanos> one_way_delay;  // of `seq` (both clocks LOCKED)
  // From receiving `seq` to sending this ack: the peer's part of the round
  // trip, subtracted from it (PathHealth::OnAck). Up to a whole idle tick
  // (options.h) when the peer acks at its idle tick. nullopt: not known
  // (beyond what the wire carries): the ack delivers, without a round trip.
  std::optional<Nanos> held = Nanos(0);
  bool operator==(const AckField&) const = default;
};

class AckWindow {
 public:
  // A probe with `seq` arrived at `received` (kernel receive time). A seq
  // newer than the latest (by less than kMaxSeqAdvance) moves the window;
  // an older one within the bitmap not seen yet sets its bit; anything else
  // is refused (kDuplicate, kStale) and changes nothing, not even pending().
  // The first seq after construction or Reset() starts the window.
  Receipt OnReceive(uint32_t seq, Time received, std::optional<Nanos> one_way_delay);

  // Forgets the window (the peer restarted: its seqs begin again).
  void Reset() { *this = AckWindow(); }

  // The acknowledgement to send at `now`; nullopt before the first probe.
  // REQUIRES: now >= the latest receive time (held is clamped at 0).
  std::optional<AckField> Ack(Time now) const;

  // Something arrived since the last MarkAcked (an ack-only packet is due
  // when no probe of ours carries it).
  bool pending() const { return pending_; }
  void MarkAcked() { pending_ = false; }
  std::optional<Time> last_received() const { return latest_ ? std::optional<Time>(received_) : std::nullopt; }

 private:
  std::optional<uint32_t> latest_;
  uint32_t bitmap_ = 0;
  Time received_{};
  std::optional<Nanos> owd_;
  bool pending_ = false;
};

// Whether `ack` covers `seq`: it is the latest, or its bit is set.
bool Acked(const AckField& ack, uint32_t seq);

}  // namespace lockstep::fabric
