// The fabric path probe: a small authenticated UDP message, apart from the
// clock-sync packets (its own port, fabric.port, default 7312), that tells
// whether one path (our rail r -> a peer's host address) delivers.
//
// Wire format (72 bytes, big-endian):
//   off len field
//    0   4  magic 0x4C4B4650 ("LKFP")
//    4   1  version (1)
//    5   1  type: 1 = probe, 2 = reply
//    6   1  rail: the prober's rail (a reply echoes it)
//    7   1  path index (echoed)
//    8   8  sender NodeId (FNV-1a 64 of the node name)
//   16   8  destination NodeId
//   24   8  seq: the prober's probe sequence (a reply echoes it)
//   32   8  tx_fabric_ns: probe: fabric time when it left the prober, 0 when
//           the prober's clock is not LOCKED (a reply echoes it)
//   40   8  rx_fabric_ns: reply: fabric time when the probe reached the
//           responder, 0 when the responder is not LOCKED; probe: 0
//   48   8  reserved, must be 0
//   56  16  HMAC-SHA256(probe key, bytes[0, 56)) truncated to 16 bytes
// The key is the clock-sync probe key (probeKeyFile); the previous key is
// still accepted after a rotation. Replays: a replayed probe only makes the
// responder answer a known peer's host address (never the datagram's
// source); a replayed or forged reply matches no outstanding probe and
// changes nothing (PathHealth counts it unmatched).
//
// Pure; FabricProbeCodec is thread-safe (Rotate under a mutex).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <variant>

#include "lockstep/agent/node_id.h"
#include "lockstep/agent/probe_packet.h"

namespace lockstep::agent {

inline constexpr uint32_t kFabricProbeMagic = 0x4C4B4650;
inline constexpr uint8_t kFabricProbeVersion = 1;
inline constexpr size_t kFabricProbeSize = 72;

struct FabricProbe {
  enum class Type : uint8_t { kProbe = 1, kReply = 2 };
  Type type = Type::kProbe;
  uint8_t rail = 0;
  uint8_t path_index = 0;
  NodeId sender = 0;
  NodeId dest = 0;
  uint64_t seq = 0;
  int64_t tx_fabric_ns = 0;  // 0: not LOCKED
  int64_t rx_fabric_ns = 0;  // 0: not LOCKED (replies only)
  bool operator==(const FabricProbe&) const = default;
};

// Why a fabric datagram was dropped; the `reason` label of
// lockstep_fabric_probe_dropped_total.
enum class FabricDrop {
  kTruncated,        // not exactly kFabricProbeSize bytes
  kBadMagic,         // not a fabric probe (wrong magic or version)
  kMalformed,        // bad type, reserved bytes set, a probe with rx_fabric_ns
  kUnauthenticated,  // HMAC mismatch
  kMisdirected,      // for another node
  kUnknownSender,    // authenticated, but not a peer we know
  kUnmatched,        // a reply for a rail or path we do not probe
};
const char* FabricDropName(FabricDrop d);
inline constexpr FabricDrop kAllFabricDrops[] = {FabricDrop::kTruncated,       FabricDrop::kBadMagic,
                                                 FabricDrop::kMalformed,       FabricDrop::kUnauthenticated,
                                                 FabricDrop::kMisdirected,     FabricDrop::kUnknownSender,
                                                 FabricDrop::kUnmatched};

class FabricProbeCodec {
 public:
  explicit FabricProbeCodec(const ProbeKey& key);
  ~FabricProbeCodec();
  FabricProbeCodec(const FabricProbeCodec&) = delete;
  FabricProbeCodec& operator=(const FabricProbeCodec&) = delete;

  std::array<uint8_t, kFabricProbeSize> Encode(const FabricProbe& p) const;
  // Parses and authenticates; destination and sender checks are the caller's.
  std::variant<FabricProbe, FabricDrop> Decode(std::span<const uint8_t> bytes) const;
  // `key` signs from now on; the current key is still accepted.
  void Rotate(const ProbeKey& key);

  struct Keys;

 private:
  std::shared_ptr<const Keys> Snapshot() const;
  mutable std::mutex mu_;
  std::shared_ptr<const Keys> keys_;  // GUARDED_BY(mu_)
};

// The reply a responder sends for `probe` (which it received at fabric time
// rx_fabric_ns, 0 when not LOCKED): sender and destination swapped, rail,
// path index, seq and tx_fabric_ns echoed.
FabricProbe ReplyTo(const FabricProbe& probe, NodeId self, int64_t rx_fabric_ns);

// The prober's one-way delay from a reply: rx - tx when both clocks were
// LOCKED (both stamps non-zero) and the result is plausible (0 <= owd < 10 s),
// else nullopt.
std::optional<int64_t> OneWayDelayNs(const FabricProbe& reply);

}  // namespace lockstep::agent
