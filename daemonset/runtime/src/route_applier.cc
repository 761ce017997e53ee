#include "lockstep/agent/runtime/route_applier.h"

#include <algorithm>
#include <set>
#include <variant>

#include "lockstep/agent/route_reconcile.h"
#include "lockstep/common/log.h"

namespace lockstep::agent {

RouteApplier::RouteApplier(RouteActuator& actuator, const Clock& clock, const FabricSetup& setup,
                           std::chrono::nanoseconds reconcile_every, metrics::Registry& registry)
    : actuator_(actuator),
      clock_(clock),
      setup_(setup),
      reconcile_every_(reconcile_every),
      route_changes_(registry.Counter("lockstep_fabric_route_changes_total",
                                      "Route changes for pins (pin, unpin, reconcile), by result",
                                      {"action", "result"})) {}

const FabricPeer* RouteApplier::PeerByName(const std::string& name) const {
  for (const FabricPeer& p : setup_.peers) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Result<std::vector<std::pair<std::string, fabric::PathKey>>> RouteApplier::Adopt(MonoTime now) {
  auto listed = actuator_.List();
  if (!listed.ok()) {
    retry_at_ = now + std::chrono::seconds(1);
    return listed.error();
  }
  std::vector<std::pair<std::string, fabric::PathKey>> pins;
  std::vector<OwnedRoute> keep;
  for (const OwnedRoute& r : *listed) {
    if (auto pin = PinFromRoute(setup_, r)) {
      installed_rail_[pin->first] = pin->second.rail;
      // Kept as found (PlanRoutes replaces it only if it differs from what
      // we would install, say an older rto_min).
      if (auto want = PinRoute(setup_, pin->second)) keep.push_back(*want);
      log::Info("adopted a pin from the previous run", {{"route", r.ToString()}});
      pins.push_back(std::move(*pin));
    }
  }
  auto plan = ReconcileRoutes(actuator_, keep);
  if (!plan.ok()) {
    log::Warn("start-up route reconcile failed; retrying later", {{"error", plan.error().message}});
    retry_at_ = now + std::chrono::seconds(1);
  } else {
    for (const auto& d : plan->remove) log::Info("removed a stale owned route", {{"destination", d.ToString()}});
    route_changes_.Inc({"reconcile", "ok"});
  }
  return pins;
}

void RouteApplier::Apply(const std::vector<fabric::RouteAction>& actions) {
  std::set<int> left;  // rails traffic was moved off
  for (const fabric::RouteAction& a : actions) {
    Status s;
    std::string what;
    if (const auto* pin = std::get_if<fabric::PinPeer>(&a)) {
      auto route = PinRoute(setup_, pin->path);
      if (!route) continue;
      what = "pin";
      s = actuator_.Replace(*route);
      if (s.ok()) {
        log::Info("pinned a peer's traffic to a healthy rail", {{"peer", pin->peer}, {"route", route->ToString()}});
        auto [it, fresh] = installed_rail_.try_emplace(pin->peer, pin->path.rail);
        if (!fresh && it->second != pin->path.rail) left.insert(it->second);
        it->second = pin->path.rail;
      }
    } else {
      const auto& unpin = std::get<fabric::UnpinPeer>(a);
      const FabricPeer* peer = PeerByName(unpin.peer);
      if (!peer) continue;
      what = "unpin";
      s = actuator_.Delete({peer->host_address, 32});
      if (!s.ok() && s.code() == ErrorCode::kNotFound) s = Status::Ok();  // already gone: done
      if (s.ok()) {
        log::Info("unpinned a peer: its traffic is back on static ECMP", {{"peer", unpin.peer}});
        if (auto it = installed_rail_.find(unpin.peer); it != installed_rail_.end()) {
          left.insert(it->second);
          installed_rail_.erase(it);
        }
      }
    }
    route_changes_.Inc({what, s.ok() ? "ok" : "error"});
    if (!s.ok()) {
      log::Error("fabric route change failed; the reconcile retries it",
                 {{"action", fabric::ToString(a)}, {"error", s.error().message}});
      retry_at_ = std::min(retry_at_, clock_.Monotonic() + std::chrono::seconds(1));
    }
  }
  for (int rail : left) ReleaseNeighbours(rail, true);
}

void RouteApplier::ReleaseNeighbours(int rail, bool log_released) {
  if (rail < 0 || rail >= static_cast<int>(setup_.rails.size())) return;
  const std::string& name = setup_.rails[rail].name;
  auto released = actuator_.ReleaseUnresolvedNeighbours(name);
  if (!released.ok()) {
    log::Warn("cannot release unresolved neighbours of a failed rail",
              {{"rail", name}, {"error", released.error().message}});
  } else if (*released > 0 && log_released) {
    log::Info("released unresolved neighbours (and the packets queued on them) of a rail traffic left",
              {{"rail", name}, {"entries", std::to_string(*released)}});
  }
}

void RouteApplier::Reconcile(MonoTime now, const std::vector<fabric::PathKey>& pins) {
  auto plan = ReconcileRoutes(actuator_, PinRoutes(setup_, pins));
  route_changes_.Inc({"reconcile", plan.ok() ? "ok" : "error"});
  if (!plan.ok()) log::Warn("fabric route reconcile failed; retrying", {{"error", plan.error().message}});
  retry_at_ = plan.ok() ? MonoTime::max() : now + std::chrono::seconds(1);
  next_reconcile_ = now + reconcile_every_;
}

}  // namespace lockstep::agent
