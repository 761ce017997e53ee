// SockDiagTraffic: the TrafficSource adapter. One NETLINK_SOCK_DIAG dump of
// the network namespace's established IPv4 TCP sockets (the agent runs in
// the host's namespace) with their tcp_info: remote address, socket cookie,
// bytes acked + bytes received. No root needed (the kernel lists every
// socket of the namespace to anyone; ss(8) does the same). Cost: one dump,
// ~tens of microseconds for a few hundred connections; the prober calls it
// once a second. Traffic that is not TCP through the kernel (UDP, RDMA
// queue pairs) is not seen. Used from one thread at a time.
#pragma once

#include <memory>
#include <vector>

#include "lockstep/agent/ports/traffic_source.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

class SockDiagTraffic final : public TrafficSource {
 public:
  static Result<std::unique_ptr<SockDiagTraffic>> Open();
  ~SockDiagTraffic() override;
  SockDiagTraffic(const SockDiagTraffic&) = delete;
  SockDiagTraffic& operator=(const SockDiagTraffic&) = delete;

  Result<std::vector<TcpFlow>> Flows() override;

 private:
  explicit SockDiagTraffic(int fd) : fd_(fd) {}
  int fd_;
  std::vector<char> buffer_;
};

}  // namespace lockstep::agent
