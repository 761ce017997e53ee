#include "lockstep/agent/ports/route_actuator.h"

namespace lockstep::agent {

Status FlushOwnedRoutes(RouteActuator& actuator) {
  auto routes = actuator.List();
  if (!routes.ok()) return routes.error();
  Status first;
  for (const OwnedRoute& r : *routes) {
    Status s = actuator.Delete(r.destination);
    if (!s.ok() && s.code() != ErrorCode::kNotFound && first.ok()) first = s;
  }
  return first;
}

Status ApplyRoutePlan(RouteActuator& actuator, const RoutePlan& plan) {
  Status first;
  int failed = 0;
  auto note = [&](Status s) {
    if (s.ok()) return;
    if (++failed == 1) first = s;
  };
  for (const Ipv4Prefix& dst : plan.remove) {
    Status s = actuator.Delete(dst);
    if (!s.ok() && s.code() == ErrorCode::kNotFound) continue;  // already gone
    note(s);
  }
  for (const OwnedRoute& r : plan.replace) note(actuator.Replace(r));
  for (const OwnedRoute& r : plan.add) note(actuator.Install(r));
  if (failed > 1) {
    return Error{first.code(),
                 first.error().message + " (and " + std::to_string(failed - 1) + " more route changes failed)"};
  }
  return first;
}

Result<RoutePlan> ReconcileRoutes(RouteActuator& actuator, std::span<const OwnedRoute> desired) {
  auto installed = actuator.List();
  if (!installed.ok()) return installed.error();
  auto interfaces = actuator.Interfaces();
  if (!interfaces.ok()) return interfaces.error();
  auto plan = PlanRoutes(*installed, desired, UpInterfaces(*interfaces));
  if (!plan.ok()) return plan;
  Status s = ApplyRoutePlan(actuator, *plan);
  if (!s.ok()) return s.error();
  return plan;
}

}  // namespace lockstep::agent
