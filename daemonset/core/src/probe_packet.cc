#include "lockstep/agent/probe_packet.h"

#include <openssl/crypto.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <algorithm>

#include "keyed_mac.h"
#include "wire.h"

namespace lockstep::agent {

const char* DropReasonName(DropReason r) {
  switch (r) {
    case DropReason::kTruncated: return "truncated";
    case DropReason::kOversize: return "oversize";
    case DropReason::kBadMagic: return "bad_magic";
    case DropReason::kWrongVersion: return "wrong_version";
    case DropReason::kBadType: return "bad_type";
    case DropReason::kMalformed: return "malformed";
    case DropReason::kUnauthenticated: return "unauthenticated";
    case DropReason::kReplayed: return "replayed";
    case DropReason::kMisdirected: return "misdirected";
    case DropReason::kUnknownSender: return "unknown_sender";
    case DropReason::kSeqAhead: return "seq_ahead";
    case DropReason::kImplausibleTime: return "implausible_time";
    case DropReason::kUnknownNode: return "unknown_node";
    case DropReason::kBadSignature: return "bad_signature";
    case DropReason::kUnknownSigner: return "unknown_signer";
  }
  return "unknown";
}

std::vector<uint8_t> SigningBytes(const EdgeRecord& e) {
  std::vector<uint8_t> out;
  WireWriter w(out);
  for (char c : std::string_view("lockstep edge v3")) w.U8(static_cast<uint8_t>(c));
  w.U64(e.a);
  w.U64(e.b);
  w.I64(e.t_ref_ns);
  w.U64(std::bit_cast<uint64_t>(e.offset_ns));
  w.U64(std::bit_cast<uint64_t>(e.drift));
  w.U32(std::bit_cast<uint32_t>(e.margin_ns));
  w.U32(std::bit_cast<uint32_t>(e.offset_sigma_ns));
  w.U32(std::bit_cast<uint32_t>(e.drift_sigma));
  w.U32((e.drift_identified ? 1u : 0u) | (e.signed_by_b ? 2u : 0u));
  return out;
}

std::vector<uint8_t> SigningBytes(const ModelRecord& m) {
  std::vector<uint8_t> out;
  WireWriter w(out);
  for (char c : std::string_view("lockstep model v3")) w.U8(static_cast<uint8_t>(c));
  w.U64(m.node);
  w.I64(m.t_ref_ns);
  w.U64(std::bit_cast<uint64_t>(m.offset_ns));
  w.U64(std::bit_cast<uint64_t>(m.drift));
  w.U32(std::bit_cast<uint32_t>(m.error_bound_ns));
  w.U32(std::bit_cast<uint32_t>(m.drift_sigma));
  return out;
}

Result<ProbeKey> ProbeKey::FromBytes(std::string bytes) {
  if (bytes.size() < 16 || bytes.size() > 4096) {
    return InvalidArgument("probe key must be between 16 and 4096 bytes (got " +
                           std::to_string(bytes.size()) + "); generate one with `head -c 32 /dev/urandom`");
  }
  return ProbeKey(std::move(bytes));
}

// A keyed HMAC and the key bytes it was made from (to recognise a rotation to
// the same key).
struct PacketCodec::MacState {
  explicit MacState(const ProbeKey& k) : key(k.bytes()), mac(k) {}
  std::string key;
  KeyedMac mac;
};

PacketCodec::PacketCodec(const ProbeKey& key) : current_(std::make_shared<MacState>(key)) {}

PacketCodec::~PacketCodec() = default;

void PacketCodec::Rotate(const ProbeKey& key) {
  auto next = std::make_shared<MacState>(key);
  std::lock_guard lock(mu_);
  if (current_->key == key.bytes()) return;
  previous_ = std::move(current_);
  current_ = std::move(next);
}

int PacketCodec::accepted_keys() const {
  std::lock_guard lock(mu_);
  return previous_ ? 2 : 1;
}

std::pair<std::shared_ptr<const PacketCodec::MacState>, std::shared_ptr<const PacketCodec::MacState>>
PacketCodec::Keys() const {
  std::lock_guard lock(mu_);
  return {current_, previous_};
}

std::optional<std::array<uint8_t, kMacSize>> PacketCodec::Mac(const MacState& key, std::span<const uint8_t> data) {
  return key.mac.Compute(data);
}

Result<std::vector<uint8_t>> PacketCodec::Encode(const Packet& p) const {
  std::vector<uint8_t> out;
  out.reserve(kMaxPacketSize);
  WireWriter w(out);
  w.U32(kProbeMagic);
  w.U8(kProbeVersion);
  w.U8(static_cast<uint8_t>(p.type()));
  w.U16(0);  // body length, patched below
  w.U64(p.sender);
  w.U64(p.dest);
  w.U64(p.seq);
  if (const auto* probe = std::get_if<ProbeBody>(&p.body)) {
    if (probe->index > 1) return InvalidArgument("probe index must be 0 or 1");
    w.U64(probe->pair_seq);
    w.U8(probe->index);
    w.U8(probe->prev_valid ? 1 : 0);
    w.U16(0);
    w.U32(probe->spacing_ns);
    w.I64(probe->tx_app_ns);
    w.U64(probe->prev_valid ? probe->prev_pair_seq : 0);
    w.I64(probe->prev_valid ? probe->prev_tx_ns[0] : 0);
    w.I64(probe->prev_valid ? probe->prev_tx_ns[1] : 0);
  } else {
    const auto& report = std::get<ReportBody>(p.body);
    if (report.rx.size() > kMaxRxRecords || report.edges.size() > kMaxEdgeRecords ||
        report.models.size() > kMaxModelRecords) {
      return InvalidArgument("report carries too many records (rx <= " + std::to_string(kMaxRxRecords) +
                             ", edges <= " + std::to_string(kMaxEdgeRecords) +
                             ", models <= " + std::to_string(kMaxModelRecords) + ")");
    }
    w.U16(static_cast<uint16_t>(report.rx.size()));
    w.U16(static_cast<uint16_t>(report.edges.size()));
    w.U16(static_cast<uint16_t>(report.models.size()));
    w.U16(0);
    for (const RxRecord& r : report.rx) {
      w.U64(r.pair_seq);
      w.I64(r.rx_ns[0]);
      w.I64(r.rx_ns[1]);
    }
    for (const EdgeRecord& e : report.edges) {
      w.U64(e.a);
      w.U64(e.b);
      w.I64(e.t_ref_ns);
      w.U64(std::bit_cast<uint64_t>(e.offset_ns));
      w.U64(std::bit_cast<uint64_t>(e.drift));
      w.U32(std::bit_cast<uint32_t>(e.margin_ns));
      w.U32(std::bit_cast<uint32_t>(e.offset_sigma_ns));
      w.U32(std::bit_cast<uint32_t>(e.drift_sigma));
      w.U32((e.drift_identified ? 1u : 0u) | (e.signed_by_b ? 2u : 0u));
      w.Bytes(e.sig);
    }
    for (const ModelRecord& m : report.models) {
      w.U64(m.node);
      w.I64(m.t_ref_ns);
      w.U64(std::bit_cast<uint64_t>(m.offset_ns));
      w.U64(std::bit_cast<uint64_t>(m.drift));
      w.U32(std::bit_cast<uint32_t>(m.error_bound_ns));
      w.U32(std::bit_cast<uint32_t>(m.drift_sigma));
      w.Bytes(m.sig);
    }
  }
  w.PatchU16(6, static_cast<uint16_t>(out.size() - kHeaderSize));
  auto mac = Mac(*Keys().first, out);
  if (!mac) return Internal("HMAC-SHA256 failed in OpenSSL");
  out.insert(out.end(), mac->begin(), mac->end());
  return out;
}

std::variant<Packet, DropReason> PacketCodec::Decode(std::span<const uint8_t> bytes) const {
  if (bytes.size() < kHeaderSize + kMacSize) return DropReason::kTruncated;
  if (bytes.size() > kMaxPacketSize) return DropReason::kOversize;
  WireReader r(bytes);
  if (r.U32() != kProbeMagic) return DropReason::kBadMagic;
  if (r.U8() != kProbeVersion) return DropReason::kWrongVersion;
  uint8_t type = r.U8();
  if (type != static_cast<uint8_t>(PacketType::kProbe) && type != static_cast<uint8_t>(PacketType::kReport)) {
    return DropReason::kBadType;
  }
  size_t body_len = r.U16();
  if (bytes.size() < kHeaderSize + body_len + kMacSize) return DropReason::kTruncated;
  if (bytes.size() > kHeaderSize + body_len + kMacSize) return DropReason::kOversize;
  // Authenticate before interpreting anything else.
  auto signed_part = bytes.first(kHeaderSize + body_len);
  const uint8_t* got = bytes.data() + kHeaderSize + body_len;
  auto [current, previous] = Keys();
  auto want = Mac(*current, signed_part);
  if (!want || CRYPTO_memcmp(want->data(), got, kMacSize) != 0) {
    want = previous ? Mac(*previous, signed_part) : std::nullopt;
    if (!want || CRYPTO_memcmp(want->data(), got, kMacSize) != 0) return DropReason::kUnauthenticated;
  }
  Packet p;
  p.sender = r.U64();
  p.dest = r.U64();
  p.seq = r.U64();
  WireReader b(bytes.subspan(kHeaderSize, body_len));
  if (type == static_cast<uint8_t>(PacketType::kProbe)) {
    if (body_len != kProbeBodySize) return DropReason::kMalformed;
    ProbeBody probe;
    probe.pair_seq = b.U64();
    probe.index = b.U8();
    uint8_t flags = b.U8();
    uint16_t reserved = b.U16();
    probe.spacing_ns = b.U32();
    probe.tx_app_ns = b.I64();
    probe.prev_pair_seq = b.U64();
    probe.prev_tx_ns[0] = b.I64();
    probe.prev_tx_ns[1] = b.I64();
    if (!b.ok() || probe.index > 1 || (flags & ~1u) != 0 || reserved != 0) return DropReason::kMalformed;
    probe.prev_valid = (flags & 1u) != 0;
    if (!probe.prev_valid && (probe.prev_pair_seq != 0 || probe.prev_tx_ns[0] != 0 || probe.prev_tx_ns[1] != 0)) {
      return DropReason::kMalformed;
    }
    p.body = probe;
    return p;
  }
  ReportBody report;
  size_t n_rx = b.U16();
  size_t n_edges = b.U16();
  size_t n_models = b.U16();
  uint16_t reserved = b.U16();
  if (!b.ok() || reserved != 0 || n_rx > kMaxRxRecords || n_edges > kMaxEdgeRecords ||
      n_models > kMaxModelRecords ||
      body_len != kReportFixedSize + n_rx * kRxRecordSize + n_edges * kEdgeRecordSize +
                      n_models * kModelRecordSize) {
    return DropReason::kMalformed;
  }
  report.rx.resize(n_rx);
  for (RxRecord& rec : report.rx) {
    rec.pair_seq = b.U64();
    rec.rx_ns[0] = b.I64();
    rec.rx_ns[1] = b.I64();
  }
  report.edges.resize(n_edges);
  for (EdgeRecord& e : report.edges) {
    e.a = b.U64();
    e.b = b.U64();
    e.t_ref_ns = b.I64();
    e.offset_ns = std::bit_cast<double>(b.U64());
    e.drift = std::bit_cast<double>(b.U64());
    e.margin_ns = std::bit_cast<float>(b.U32());
    e.offset_sigma_ns = std::bit_cast<float>(b.U32());
    e.drift_sigma = std::bit_cast<float>(b.U32());
    uint32_t flags = b.U32();
    b.Bytes(e.sig);
    if ((flags & ~3u) != 0 || !std::isfinite(e.offset_ns) || !std::isfinite(e.drift) ||
        !std::isfinite(e.margin_ns) || !std::isfinite(e.offset_sigma_ns) || !std::isfinite(e.drift_sigma)) {
      return DropReason::kMalformed;
    }
    e.drift_identified = (flags & 1u) != 0;
    e.signed_by_b = (flags & 2u) != 0;
  }
  report.models.resize(n_models);
  for (ModelRecord& m : report.models) {
    m.node = b.U64();
    m.t_ref_ns = b.I64();
    m.offset_ns = std::bit_cast<double>(b.U64());
    m.drift = std::bit_cast<double>(b.U64());
    m.error_bound_ns = std::bit_cast<float>(b.U32());
    m.drift_sigma = std::bit_cast<float>(b.U32());
    b.Bytes(m.sig);
    if (!std::isfinite(m.offset_ns) || !std::isfinite(m.drift) || !std::isfinite(m.error_bound_ns) ||
        !std::isfinite(m.drift_sigma) || m.error_bound_ns < 0 || m.drift_sigma < 0) {
      return DropReason::kMalformed;
    }
  }
  if (!b.ok()) return DropReason::kMalformed;
  p.body = std::move(report);
  return p;
}

}  // namespace lockstep::agent
