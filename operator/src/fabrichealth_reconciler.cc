#include "lockstep/operator/fabrichealth_reconciler.h"

#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"
#include "lockstep/operator/fabricpolicy_reconciler.h"
#include "lockstep/operator/health_plan.h"

namespace lockstep::op {

using kube::ReconcileResult;

FabricHealthReconciler::FabricHealthReconciler(kube::KubeApi& api, HealthCaches caches, Clock& clock)
    : api_(api), caches_(caches), clock_(clock) {}

ReconcileResult FabricHealthReconciler::Reconcile(const std::string& key) {
  const kube::Gvr& gvr = kube::gvr::kFabricHealths;
  kube::ObjectPtr node = caches_.nodes.Get("", key);
  if (node && kube::FindPath(*node, {"metadata", "deletionTimestamp"})) node = nullptr;
  kube::ObjectPtr health = caches_.healths.Get("", key);
  HealthPlan plan = PlanHealth(key, node ? *node : Json(), PolicyViews(caches_.policies), health ? *health : Json(),
                               kube::FormatRfc3339(clock_.Wall()));

  std::string rv = health ? kube::ResourceVersion(*health) : "";
  switch (plan.action) {
    case HealthPlan::Action::kNone:
      break;
    case HealthPlan::Action::kDelete: {
      Status s = api_.Delete(gvr, "", key, kube::Uid(*health));
      if (!s.ok() && s.code() != ErrorCode::kNotFound) return ReconcileResult::Fail(s.error());
      log::Info("deleted FabricHealth", {{"node", key}});
      return ReconcileResult::Done();
    }
    case HealthPlan::Action::kCreate: {
      auto r = api_.Create(gvr, "", plan.object);
      if (!r.ok()) {
        // AlreadyExists: the cache is behind; the watch event will requeue us.
        if (r.code() == ErrorCode::kAlreadyExists || r.code() == ErrorCode::kConflict) return {.requeue = true};
        return ReconcileResult::Fail(r.error());
      }
      log::Info("created FabricHealth", {{"node", key}});
      // The initial status is written by the reconcile that the new object's
      // watch event queues (behind the keys already waiting): under a burst of
      // new nodes, every node gets its FabricHealth first and its Pending
      // status second, instead of each waiting for two writes per node ahead.
      return ReconcileResult::Done();
    }
    case HealthPlan::Action::kUpdate: {
      auto r = api_.Update(gvr, "", plan.object);
      if (!r.ok()) return ReconcileResult::Fail(r.error());
      rv = kube::ResourceVersion(*r);
      break;
    }
  }
  if (plan.status_patch) {
    Json patch = *plan.status_patch;
    patch["metadata"]["resourceVersion"] = rv;  // never overwrite a newer agent report
    auto r = api_.MergePatch(gvr, "", key, patch, "status");
    if (!r.ok()) return ReconcileResult::Fail(r.error());
  }
  return ReconcileResult::Done();
}

}  // namespace lockstep::op
