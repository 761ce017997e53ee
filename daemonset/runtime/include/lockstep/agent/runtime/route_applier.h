// RouteApplier: carries the fabric monitor's pin decisions out on the
// RouteActuator (FabricService's route side).
//
//   Adopt():      start-up: lists the owned routes, returns the pins they
//                 stand for (the caller hands them to the monitor), keeps
//                 those and deletes the rest (ReconcileRoutes).
//   Apply():      PinPeer -> Replace(<peer>/32 via the rail's gateway, src
//                 host address, rto_min), UnpinPeer -> Delete. When traffic
//                 leaves a rail, the rail's unresolved neighbours are released
//                 (ports/route_actuator.h). A failed change schedules a retry.
//   Reconcile():  level-based repair against the monitor's pins, every
//                 reconcile_every and one second after a failure.
//
// Route changes are counted by action and result
// (lockstep_fabric_route_changes_total). Thread-compatible (the service
// thread).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/agent/fabric_setup.h"
#include "lockstep/agent/ports/route_actuator.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/common/result.h"
#include "lockstep/fabric/failover_choice.h"

namespace lockstep::agent {

class RouteApplier {
 public:
  // `setup` (its rails and current peers) and the rest must outlive the applier.
  RouteApplier(RouteActuator& actuator, const Clock& clock, const FabricSetup& setup,
               std::chrono::nanoseconds reconcile_every, metrics::Registry& registry);

  // The pins the owned routes found stand for (peer, path), or the error of
  // listing them (retried by the reconcile a second later).
  Result<std::vector<std::pair<std::string, fabric::PathKey>>> Adopt(MonoTime now);
  void Apply(const std::vector<fabric::RouteAction>& actions);
  // Whether a reconcile is due: periodic, or a retry after a failure.
  bool ReconcileDue(MonoTime now) const { return now >= next_reconcile_ || now >= retry_at_; }
  void ScheduleReconcile(MonoTime now) { next_reconcile_ = now + reconcile_every_; }
  // Installs exactly the routes of `pins`; reschedules.
  void Reconcile(MonoTime now, const std::vector<fabric::PathKey>& pins);
  // RouteActuator::ReleaseUnresolvedNeighbours for `rail` (errors logged;
  // what was released too when log_released).
  void ReleaseNeighbours(int rail, bool log_released);
  // A peer that left: its pin is no longer ours to track.
  void Forget(const std::string& peer) { installed_rail_.erase(peer); }

 private:
  const FabricPeer* PeerByName(const std::string& name) const;

  RouteActuator& actuator_;
  const Clock& clock_;
  const FabricSetup& setup_;
  std::chrono::nanoseconds reconcile_every_;
  metrics::Family& route_changes_;
  MonoTime retry_at_ = MonoTime::max();  // after a failed route change
  MonoTime next_reconcile_{};
  std::map<std::string, int> installed_rail_;  // peer -> the rail of the pin in the kernel
};

}  // namespace lockstep::agent
