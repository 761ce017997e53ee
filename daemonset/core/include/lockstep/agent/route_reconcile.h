// Route reconciliation: the pure planning (values in, decisions out) that
// turns the owned routes found in the kernel and the routes the agent wants
// into adds, replaces and deletes. ApplyRoutePlan and ReconcileRoutes carry a
// plan out on the RouteActuator port (lockstep/agent/ports/route_actuator.h).
//
// Rules (the agent's contract with the data plane):
// - a desired route whose interface is not up is never installed ("blocked"),
//   and an owned route to such an interface is deleted: no owned route is
//   left pointing at a down interface (without it, traffic to that peer
//   falls back to the static ECMP route);
// - an owned route that differs from the desired one (nexthop, source,
//   rto_min) is replaced in place, atomically;
// - an owned route nobody wants any more is deleted.
// On start the agent re-learns its pins: it lists its owned routes and, until
// its probes say otherwise, wants exactly those (ReconcileRoutes(a, *a.List())):
// pins on up interfaces stay, pins on down ones go. Starting from an empty
// desired set instead would drop every pin and send traffic back onto paths
// the previous run had steered away from. On stop it does nothing (working
// routes stay); FlushOwnedRoutes is the explicit cleanup.
// Plain values and functions: thread-compatible.
#pragma once

#include <set>
#include <span>
#include <string>
#include <vector>

#include "lockstep/agent/route.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

struct RoutePlan {
  std::vector<OwnedRoute> add;
  std::vector<OwnedRoute> replace;
  std::vector<Ipv4Prefix> remove;
  std::vector<OwnedRoute> blocked;  // desired, but its interface is not up
  bool empty() const { return add.empty() && replace.empty() && remove.empty(); }
  bool operator==(const RoutePlan&) const = default;
};

// Names of the interfaces that are up.
std::set<std::string> UpInterfaces(std::span<const InterfaceState> interfaces);

// REQUIRES nothing; errors: kInvalidArgument when `desired` names one
// destination twice. Every output list is sorted by destination.
Result<RoutePlan> PlanRoutes(std::span<const OwnedRoute> installed, std::span<const OwnedRoute> desired,
                             const std::set<std::string>& up_interfaces);

}  // namespace lockstep::agent
