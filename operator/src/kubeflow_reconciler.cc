#include "lockstep/operator/kubeflow_reconciler.h"

#include "lockstep/api/pod_contract.h"
#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/apply_outcome.h"

namespace lockstep::op {

using kube::ReconcileResult;

std::vector<std::string> KubeflowOwnerKeys(KubeflowKind kind, const Json& child) {
  const Json* refs = kube::FindPath(child, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return {};
  for (const Json& r : *refs) {
    if (r.is_object() && r.value("controller", false) && r.value("kind", "") == KubeflowKindName(kind) &&
        r.value("apiVersion", "") == KubeflowApiVersion(kind)) {
      return {kube::ObjectKey(kube::Namespace(child), r.value("name", ""))};
    }
  }
  return {};
}

KubeflowJobReconciler::KubeflowJobReconciler(KubeflowKind kind, kube::KubeApi& api, KubeflowCaches caches,
                                             kube::EventRecorder& events)
    : kind_(kind), api_(api), caches_(caches), events_(events) {}

ReconcileResult KubeflowJobReconciler::Reconcile(const std::string& key) {
  kube::ObjectPtr job = caches_.kubeflow_jobs.GetByKey(key);
  if (!job) return ReconcileResult::Done();  // its TrainingJob goes with it (garbage collection)
  const std::string ns = kube::Namespace(*job), name = kube::Name(*job);
  kube::ObjectPtr tj = caches_.trainingjobs.Get(ns, name);
  kube::ObjectPtr jobset = caches_.jobsets ? caches_.jobsets->Get(ns, name) : nullptr;
  // Only the JobSet this TrainJob controls.
  if (jobset && !ControlledBy(*jobset, *job)) jobset = nullptr;
  KubeflowJobPlan plan = PlanKubeflowJob(kind_, *job, tj.get(), jobset.get());

  if (!plan.warning.empty()) {
    events_.Warning(*job, plan.warning_reason, plan.warning);
    log::Warn("kubeflow job not protected", {{"kind", KubeflowKindName(kind_)}, {"job", key}, {"error", plan.warning}});
    return ReconcileResult::Done();  // told once; the user's next edit brings it back
  }
  if (plan.delete_training_job) {
    Status s = api_.Delete(kube::gvr::kTrainingJobs, ns, name, kube::Uid(*tj));
    if (!s.ok() && s.code() != ErrorCode::kNotFound) return ReconcileResult::Fail(s.error());
    events_.Normal(
        *job, "ProtectionRemoved",
        "deleted TrainingJob " + name + " (" + std::string(api::kFaultToleranceAnnotation) + " is not enabled)");
    log::Info("deleted trainingjob", {{"kind", KubeflowKindName(kind_)}, {"job", key}});
    return ReconcileResult::Done();
  }
  if (plan.waiting) return ReconcileResult::After(kWaitRetry);
  if (!plan.apply) return ReconcileResult::Done();
  if (tj && LiveCovers(*tj, *plan.apply)) return ReconcileResult::Done();
  auto r = api_.Apply(kube::gvr::kTrainingJobs, ns, name, *plan.apply,
                      {.field_manager = "lockstep-operator", .force = true});
  if (!r.ok()) {
    if (r.code() == ErrorCode::kInvalidArgument) {
      events_.Warning(*job, "TrainingJobRejected",
                      "the API server rejected TrainingJob " + name + ": " + r.error().message);
      return ReconcileResult::Done();
    }
    return ReconcileResult::Fail(r.error());
  }
  if (!tj) {
    events_.Normal(*job, "Protected",
                   "created TrainingJob " + name + " (" + std::to_string((*plan.apply)["spec"]["replicas"].get<int>()) +
                       " ranks, " + std::to_string((*plan.apply)["spec"]["spares"].get<int>()) + " spares)");
  }
  log::Info("applied trainingjob", {{"kind", KubeflowKindName(kind_)}, {"job", key}});
  return ReconcileResult::Done();
}

}  // namespace lockstep::op
