// TrafficSource: the port tiered probing learns the node's traffic from
// (lockstep/agent/peer_activity.h decides which peers are active). Adapter:
// SockDiagTraffic (lockstep/agent/net/sock_diag_traffic.h: the kernel's
// sock_diag dump of established TCP sockets); tests use a fake.
// Used from one thread at a time.
#pragma once

#include <vector>

#include "lockstep/agent/peer_activity.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

class TrafficSource {
 public:
  virtual ~TrafficSource() = default;
  // The node's established IPv4 TCP connections with the bytes each moved.
  virtual Result<std::vector<TcpFlow>> Flows() = 0;
};

}  // namespace lockstep::agent
