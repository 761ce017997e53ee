// The fabric path probe: a small authenticated UDP message, apart from the
// clock-sync packets (its own port, fabric.port, default 7312), that tells
// whether one path (our rail r -> a peer's host address) delivers.
//
// Probing is symmetric (lockstep/fabric/ack_window.h): each end of a pair
// sends one packet per path per interval, carrying its own probe AND the
// acknowledgement of what it received of the other end's probes on the path
// with the same rail and path index. There are no separate replies; an
// ack-only packet goes out only for a peer that probes us while we do not
// probe it (peer selection is not always symmetric).
//
// Which of our probes carries an ack: the one leaving through the interface
// the acked probes arrive on, so an ack retraces the links of the probes it
// acknowledges (as a reply out of the arrival interface did). Rail numbers
// need not match across hosts (a striped fabric connects one host's rail 0
// and another's rail 1 to the same leaf), so the acked path is named apart.
//
// Wire format, version 3 (54 bytes, big-endian):
//   off len field
//    0   2  magic 0x4C46 ("LF")
//    2   1  version (3)
//    3   1  flags: 0x01 probe (seq, tx), 0x02 ack, 0x04 tx_fabric valid
//           (the sender's clock is LOCKED), 0x08 ack_owd valid, 0x10 slow
//           (with probe: an idle path's probe, which the receiver may ack at
//           its idle tick and which does not keep it on fast ticks:
//           fabric::FabricOptions::idle_tick), 0x20 urgent (an urgent probe,
//           or the ack of one: the receiver's kernel steers it to the socket
//           that wakes the prober, see kFabricUrgentFlag); at least one of
//           probe/ack; other bits 0 (an agent from before a flag drops a
//           packet with it as malformed: upgrade the agents of a fabric
//           together)
//    4   1  rail, 5 1 path index: the sender's path this probe is for
//    6   4  sender: WireNodeId (the 64-bit NodeId folded to 32 bits)
//   10   4  destination WireNodeId
//   14   8  epoch: the sender's boot (its wall clock in ns when the agent
//           started; never 0). Newer means the sender restarted.
//   22   4  seq: the sender's per-path probe sequence (0 without a probe)
//   26   4  tx_fabric: the low 32 bits of the fabric time (ns) the probe left at
//   30   1  ack_rail, 31 1 ack path index: the destination's path acked
//   32   4  ack_seq: the latest of the destination's seqs received on that path
//   36   4  ack_bitmap: bit i = ack_seq - 1 - i received too
//   40   4  ack_owd_ns: ack_seq's one-way delay (rx - tx fabric time, < 2^31)
//   44   2  ack_held: from receiving ack_seq to sending this, a 2-bit scale
//           and a 14-bit count (HeldToWire): 1 us units to 16.383 ms, 8 us
//           to 131 ms (an idle tick's hold), 64 us to 1.05 s, 512 us to
//           8.39 s; 0xFFFF: longer (not known: no round-trip sample)
//   46   8  HMAC-SHA256(probe key, bytes[0, 46)) truncated to 8 bytes
// Until 2026-11-29 ack_held was whole microseconds saturating at 65.535 ms:
// acks held to an idle tick (up to ~110 ms) then read as up to 45 ms of
// round trip. An agent from before reads holds up to 16.383 ms the same and
// longer ones wrong (its round-trip samples only, nothing of path health).
// Versions 1 (72 bytes, request/reply) and 2 (46 bytes, no epoch) are
// dropped as bad_magic. Compatibility: the agents of a fabric are upgraded
// together; during a rolling update the paths between an old and a new
// agent look down (path flaps) until both run version 3. Accepting version
// 2 beside it would let anyone replay captured version 2 probes, the hole
// version 3 closes.
//
// Why 8 bytes of MAC are enough: a forger must guess a 64-bit tag per packet
// (2^-64 per try, no offline attack without the key), and a probe is only
// believed for one interval: a forged ack could at most hide one lost probe
// for ~10 ms. 32-bit node ids: the id only routes a packet to the right
// peer's state among a node's few hundred peers (all authenticated by the
// shared key); a collision there is reported as a configuration error by
// the caller, not a security hole.
//
// The key is the clock-sync probe key (probeKeyFile); the previous key is
// still accepted after a rotation.
//
// Replays. Anyone on a rail (no key needed) can capture a genuine probe and
// send it again, at any rate, to either port. The MAC cannot tell; the
// receiver's freshness checks do (FabricService::Handle), before anything of
// the packet is used:
//   - epoch older than the latest seen from that sender: dropped as stale (a
//     probe from a previous boot), unless nothing fresh came from the sender
//     for a stats window (10 s): then it is a restart whose wall clock is
//     behind its previous start, let in rather than shut out for good (a
//     replay can do that too, but only while the peer is silent anyway, and
//     the peer's next genuine packet, newer, takes over again);
//   - epoch newer: the sender restarted, and only then are the windows of
//     its paths started again (signed evidence; an old seq never restarts a
//     window, lockstep/fabric/ack_window.h);
//   - same epoch: a seq already received is dropped as replayed, one before
//     the ack window (or implausibly far ahead) as stale. The whole packet
//     is dropped, its ack too, and a replayed urgent probe wakes no
//     urgent reply.
// Each path's seqs start at FirstSeq(epoch), so an ack from an old boot of
// ours (replayed in an ack-only packet, which carries no seq of its own)
// names seqs our new boot is unlikely to have outstanding (2^-32 x the
// few in flight). A replayed ack-only packet of the current boots repeats
// an acknowledgement that was true; it delivers nothing already decided.
//
// Pure; FabricProbeCodec is thread-safe (Rotate under a mutex).
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <variant>

