// Probe packet format v3: the pure codec for the clock-sync / path probes.
//
// Every packet (big-endian):
//   off len field
//    0   4  magic 0x4C4B5350 ("LKSP")
//    4   1  version (3; v2 records carried no origin signature, v1 reports had
//           no model records)
//    5   1  type: 1 = probe, 2 = report
//    6   2  body length in bytes (everything between header and MAC)
//    8   8  sender NodeId (FNV-1a 64 of the node name)
//   16   8  destination NodeId (a packet for another node is "misdirected")
//   24   8  sequence: per-sender packet counter for replay protection. A sender
//           starts it at its wall clock in ns at startup, so a restarted agent
//           moves forward instead of being taken for a replay.
//   32   n  body
//   32+n 16 HMAC-SHA256(key, bytes[0, 32+n)) truncated to 16 bytes
//
// Probe body (48 bytes): one packet of a coded pair.
//    0   8  pair sequence (per sender, increases by one per pair)
//    8   1  index in pair (0 or 1)
//    9   1  flags: bit0 = the prev_* fields are valid; other bits must be 0
//   10   2  reserved, must be 0
//   12   4  intended spacing between the pair's two packets, ns
//   16   8  tx_app: sender's clock when it built the pair, + index * spacing (ns,
//           sender's clock domain; informative only)
//   24   8  prev pair sequence: the previous pair this sender sent to this
//           destination ...
//   32   8  ... and the kernel TX timestamps of its packet 0 ...
//   40   8  ... and packet 1, in the sender's clock domain.
// A kernel TX stamp is only known after sendmsg() returns (MSG_ERRQUEUE), so
// each pair carries the stamps of the previous pair to the same peer; the
// receiver joins them with the RX stamps it kept (one interval later).
//
// Report body: sent back to a peer that probes us.
//    0   2  n_rx (<= kMaxRxRecords)
//    2   2  n_edges (<= kMaxEdgeRecords)
//    4   2  n_models (<= kMaxModelRecords)
//    6   2  reserved, must be 0
//    8      n_rx x RxRecord {u64 pair_seq, i64 rx0_ns, i64 rx1_ns}: our kernel
//           RX stamps (our clock domain) of that peer's pairs, 0 = lost
//           n_edges x EdgeRecord (120 bytes) {u64 a, u64 b, i64 t_ref_ns,
//           f64 offset_ns, f64 drift, f32 margin_ns, f32 offset_sigma_ns,
//           f32 drift_sigma, u32 flags (bit0 drift_identified, bit1 signed by
//           b, else by a), 64-byte Ed25519 signature}: gossip of edge fits
//           (clocksync::EdgeSummary with wire ids, a < b). Floats are IEEE-754
//           bit patterns, big-endian; non-finite ones are malformed.
//           n_models x ModelRecord (104 bytes) {u64 node, i64 t_ref_ns, f64
//           offset_ns, f64 drift, f32 error_bound_ns, f32 drift_sigma, 64-byte
//           Ed25519 signature by `node`}: gossip
//           of the model each node serves (clocksync::NodeModel: c_node - F =
//           offset + drift * (F - t_ref), t_ref in fabric time), the anchors of
//           the fabric-time gauge. Negative bounds or sigmas are malformed.
//           A record's signature is by its origin node (node_signer.h) over
//           SigningBytes(record): a domain string, then the record's fields as
//           above without the signature. Relays pass records on unchanged, so
//           a key holder can replay but not invent another node's fits.
//
// Pure; thread-compatible. Decode never trusts its input and never throws.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "lockstep/agent/node_id.h"
#include "lockstep/agent/probe_key.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

inline constexpr uint32_t kProbeMagic = 0x4C4B5350;
inline constexpr uint8_t kProbeVersion = 3;
inline constexpr size_t kHeaderSize = 32;
inline constexpr size_t kProbeBodySize = 48;
inline constexpr size_t kReportFixedSize = 8;
inline constexpr size_t kRxRecordSize = 24;
inline constexpr size_t kEdgeRecordSize = 120;
inline constexpr size_t kModelRecordSize = 104;
inline constexpr size_t kMaxRxRecords = 16;
inline constexpr size_t kMaxEdgeRecords = 5;
inline constexpr size_t kMaxModelRecords = 4;
// A full report (1456 bytes) fits one 1500-byte Ethernet frame with IPv4 and UDP.
inline constexpr size_t kMaxPacketSize = 1472;

enum class PacketType : uint8_t { kProbe = 1, kReport = 2 };

