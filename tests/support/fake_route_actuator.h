// FakeRouteActuator: an in-memory RouteActuator for tests. `routes` holds the
// owned routes by destination, `foreign` the destinations of other protocols'
// routes (Install and Replace refuse them, as the kernel adapter does),
// `interfaces` what Interfaces() returns. Every successful change is appended
// to `log` ("install <route>", "replace <route>", "delete <prefix>"). When
// `fail` is set every call returns it. Thread-compatible.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lockstep/agent/ports/route_actuator.h"

namespace lockstep::agent {

class FakeRouteActuator final : public RouteActuator {
 public:
  Status Install(const OwnedRoute& route) override {
    if (Status s = Check(route); !s.ok()) return s;
    if (routes.contains(route.destination) || foreign.contains(route.destination)) {
      return Error{ErrorCode::kAlreadyExists, "a route to " + route.destination.ToString() + " exists"};
    }
    routes[route.destination] = route;
    log.push_back("install " + route.ToString());
    return Status::Ok();
  }
  Status Replace(const OwnedRoute& route) override {
    if (Status s = Check(route); !s.ok()) return s;
    if (foreign.contains(route.destination)) {
      return Conflict("the route to " + route.destination.ToString() + " belongs to another protocol");
    }
    routes[route.destination] = route;
    log.push_back("replace " + route.ToString());
    return Status::Ok();
  }
  Status Delete(const Ipv4Prefix& destination) override {
    if (fail) return *fail;
    if (routes.erase(destination) == 0) return NotFound("no owned route to " + destination.ToString());
    log.push_back("delete " + destination.ToString());
    return Status::Ok();
  }
  Result<std::vector<OwnedRoute>> List() override {
    if (fail) return *fail;
    std::vector<OwnedRoute> out;
    for (const auto& [dst, r] : routes) out.push_back(r);
    return out;
  }
  Result<std::vector<InterfaceState>> Interfaces() override {
    if (fail) return *fail;
    return interfaces;
  }
  Result<int> ReleaseUnresolvedNeighbours(const std::string& interface) override {
    if (fail) return *fail;
    released.push_back(interface);
    return 0;
  }

  // Adds an interface (index = position + 1).
  void AddInterface(const std::string& name, bool up) {
    interfaces.push_back({name, static_cast<int>(interfaces.size()) + 1, up});
  }

  std::map<Ipv4Prefix, OwnedRoute> routes;
  std::set<Ipv4Prefix> foreign;
  std::vector<InterfaceState> interfaces;
  std::optional<Error> fail;
  std::vector<std::string> log;
  std::vector<std::string> released;  // interfaces whose unresolved neighbours were released, in order

 private:
  Status Check(const OwnedRoute& route) const {
    if (fail) return *fail;
    for (const InterfaceState& i : interfaces) {
      if (i.name == route.nexthop.interface) return Status::Ok();
    }
    return NotFound("no such interface \"" + route.nexthop.interface + "\"");
  }
};

}  // namespace lockstep::agent
