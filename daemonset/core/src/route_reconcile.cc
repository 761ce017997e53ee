#include "lockstep/agent/route_reconcile.h"

#include <algorithm>
#include <map>

namespace lockstep::agent {

std::set<std::string> UpInterfaces(std::span<const InterfaceState> interfaces) {
  std::set<std::string> up;
  for (const InterfaceState& i : interfaces) {
    if (i.up) up.insert(i.name);
  }
  return up;
}

Result<RoutePlan> PlanRoutes(std::span<const OwnedRoute> installed, std::span<const OwnedRoute> desired,
                             const std::set<std::string>& up_interfaces) {
  std::map<Ipv4Prefix, const OwnedRoute*> want;
  for (const OwnedRoute& r : desired) {
    if (!want.emplace(r.destination, &r).second) {
      return InvalidArgument("desired routes name " + r.destination.ToString() + " twice");
    }
  }
  std::map<Ipv4Prefix, const OwnedRoute*> have;
  for (const OwnedRoute& r : installed) have.emplace(r.destination, &r);

  RoutePlan plan;
  for (const auto& [dst, route] : have) {
    auto w = want.find(dst);
    bool wanted_and_usable = w != want.end() && up_interfaces.contains(w->second->nexthop.interface);
    if (!wanted_and_usable) {
      plan.remove.push_back(dst);
    } else if (!(*w->second == *route)) {
      plan.replace.push_back(*w->second);
    }
  }
  for (const auto& [dst, route] : want) {
    if (!up_interfaces.contains(route->nexthop.interface)) {
      plan.blocked.push_back(*route);
    } else if (!have.contains(dst)) {
      plan.add.push_back(*route);
    }
  }
  return plan;
}

}  // namespace lockstep::agent