// Why a received datagram was dropped; the label of lockstep_probe_dropped_total.
enum class DropReason {
  kTruncated,        // shorter than header + MAC, or than its declared body
  kOversize,         // longer than kMaxPacketSize or its declared body
  kBadMagic,
  kWrongVersion,
  kBadType,
  kMalformed,        // fields out of range, reserved bits set, bad counts
  kUnauthenticated,  // HMAC mismatch (wrong key or tampered)
  kReplayed,         // sequence already seen or older than the replay window
  kMisdirected,      // destination is not this node
  kUnknownSender,    // authenticated, but not a node we know
  kSeqAhead,         // sequence beyond the receiver's wall clock + kMaxClockSkewNs
  kImplausibleTime,  // a timestamp or fit farther than kMaxClockSkewNs from ours
  kUnknownNode,      // a gossip record about a node we do not know
  kBadSignature,     // a gossip record whose origin signature does not verify
  kUnknownSigner,    // a gossip record from a node whose public key we lack
};
inline constexpr int kNumDropReasons = 15;
// How far a sender's clock (its sequence numbers, timestamps, fits) may be from
// the receiver's. Sequences start at the sender's wall clock and grow slower than
// it, so a sequence beyond the receiver's wall clock + this is a forgery (one such
// packet would otherwise silence that sender in the replay window for good).
inline constexpr int64_t kMaxClockSkewNs = 60'000'000'000;
// Gossiped drifts beyond this (1000 ppm) are not clocks.
inline constexpr double kMaxDrift = 1e-3;
const char* DropReasonName(DropReason r);

struct ProbeBody {
  uint64_t pair_seq = 0;
  uint8_t index = 0;
  uint32_t spacing_ns = 0;
  int64_t tx_app_ns = 0;
  bool prev_valid = false;
  uint64_t prev_pair_seq = 0;
  std::array<int64_t, 2> prev_tx_ns{0, 0};
  bool operator==(const ProbeBody&) const = default;
};

struct RxRecord {
  uint64_t pair_seq = 0;
  std::array<int64_t, 2> rx_ns{0, 0};  // 0 = that packet was not received
  bool operator==(const RxRecord&) const = default;
};

// One edge fit, gossiped: clock_b - clock_a = offset_ns + drift * (t - t_ref_ns)
// with t on a's clock (a < b as wire ids).
struct EdgeRecord {
  NodeId a = 0;
  NodeId b = 0;
  int64_t t_ref_ns = 0;
  double offset_ns = 0;
  double drift = 0;
  float margin_ns = 0;
  float offset_sigma_ns = 0;
  float drift_sigma = 0;
  bool drift_identified = false;
  bool signed_by_b = false;      // the origin (signer) is b, else a
  std::array<uint8_t, 64> sig{};  // Ed25519 by the origin over SigningBytes
  NodeId signer() const { return signed_by_b ? b : a; }
  bool operator==(const EdgeRecord&) const = default;
};

// The model a node serves, gossiped: c_node - F = offset_ns + drift * (F - t_ref_ns).
struct ModelRecord {
  NodeId node = 0;
  int64_t t_ref_ns = 0;  // fabric time
  double offset_ns = 0;
  double drift = 0;
  float error_bound_ns = 0;
  float drift_sigma = 0;
  std::array<uint8_t, 64> sig{};  // Ed25519 by `node` over SigningBytes
  bool operator==(const ModelRecord&) const = default;
};

// What a record's origin signs (see the format above).
std::vector<uint8_t> SigningBytes(const EdgeRecord& e);
std::vector<uint8_t> SigningBytes(const ModelRecord& m);

struct ReportBody {
  std::vector<RxRecord> rx;
  std::vector<EdgeRecord> edges;
  std::vector<ModelRecord> models;
  bool operator==(const ReportBody&) const = default;
};

struct Packet {
  NodeId sender = 0;
  NodeId dest = 0;
  uint64_t seq = 0;
  std::variant<ProbeBody, ReportBody> body;
  PacketType type() const { return body.index() == 0 ? PacketType::kProbe : PacketType::kReport; }
  bool operator==(const Packet&) const = default;
};

// Thread-safe: Encode/Decode are const and work on copies of immutable keyed
// HMAC templates; Rotate() swaps the templates under a mutex.
//
// Key rotation: the codec holds the current key and the one before it. Encode
// signs with the current key; Decode accepts either, so packets from peers that
// have not reloaded the Secret yet still authenticate until the next rotation.
class PacketCodec {
 public:
  explicit PacketCodec(const ProbeKey& key);
  ~PacketCodec();
  PacketCodec(const PacketCodec&) = delete;
  PacketCodec& operator=(const PacketCodec&) = delete;

  // Serializes and authenticates. Returns InvalidArgument if the packet
  // violates the format's limits (too many records, index > 1).
  Result<std::vector<uint8_t>> Encode(const Packet& p) const;

  // Parses and authenticates one datagram. Stateless: replay, destination and
  // sender checks are PacketFilter's.
  std::variant<Packet, DropReason> Decode(std::span<const uint8_t> bytes) const;

  // Makes `key` current and the current key the previous one (the older one is
  // forgotten). Rotating to the current key again changes nothing. Thread-safe.
  void Rotate(const ProbeKey& key);
  // Number of keys accepted (1 before the first rotation, then 2).
  int accepted_keys() const;

  struct MacState;  // opaque: a keyed HMAC-SHA256 template

 private:
  // nullopt if OpenSSL fails (then nothing authenticates).
  static std::optional<std::array<uint8_t, kMacSize>> Mac(const MacState& key, std::span<const uint8_t> data);
  std::pair<std::shared_ptr<const MacState>, std::shared_ptr<const MacState>> Keys() const;

  mutable std::mutex mu_;
  std::shared_ptr<const MacState> current_;   // GUARDED_BY(mu_)
  std::shared_ptr<const MacState> previous_;  // GUARDED_BY(mu_)
};

}  // namespace lockstep::agent