#include "lockstep/agent/node_id.h"
#include "lockstep/agent/probe_packet.h"
#include "lockstep/common/pi_mutex.h"
#include "lockstep/fabric/ack_window.h"

namespace lockstep::agent {

inline constexpr uint16_t kFabricProbeMagic = 0x4C46;
inline constexpr uint8_t kFabricProbeVersion = 3;
inline constexpr size_t kFabricProbeSize = 54;
inline constexpr size_t kFabricMacSize = 8;
// The urgent bit of the flags byte (offset kFabricFlagsOffset). Urgent
// probes and their acks go to the same port as every other probe, so they
// take the same 5-tuple, and so the same ECMP path, as the probes they
// confirm (they once went to port + 1: a different hash, often a different
// spine, so a path whose probes were black-holed on one spine could be
// "confirmed up" by urgent probes over the other). The receiver's kernel
// steers datagrams with this bit to the socket that wakes the prober
// (UdpFabricSocket: a SO_REUSEPORT pair with a classic BPF program reading
// this byte). It is authenticated with the rest; a forged one can only
// steer a packet that is then dropped unless genuine.
inline constexpr size_t kFabricFlagsOffset = 3;
inline constexpr uint8_t kFabricUrgentFlag = 0x20;

// A node's id on the fabric wire: NodeId folded to 32 bits.
constexpr uint32_t WireNodeId(NodeId id) { return static_cast<uint32_t>(id ^ (id >> 32)); }

struct FabricProbe {
  uint8_t rail = 0;
  uint8_t path_index = 0;
  uint32_t sender = 0;  // WireNodeId
  uint32_t dest = 0;    // WireNodeId
  uint64_t epoch = 0;   // the sender's boot (never 0 on the wire)
  // The sender's probe: its per-path seq (never 0) and the low 32 bits of
  // the fabric time it left at (nullopt: not LOCKED).
  std::optional<uint32_t> seq;
  std::optional<uint32_t> tx_fabric;
  std::optional<fabric::AckField> ack;  // one_way_delay < 2^31 ns; held as HeldToWire can say it
  uint8_t ack_rail = 0;                 // with ack: the destination's path it is for
  uint8_t ack_path_index = 0;
  bool slow = false;    // with seq: the wire's slow flag (an idle path's probe)
  bool urgent = false;  // an urgent probe, or an urgent probe's ack (kFabricUrgentFlag)
  bool operator==(const FabricProbe&) const = default;
};

// Why a fabric datagram was dropped; the `reason` label of
// lockstep_fabric_probe_dropped_total.
enum class FabricDrop {
  kTruncated,        // not exactly kFabricProbeSize bytes
  kBadMagic,         // not a fabric probe (wrong magic or version: a version 1 or 2 agent)
  kMalformed,        // bad flags, neither probe nor ack, seq 0, epoch 0
  kUnauthenticated,  // HMAC mismatch
  kMisdirected,      // for another node
  kUnknownSender,    // authenticated, but not a peer we know
  kUnmatched,        // an ack-only packet for a path we do not probe
  kStale,            // authenticated but old: an earlier epoch of the sender, or a seq before the ack window
  kReplayed,         // authenticated, but its seq was already received (a replay or a network duplicate)
};
const char* FabricDropName(FabricDrop d);
inline constexpr FabricDrop kAllFabricDrops[] = {FabricDrop::kTruncated,       FabricDrop::kBadMagic,
                                                 FabricDrop::kMalformed,       FabricDrop::kUnauthenticated,
                                                 FabricDrop::kMisdirected,     FabricDrop::kUnknownSender,
                                                 FabricDrop::kUnmatched,       FabricDrop::kStale,
                                                 FabricDrop::kReplayed};
inline constexpr size_t kFabricDropKinds = std::size(kAllFabricDrops);
static_assert([] {  // kAllFabricDrops[i] is the FabricDrop with value i (counters are indexed so)
  for (size_t i = 0; i < kFabricDropKinds; ++i) {
    if (static_cast<size_t>(kAllFabricDrops[i]) != i) return false;
  }
  return true;
}());

// The first seq of every path in the boot with this epoch (never 0): a
// stable mix of the epoch, so seqs of different boots are unrelated.
uint32_t FirstSeq(uint64_t epoch);

class FabricProbeCodec {
 public:
  explicit FabricProbeCodec(const ProbeKey& key);
  ~FabricProbeCodec();
  FabricProbeCodec(const FabricProbeCodec&) = delete;
  FabricProbeCodec& operator=(const FabricProbeCodec&) = delete;

