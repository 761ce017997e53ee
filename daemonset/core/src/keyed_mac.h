// KeyedMac: HMAC-SHA256 (RFC 2104), truncated to kMacSize bytes, with the key
// schedule done once: the SHA-256 states after absorbing (key ^ ipad) and
// (key ^ opad) are kept, and each MAC starts from plain copies of them on the
// stack (no allocation; EVP_MD_CTX_copy_ex allocated twice per MAC and took
// ~1.7 us per packet, itself 6x less than HMAC() one-shot). Used by the
// clock-sync probes (PacketCodec) and the fabric probes (FabricProbeCodec).
// Immutable after construction; Compute is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "lockstep/agent/probe_key.h"

namespace lockstep::agent {

class KeyedMac {
 public:
  explicit KeyedMac(const ProbeKey& key);  // aborts on an OpenSSL without SHA-256
  ~KeyedMac();
  KeyedMac(const KeyedMac&) = delete;
  KeyedMac& operator=(const KeyedMac&) = delete;

  // nullopt if OpenSSL fails (then nothing authenticates).
  std::optional<std::array<uint8_t, kMacSize>> Compute(std::span<const uint8_t> data) const;

 private:
  struct States;
  std::unique_ptr<States> states_;
};

}  // namespace lockstep::agent
