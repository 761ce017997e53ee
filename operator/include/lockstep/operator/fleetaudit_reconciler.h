// FleetAuditReconciler: runs PlanFleetAudit (fleetaudit_plan.h) for one
// FleetAudit (key = its name) and carries the plan out: creates the missing
// NodeAudits, at completion patches each reported node's FabricHealth
// status.audit/auditResult (before the FleetAudit's status says Completed, so
// a failed patch is retried), writes the FleetAudit's status, and records the
// plan's Events. While the audit runs, the status is written at most once per
// `status_interval` (a thousand agents reporting within a second cost a
// handful of writes, not a thousand). Thread-safe.
#pragma once

#include <map>
#include <mutex>

#include "lockstep/common/clock.h"
#include "lockstep/kube/controller.h"
#include "lockstep/kube/event_recorder.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/kube/store.h"

namespace lockstep::op {

struct FleetAuditCaches {
  const kube::Store& audits;
  const kube::Store& node_audits;
  const kube::Store& nodes;
  const kube::Store& healths;
};

class FleetAuditReconciler final : public kube::Reconciler {
 public:
  // REQUIRES: everything referenced outlives the reconciler.
  FleetAuditReconciler(kube::KubeApi& api, FleetAuditCaches caches, kube::EventRecorder& events, Clock& clock,
                       Nanos status_interval = std::chrono::seconds(2));

  kube::ReconcileResult Reconcile(const std::string& key) override;

 private:
  kube::KubeApi& api_;
  FleetAuditCaches caches_;
  kube::EventRecorder& events_;
  Clock& clock_;
  const Nanos status_interval_;
  std::mutex mu_;
  std::map<std::string, MonoTime> last_status_write_;  // GUARDED_BY(mu_)
};

}  // namespace lockstep::op
