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
#pragma once

#include <cstdint>
#include <optional>

#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

// Seqs the bitmap covers behind the latest one.
inline constexpr uint32_t kAckBitmapBits = 32;

// An acknowledgement as carried by a probe.
struct AckField {
  uint32_t seq = 0;     // the latest seq received
  uint32_t bitmap = 0;  // bit i: seq - 1 - i was received too
  std::optional<Nanos> one_way_delay;  // of `seq` (both clocks LOCKED)
  Nanos held{0};        // from receiving `seq` to sending this ack (the peer's part of the round trip)
  bool operator==(const AckField&) const = default;
};

class AckWindow {
 public:
  // A probe with `seq` arrived at `received` (kernel receive time). A seq
  // newer than the latest moves the window; an older one within the
  // bitmap sets its bit; one more than 2^31 behind, or far before the
  // window (a restarted peer whose seqs began again), starts a new window.
  void OnReceive(uint32_t seq, Time received, std::optional<Nanos> one_way_delay);

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
