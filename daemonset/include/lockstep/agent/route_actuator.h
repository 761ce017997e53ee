// RouteActuator: the port through which the agent steers this host's
// kernel-routed traffic to a peer. It installs, replaces, deletes and lists
// the routes the agent owns: host routes such as
//   10.0.200.2/32 via 10.0.1.254 dev rail1 src 10.0.200.1 proto 211 rto_min 10ms
// in one routing table (main by default). Owned routes carry the routing
// protocol number kProtoLockstep, so the agent can find them again after a
// restart and never touches anyone else's routes. The vocabulary is routes
// (destination, nexthop, source, rto_min), not paths: the fabric core decides
// paths, the agent maps a path to a nexthop.
// Adapters: NetlinkRouteActuator (lockstep/agent/net/netlink_route_actuator.h,
// libnl-route-3) and tests/support/fake_route_actuator.h. The reconcile
// planning over this port is in lockstep/agent/route_reconcile.h.
// Implementations are used from one thread at a time.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::agent {

// The routing protocol number on every route the agent owns (`ip route show
// proto 211`). Naming it in /etc/iproute2/rt_protos.d/ is optional.
inline constexpr uint8_t kProtoLockstep = 211;
inline constexpr uint32_t kMainTable = 254;  // RT_TABLE_MAIN
// TCP's minimum retransmission timeout on owned routes (Linux default: 200 ms),
// so a stream moved to a healthy rail retransmits soon after the move.
inline constexpr std::chrono::milliseconds kDefaultRtoMin{10};

// An IPv4 prefix, address in host byte order.
struct Ipv4Prefix {
  uint32_t address = 0;
  uint8_t length = 32;
  // "10.0.200.2" (a /32) or "10.0.200.0/24"; host bits must be zero.
  static Result<Ipv4Prefix> Parse(std::string_view text);
  std::string ToString() const;  // "10.0.200.2/32"
  auto operator<=>(const Ipv4Prefix&) const = default;
};

// Parses a dotted IPv4 address into host byte order / formats one.
Result<uint32_t> ParseIpv4(std::string_view text);
std::string FormatIpv4(uint32_t address);

struct Nexthop {
  uint32_t gateway = 0;   // host byte order; 0: on-link, no gateway
  std::string interface;  // e.g. "rail1"
  // RTNH_F_ONLINK: the gateway is reachable on the interface even though no
  // connected subnet covers it (a leaf's /32 gateway, as in netlab).
  bool onlink = false;
  auto operator<=>(const Nexthop&) const = default;
};

// A route the agent owns. Two owned routes with the same destination are the
// same kernel route (one table, priority 0, tos 0).
struct OwnedRoute {
  Ipv4Prefix destination;
  Nexthop nexthop;
  uint32_t source = 0;  // preferred source address; 0: none
  // Locked RTAX_RTO_MIN; 0: none (the kernel default applies).
  std::chrono::milliseconds rto_min = kDefaultRtoMin;
  bool operator==(const OwnedRoute&) const = default;
  // "10.0.200.2/32 via 10.0.1.254 dev rail1 src 10.0.200.1 rto_min 10ms"
  std::string ToString() const;
};

struct InterfaceState {
  std::string name;
  int index = 0;
  bool up = false;  // administratively up and running (carrier/operstate up)
  bool operator==(const InterfaceState&) const = default;
};

class RouteActuator {
 public:
  virtual ~RouteActuator() = default;
  // Adds a route. Errors: kAlreadyExists when a route with that destination
  // (owned or not) is already in the table; kNotFound for an unknown
  // interface; kUnauthorized without CAP_NET_ADMIN.
  virtual Status Install(const OwnedRoute& route) = 0;
  // Atomically replaces the owned route to route.destination (NLM_F_REPLACE:
  // no moment without a route), or adds it if there is none. Errors as
  // Install, plus kConflict when the route there belongs to another protocol
  // (it is never replaced).
  virtual Status Replace(const OwnedRoute& route) = 0;
  // Deletes the owned route to `destination`; never one of another protocol.
  // Errors: kNotFound when there is no owned route to it.
  virtual Status Delete(const Ipv4Prefix& destination) = 0;
  // The owned routes in the table, sorted by destination.
  virtual Result<std::vector<OwnedRoute>> List() = 0;
  // Every interface with its state, sorted by name.
  virtual Result<std::vector<InterfaceState>> Interfaces() = 0;
  // Deletes the unresolved (INCOMPLETE) IPv4 neighbour entries of
  // `interface`, which frees the packets queued on them. Called when traffic
  // has been moved off a rail that lost carrier: a TCP segment sent there
  // before the move waits in its gateway's neighbour queue (no ARP answer
  // can come back, for up to ~3 s), and while its copy is queued Linux will
  // not retransmit it (TCP small queues: "still in host queue"), so the
  // stream stalls on its backed-off RTO long after the route moved
  // (e2e/bench/fabric-trace-carrier.sh). Returns how many were deleted.
  // The default does nothing (adapters without neighbours).
  virtual Result<int> ReleaseUnresolvedNeighbours(const std::string& interface) {
    (void)interface;
    return 0;
  }
};

// Deletes every owned route (explicit cleanup: `lockstep-agent` leaves working
// routes behind when it stops). Returns the first error after trying all.
Status FlushOwnedRoutes(RouteActuator& actuator);

}  // namespace lockstep::agent
