#include "lockstep/agent/fabric_probe.h"

#include <openssl/crypto.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "lockstep/agent/keyed_mac.h"

namespace lockstep::agent {
namespace {

constexpr size_t kSignedSize = kFabricProbeSize - kMacSize;

void Put(uint8_t* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
uint64_t Get(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

struct FabricProbeCodec::Keys {
  std::shared_ptr<const KeyedMac> current, previous;
};

const char* FabricDropName(FabricDrop d) {
  switch (d) {
    case FabricDrop::kTruncated: return "truncated";
    case FabricDrop::kBadMagic: return "bad_magic";
    case FabricDrop::kMalformed: return "malformed";
    case FabricDrop::kUnauthenticated: return "unauthenticated";
    case FabricDrop::kMisdirected: return "misdirected";
    case FabricDrop::kUnknownSender: return "unknown_sender";
    case FabricDrop::kUnmatched: return "unmatched";
  }
  return "unknown";
}

FabricProbeCodec::FabricProbeCodec(const ProbeKey& key)
    : keys_(std::make_shared<Keys>(Keys{std::make_shared<KeyedMac>(key), nullptr})) {}
FabricProbeCodec::~FabricProbeCodec() = default;

std::shared_ptr<const FabricProbeCodec::Keys> FabricProbeCodec::Snapshot() const {
  std::lock_guard lock(mu_);
  return keys_;
}

void FabricProbeCodec::Rotate(const ProbeKey& key) {
  auto next = std::make_shared<KeyedMac>(key);
  std::lock_guard lock(mu_);
  keys_ = std::make_shared<Keys>(Keys{std::move(next), keys_->current});
}

std::array<uint8_t, kFabricProbeSize> FabricProbeCodec::Encode(const FabricProbe& p) const {
  std::array<uint8_t, kFabricProbeSize> b{};
  Put(&b[0], kFabricProbeMagic, 4);
  b[4] = kFabricProbeVersion;
  b[5] = static_cast<uint8_t>(p.type);
  b[6] = p.rail;
  b[7] = p.path_index;
  Put(&b[8], p.sender, 8);
  Put(&b[16], p.dest, 8);
  Put(&b[24], p.seq, 8);
  Put(&b[32], static_cast<uint64_t>(p.tx_fabric_ns), 8);
  Put(&b[40], static_cast<uint64_t>(p.rx_fabric_ns), 8);
  const auto mac = Snapshot()->current->Compute(std::span(b.data(), kSignedSize)).value_or(
      std::array<uint8_t, kMacSize>{});  // zeros on failure: never verifies
  std::copy(mac.begin(), mac.end(), b.begin() + kSignedSize);
  return b;
}

std::variant<FabricProbe, FabricDrop> FabricProbeCodec::Decode(std::span<const uint8_t> b) const {
  if (b.size() != kFabricProbeSize) return FabricDrop::kTruncated;
  if (Get(&b[0], 4) != kFabricProbeMagic || b[4] != kFabricProbeVersion) return FabricDrop::kBadMagic;
  auto keys = Snapshot();
  auto verifies = [&](const std::shared_ptr<const KeyedMac>& k) {
    if (!k) return false;
    const auto mac = k->Compute(b.first(kSignedSize));
    return mac && CRYPTO_memcmp(mac->data(), &b[kSignedSize], kMacSize) == 0;
  };
  if (!verifies(keys->current) && !verifies(keys->previous)) return FabricDrop::kUnauthenticated;
  FabricProbe p;
  if (b[5] != 1 && b[5] != 2) return FabricDrop::kMalformed;
  p.type = static_cast<FabricProbe::Type>(b[5]);
  p.rail = b[6];
  p.path_index = b[7];
  p.sender = Get(&b[8], 8);
  p.dest = Get(&b[16], 8);
  p.seq = Get(&b[24], 8);
  p.tx_fabric_ns = static_cast<int64_t>(Get(&b[32], 8));
  p.rx_fabric_ns = static_cast<int64_t>(Get(&b[40], 8));
  if (Get(&b[48], 8) != 0) return FabricDrop::kMalformed;
  if (p.type == FabricProbe::Type::kProbe && p.rx_fabric_ns != 0) return FabricDrop::kMalformed;
  if (p.tx_fabric_ns < 0 || p.rx_fabric_ns < 0 || p.sender == 0) return FabricDrop::kMalformed;
  return p;
}

FabricProbe ReplyTo(const FabricProbe& probe, NodeId self, int64_t rx_fabric_ns) {
  FabricProbe r = probe;
  r.type = FabricProbe::Type::kReply;
  r.sender = self;
  r.dest = probe.sender;
  r.rx_fabric_ns = rx_fabric_ns;
  return r;
}

std::optional<int64_t> OneWayDelayNs(const FabricProbe& reply) {
  if (reply.tx_fabric_ns == 0 || reply.rx_fabric_ns == 0) return std::nullopt;
  int64_t d = reply.rx_fabric_ns - reply.tx_fabric_ns;
  if (d < 0 || d >= 10'000'000'000) return std::nullopt;
  return d;
}

}  // namespace lockstep::agent