  // Fields beyond the wire's range are clamped (held) or dropped (an owd of
  // 2^31 ns or more, or negative, is sent as none).
  std::array<uint8_t, kFabricProbeSize> Encode(const FabricProbe& p) const;
  // Parses and authenticates; destination and sender checks are the caller's.
  std::variant<FabricProbe, FabricDrop> Decode(std::span<const uint8_t> bytes) const;
  // `key` signs from now on; the current key is still accepted.
  void Rotate(const ProbeKey& key);

  struct Keys;

 private:
  std::shared_ptr<const Keys> Snapshot() const;
  mutable PiMutex mu_;  // the prober (SCHED_FIFO) takes a Snapshot per packet
  std::shared_ptr<const Keys> keys_;  // GUARDED_BY(mu_)
};

// The wire's ack_held field: the hold at the finest of four scales (1, 8,
// 64, 512 us per count, 14-bit counts) that holds it, rounded to the nearest
// count (within 4 us up to 131 ms); 0xFFFF (kHeldUnknown) when it is not
// known or longer than 8.387 s. Negative holds are 0.
inline constexpr uint16_t kHeldUnknown = 0xFFFF;
uint16_t HeldToWire(std::optional<Nanos> held);
std::optional<Nanos> HeldFromWire(uint16_t wire);

// The one-way delay of a probe received at fabric time rx_fabric_ns (our
// clock LOCKED), from its 32-bit tx stamp: (rx - tx) modulo 2^32 when the
// sender was LOCKED too and the result is plausible (< 2^31 ns, ~2.1 s),
// else nullopt.
std::optional<int64_t> OneWayDelayNs(std::optional<uint32_t> tx_fabric, std::optional<int64_t> rx_fabric_ns);

}  // namespace lockstep::agent
