// KubeflowJobReconciler: for one kind of Kubeflow job (TrainJob or
// PyTorchJob; key "<ns>/<name>"), applies PlanKubeflowJob (kubeflow_plan.h):
// server-side apply of the TrainingJob an annotated job owns (skipped when the
// cached one already carries every applied field), its delete when
// protection is turned off, and a Warning Event on the Kubeflow job naming an
// invalid annotation, a name too long or taken (told again only when the job's
// metadata or spec changes: status-only updates are filtered out by the
// wiring). Level-based and idempotent; reads only the caches. An API error
// fails the reconcile (retried with backoff); a TrainJob whose world size is
// not known yet (no numNodes, no JobSet) is looked at again after
// kWaitRetry, or when its JobSet appears. Thread-safe.
#pragma once

#include "lockstep/common/clock.h"
#include "lockstep/kube/controller.h"
#include "lockstep/kube/event_recorder.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/kube/store.h"
#include "lockstep/operator/kubeflow_plan.h"

namespace lockstep::op {

struct KubeflowCaches {
  const kube::Store& kubeflow_jobs;  // the kind's jobs, all namespaces
  const kube::Store& trainingjobs;   // TrainingJobs, all namespaces
  const kube::Store* jobsets;        // JobSets (TrainJob only; null for PyTorchJob)
};

class KubeflowJobReconciler final : public kube::Reconciler {
 public:
  // REQUIRES: everything referenced outlives the reconciler.
  KubeflowJobReconciler(KubeflowKind kind, kube::KubeApi& api, KubeflowCaches caches, kube::EventRecorder& events);

  kube::ReconcileResult Reconcile(const std::string& key) override;

  static constexpr Nanos kWaitRetry = std::chrono::seconds(30);

 private:
  const KubeflowKind kind_;
  kube::KubeApi& api_;
  KubeflowCaches caches_;
  kube::EventRecorder& events_;
};

// The keys ("<ns>/<name>") of the Kubeflow job of `kind` that controls a TrainingJob or JobSet.
std::vector<std::string> KubeflowOwnerKeys(KubeflowKind kind, const Json& child);

}  // namespace lockstep::op
