#include "lockstep/agent/endpoint.h"

#include <arpa/inet.h>

namespace lockstep::agent {

Result<Endpoint> Endpoint::Parse(const std::string& host, int port) {
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) != 1) {
    return InvalidArgument("\"" + host + "\" is not an IPv4 address");
  }
  if (port < 0 || port > 65535) return InvalidArgument("port must be between 0 and 65535 (got " + std::to_string(port) + ")");
  return Endpoint{ntohl(a.s_addr), static_cast<uint16_t>(port)};
}

std::string Endpoint::ToString() const {
  in_addr a{htonl(ipv4)};
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(port);
}

}  // namespace lockstep::agent
