// NetlinkRouteActuator: the RouteActuator adapter (lockstep/agent/ports/route_actuator.h)
// over rtnetlink, through libnl-route-3 (why libnl: docs/architecture.md,
// "Route actuator"). It acts in the network namespace it was opened in (the
// netlink socket stays bound to it), on one routing table, and only on routes
// of protocol kProtoLockstep: deletes carry the protocol so the kernel matches
// only ours, Install never overwrites (NLM_F_EXCL), Replace refuses a route of
// another protocol and swaps ours atomically (NLM_F_REPLACE). rto_min is set
// as a locked RTAX_RTO_MIN metric (the kernel ignores an unlocked one), like
// `ip route ... rto_min 10ms`. Kernel errors come back with the kernel's
// extended-ack text; EPERM says CAP_NET_ADMIN is needed.
// Cost: Install and Delete are one or two requests each (an interface lookup
// and the change); Replace also dumps the IPv4 routes once to check who owns
// the destination (O(routes); small on a host); List and Interfaces one dump.
// Thread-compatible: one thread at a time.
#pragma once

#include <memory>

#include "lockstep/agent/ports/route_actuator.h"

struct nl_sock;

namespace lockstep::agent {

class NetlinkRouteActuator final : public RouteActuator {
 public:
  struct Options {
    uint32_t table = kMainTable;
  };
  // Opens a NETLINK_ROUTE socket in the caller's network namespace.
  static Result<std::unique_ptr<NetlinkRouteActuator>> Open(Options options);
  ~NetlinkRouteActuator() override;
  NetlinkRouteActuator(const NetlinkRouteActuator&) = delete;
  NetlinkRouteActuator& operator=(const NetlinkRouteActuator&) = delete;

  Status Install(const OwnedRoute& route) override;
  Status Replace(const OwnedRoute& route) override;
  Status Delete(const Ipv4Prefix& destination) override;
  Result<std::vector<OwnedRoute>> List() override;
  Result<std::vector<InterfaceState>> Interfaces() override;
  Result<int> ReleaseUnresolvedNeighbours(const std::string& interface) override;

  // The kernel's errno and extended-ack message of the last failed request
  // (set by the socket's error callback). Public for that callback only.
  struct KernelError {
    int error = 0;  // positive errno
    std::string message;
  };

 private:
  NetlinkRouteActuator(nl_sock* sock, Options options);
  Status Add(const OwnedRoute& route, int flags, const char* verb);
  Error ToError(int nl_error, const std::string& what) const;

  nl_sock* sock_;
  Options options_;
  KernelError last_;
};

}  // namespace lockstep::agent
