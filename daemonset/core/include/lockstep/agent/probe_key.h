// ProbeKey: the shared key that authenticates the agents' probes (clock sync and
// fabric), and the size of the MAC it makes. Its own header so that the MAC
// (keyed_mac.h) and the packet codecs (probe_packet.h, fabric_probe.h) depend on
// it and not on each other. A plain value: thread-compatible.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "lockstep/common/result.h"

namespace lockstep::agent {

inline constexpr size_t kMacSize = 16;  // bytes of truncated HMAC-SHA256 on the wire

// The shared probe key (from probeKeyFile; a Secret in Kubernetes).
class ProbeKey {
 public:
  // REQUIRES nothing; rejects keys shorter than 16 or longer than 4096 bytes.
  static Result<ProbeKey> FromBytes(std::string bytes);
  const std::string& bytes() const { return bytes_; }

 private:
  explicit ProbeKey(std::string b) : bytes_(std::move(b)) {}
  std::string bytes_;
};

}  // namespace lockstep::agent
