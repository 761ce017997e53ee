#include "lockstep/agent/fabric_probe.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "keyed_mac.h"

namespace lockstep::agent {
namespace {

static_assert(kFabricMacSize <= kMacSize);
constexpr size_t kSignedSize = kFabricProbeSize - kFabricMacSize;
constexpr uint8_t kFlagProbe = 0x01, kFlagAck = 0x02, kFlagTx = 0x04, kFlagOwd = 0x08, kFlagSlow = 0x10;
constexpr int64_t kMaxOwdNs = int64_t{1} << 31;

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
    case FabricDrop::kStale: return "stale";
    case FabricDrop::kReplayed: return "replayed";
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
  Put(&b[0], kFabricProbeMagic, 2);
  b[2] = kFabricProbeVersion;
  uint8_t flags = 0;
  b[4] = p.rail;
  b[5] = p.path_index;
  Put(&b[6], p.sender, 4);
  Put(&b[10], p.dest, 4);
  Put(&b[14], p.epoch, 8);
  if (p.seq) {
    flags |= kFlagProbe;
    if (p.slow) flags |= kFlagSlow;
    Put(&b[22], *p.seq, 4);
    if (p.tx_fabric) {
      flags |= kFlagTx;
      Put(&b[26], *p.tx_fabric, 4);
    }
  }
  if (p.ack) {
    flags |= kFlagAck;
    b[30] = p.ack_rail;
    b[31] = p.ack_path_index;
    Put(&b[32], p.ack->seq, 4);
    Put(&b[36], p.ack->bitmap, 4);
    if (p.ack->one_way_delay && p.ack->one_way_delay->count() >= 0 && p.ack->one_way_delay->count() < kMaxOwdNs) {
      flags |= kFlagOwd;
      Put(&b[40], static_cast<uint64_t>(p.ack->one_way_delay->count()), 4);
    }
    Put(&b[44], HeldToWire(p.ack->held), 2);
  }
  if (p.urgent) flags |= kFabricUrgentFlag;
  b[3] = flags;
  const auto mac = Snapshot()->current->Compute(std::span(b.data(), kSignedSize)).value_or(
      std::array<uint8_t, kMacSize>{});  // zeros on failure: never verifies
  std::copy(mac.begin(), mac.begin() + kFabricMacSize, b.begin() + kSignedSize);
  return b;
}

std::variant<FabricProbe, FabricDrop> FabricProbeCodec::Decode(std::span<const uint8_t> b) const {
  // Magic and version first, so an agent of the previous version (72-byte
  // request/reply probes) is told apart from a cut datagram.
  if (b.size() < 3) return FabricDrop::kTruncated;
  if (Get(&b[0], 2) != kFabricProbeMagic || b[2] != kFabricProbeVersion) return FabricDrop::kBadMagic;
  if (b.size() != kFabricProbeSize) return FabricDrop::kTruncated;
  auto keys = Snapshot();
  auto verifies = [&](const std::shared_ptr<const KeyedMac>& k) {
    if (!k) return false;
    const auto mac = k->Compute(b.first(kSignedSize));
    return mac && CRYPTO_memcmp(mac->data(), &b[kSignedSize], kFabricMacSize) == 0;
  };
  if (!verifies(keys->current) && !verifies(keys->previous)) return FabricDrop::kUnauthenticated;
  const uint8_t flags = b[3];
  if ((flags & ~(kFlagProbe | kFlagAck | kFlagTx | kFlagOwd | kFlagSlow | kFabricUrgentFlag)) != 0) {
    return FabricDrop::kMalformed;
  }
  if ((flags & (kFlagProbe | kFlagAck)) == 0) return FabricDrop::kMalformed;
  if ((flags & (kFlagTx | kFlagSlow)) && !(flags & kFlagProbe)) return FabricDrop::kMalformed;
  if ((flags & kFlagOwd) && !(flags & kFlagAck)) return FabricDrop::kMalformed;
  FabricProbe p;
  p.rail = b[4];
  p.path_index = b[5];
  p.sender = static_cast<uint32_t>(Get(&b[6], 4));
  p.dest = static_cast<uint32_t>(Get(&b[10], 4));
  p.epoch = Get(&b[14], 8);
  if (p.sender == 0 || p.epoch == 0) return FabricDrop::kMalformed;
  p.urgent = (flags & kFabricUrgentFlag) != 0;
  if (flags & kFlagProbe) {
    p.seq = static_cast<uint32_t>(Get(&b[22], 4));
    if (*p.seq == 0) return FabricDrop::kMalformed;
    if (flags & kFlagTx) p.tx_fabric = static_cast<uint32_t>(Get(&b[26], 4));
    p.slow = (flags & kFlagSlow) != 0;
  }
  if (flags & kFlagAck) {
    fabric::AckField a;
    p.ack_rail = b[30];
    p.ack_path_index = b[31];
    a.seq = static_cast<uint32_t>(Get(&b[32], 4));
    a.bitmap = static_cast<uint32_t>(Get(&b[36], 4));
    if (flags & kFlagOwd) {
      const auto owd = static_cast<int64_t>(Get(&b[40], 4));
      if (owd >= kMaxOwdNs) return FabricDrop::kMalformed;
      a.one_way_delay = Nanos(owd);
    }
    a.held = HeldFromWire(static_cast<uint16_t>(Get(&b[44], 2)));
    p.ack = a;
  }
  return p;
}

namespace {
// ack_held: the top 2 bits pick the unit, the low 14 count it.
constexpr int64_t kHeldUnitNs[] = {1'000, 8'000, 64'000, 512'000};
constexpr uint16_t kHeldCountBits = 14;
constexpr uint16_t kHeldCountMask = (1u << kHeldCountBits) - 1;
}  // namespace

uint16_t HeldToWire(std::optional<Nanos> held) {
  if (!held) return kHeldUnknown;
  const int64_t ns = std::max<int64_t>(0, held->count());
  for (uint16_t scale = 0; scale < 4; ++scale) {
    const int64_t unit = kHeldUnitNs[scale];
    const int64_t count = ns / unit + (ns % unit >= unit / 2 ? 1 : 0);  // the nearest
    // The last scale's top count is kHeldUnknown.
    if (count <= (scale == 3 ? kHeldCountMask - 1 : kHeldCountMask)) {
      return static_cast<uint16_t>(scale << kHeldCountBits | count);
    }
  }
  return kHeldUnknown;
}

std::optional<Nanos> HeldFromWire(uint16_t wire) {
  if (wire == kHeldUnknown) return std::nullopt;
  return Nanos(kHeldUnitNs[wire >> kHeldCountBits] * (wire & kHeldCountMask));
}

uint32_t FirstSeq(uint64_t epoch) {
  // SplitMix64's finaliser: every bit of the epoch moves every bit of the seq.
  uint64_t z = epoch + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  const auto seq = static_cast<uint32_t>(z ^ (z >> 31));
  return seq == 0 ? 1 : seq;
}

std::optional<int64_t> OneWayDelayNs(std::optional<uint32_t> tx_fabric, std::optional<int64_t> rx_fabric_ns) {
  if (!tx_fabric || !rx_fabric_ns) return std::nullopt;
  const uint32_t d = static_cast<uint32_t>(static_cast<uint64_t>(*rx_fabric_ns)) - *tx_fabric;  // modulo 2^32
  if (d >= (uint32_t{1} << 31)) return std::nullopt;  // negative or implausible: a clock step
  return static_cast<int64_t>(d);
}

}  // namespace lockstep::agent
