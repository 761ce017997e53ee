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
// libnl-route-3) and tests/support/fake_route_actuator.h. The route values
// are in lockstep/agent/route.h, the pure reconcile planning in
// lockstep/agent/route_reconcile.h; ApplyRoutePlan and ReconcileRoutes (below)
// carry a plan out on this port.
// Implementations are used from one thread at a time.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "lockstep/agent/route.h"
#include "lockstep/agent/route_reconcile.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

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

// Deletes, then replaces, then adds. A delete of a route that is already gone
// counts as done. Tries every step; returns the first error (with how many
// others failed).
Status ApplyRoutePlan(RouteActuator& actuator, const RoutePlan& plan);

// List + Interfaces + PlanRoutes + ApplyRoutePlan: what the agent calls on
// start and whenever its desired set changes. Returns the plan it applied.
Result<RoutePlan> ReconcileRoutes(RouteActuator& actuator, std::span<const OwnedRoute> desired);

}  // namespace lockstep::agent
