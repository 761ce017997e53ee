// Endpoint: an IPv4 address and UDP port, the address of a probe peer (the
// ProbeTransport port, lockstep/agent/ports/probe_transport.h, sends to one).
// A plain value: thread-compatible.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "lockstep/common/result.h"

namespace lockstep::agent {

struct Endpoint {
  uint32_t ipv4 = 0;  // host byte order
  uint16_t port = 0;
  // Parses an IPv4 literal and a port.
  static Result<Endpoint> Parse(const std::string& host, int port);
  std::string ToString() const;
  auto operator<=>(const Endpoint&) const = default;
};

}  // namespace lockstep::agent
