// TrainingJobReconciler: converges one TrainingJob (key "<ns>/<name>") by
// applying PlanTrainingJob (trainingjob_plan.h): server-side apply of the
// coordinator's ServiceAccount, RoleBinding, ConfigMap and Service (skipped
// when the cached live object already carries every applied field), creates
// of the coordinator and rank pods, deletes of pods the plan lets go, and a
// status write (status subresource) only when the status changed.
//
// Level-based and idempotent: reads only the caches. An API error fails the
// reconcile, so the work queue retries the key with backoff; a job whose spec
// is invalid is reported in its status once and not retried (an Event says
// why); a job whose trainJobRef or pytorchJobRef names no Kubeflow job is
// reported once (Event KubeflowJobNotFound) and looked at again after
// kKubeflowRetry or when that job appears; a pod the API server rejects (422) is named in
// the status (Ready False, InvalidTemplate) and retried after kInvalidRetry
// or on the next change, not with the fast backoff. Counts its pod writes in
// lockstep_trainingjob_pods_total{role, action} (action created or deleted).
// Annotates the pods PlanMigrationTriggers picks (a merge patch with the
// pod's resourceVersion: a pod changed since the cache saw it is retried,
// never annotated blind), counted in
// lockstep_trainingjob_migration_triggers_total{trigger} (drain,
// early-warning), with a Normal Event MigrationTriggered on the job.
// Thread-safe (distinct keys may be reconciled
// concurrently).
#pragma once

#include <map>
#include <mutex>

#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/controller.h"
#include "lockstep/kube/event_recorder.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/kube/store.h"
#include "lockstep/operator/trainingjob_plan.h"

namespace lockstep::op {

struct TrainingJobCaches {
  const kube::Store& jobs;             // TrainingJobs, all namespaces
  const kube::Store& pods;             // pods labelled lockstep.dev/job, all namespaces
  const kube::Store& serviceaccounts;  // the four below: labelled lockstep.dev/job and managed by the operator
  const kube::Store& rolebindings;
  const kube::Store& configmaps;
  const kube::Store& services;
  const kube::Store& pdbs;     // PodDisruptionBudgets, labelled like the four above
  const kube::Store& nodes;    // Nodes (cordons)
  const kube::Store& healths;  // FabricHealths (GPU early warnings)
  // Kubeflow jobs for spec.trainJobRef / spec.pytorchJobRef, and the TrainJobs'
  // JobSets; null when the operator does not watch that kind (a reference to
  // it is then reported as not found, with the flag to turn on).
  const kube::Store* trainjobs = nullptr;
  const kube::Store* pytorchjobs = nullptr;
  const kube::Store* jobsets = nullptr;
};

// Which TrainingJobs have pods on which node, kept from the job pods'
// informer events (so a Node or FabricHealth change enqueues only the jobs
// with a pod on that node, without scanning every pod). Thread-safe.
class NodeJobIndex {
 public:
  void Add(const Json& pod);
  void Update(const Json& old_pod, const Json& new_pod);
  void Remove(const Json& pod);
  // The TrainingJob keys ("<ns>/<job>") with a pod bound to `node`.
  std::vector<std::string> JobsOn(const std::string& node) const;

 private:
  mutable std::mutex mu_;
  // node -> job key -> pods of that job on the node. GUARDED_BY(mu_)
  std::map<std::string, std::map<std::string, int>> jobs_;
};

class TrainingJobReconciler final : public kube::Reconciler {
 public:
  // REQUIRES: everything referenced outlives the reconciler.
  TrainingJobReconciler(kube::KubeApi& api, TrainingJobCaches caches, kube::EventRecorder& events, Clock& clock,
                        metrics::Registry& registry, TrainingJobSettings settings);

  kube::ReconcileResult Reconcile(const std::string& key) override;

  static constexpr Nanos kInvalidRetry = std::chrono::minutes(5);
  static constexpr Nanos kKubeflowRetry = std::chrono::minutes(5);

 private:
  Status ApplyChild(const Json& obj, bool* changed);

  kube::KubeApi& api_;
  TrainingJobCaches caches_;
  kube::EventRecorder& events_;
  Clock& clock_;
  metrics::Family& pods_;
  metrics::Family& triggers_;
  const TrainingJobSettings settings_;
};

// The keys of the TrainingJobs in `jobs` that reference the Kubeflow job
// `kubeflow_job` of `kind` (spec.trainJobRef / spec.pytorchJobRef), and the key
// of the TrainingJob of its name (a TrainJob's JobSet shares its name).
std::vector<std::string> TrainingJobKeysForKubeflowJob(const kube::Store& jobs, const char* ref_field,
                                                       const Json& kubeflow_job);

// The TrainingJob key ("<ns>/<job>") of a pod labelled lockstep.dev/job, or none.
std::vector<std::string> TrainingJobKeysForPod(const Json& pod);

}  // namespace lockstep::op
