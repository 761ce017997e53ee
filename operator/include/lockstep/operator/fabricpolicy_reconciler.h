// FabricPolicyReconciler: converges one FabricPolicy (key = its name) into the
// node agent's ConfigMap and DaemonSet (server-side apply, owner references)
// and writes the policy's status (desired/ready/conflicting nodes, Ready /
// Progressing / Degraded conditions, observedGeneration).
//
// Level-based and idempotent: reads only the caches.
//  - Children converge on the live object: an apply is skipped only when the
//    cached child already carries every field we would apply (LiveCovers), so
//    a `kubectl edit` of a field the operator sets is reverted by the next
//    reconcile, and an untouched child costs no write.
//  - The status is written only when it changes, and at most once per policy
//    per `status_interval` (a burst of DaemonSet status changes during a
//    rollout costs one patch per interval: the reconcile returns requeue-after
//    for the rest of the interval and writes the then-current status).
//  - A child the API server rejects as invalid (422) marks the policy Degraded
//    with the spec field named (DescribeRejectedApply) and is retried after
//    `invalid_retry` (or on the next change), not with the per-key fast backoff.
// Thread-safe (distinct keys may be reconciled concurrently).
#pragma once

#include <map>
#include <mutex>

#include "lockstep/common/clock.h"
#include "lockstep/kube/controller.h"
#include "lockstep/kube/event_recorder.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/kube/store.h"
#include "lockstep/operator/agent_objects.h"
#include "lockstep/operator/health_plan.h"

namespace lockstep::op {

struct PolicyCaches {
  const kube::Store& policies;
  const kube::Store& nodes;
  const kube::Store& daemonsets;  // agent DaemonSets in the operator namespace
  const kube::Store& configmaps;  // agent ConfigMaps in the operator namespace
};

struct PolicyReconcilerOptions {
  Nanos status_interval = std::chrono::seconds(1);  // min time between status writes per policy
  Nanos invalid_retry = std::chrono::minutes(5);    // requeue after the API server rejected a child
};

class FabricPolicyReconciler final : public kube::Reconciler {
 public:
  // REQUIRES: everything referenced outlives the reconciler.
  FabricPolicyReconciler(kube::KubeApi& api, PolicyCaches caches, kube::EventRecorder& events, Clock& clock,
                         OperatorSettings settings, PolicyReconcilerOptions options = {});

  kube::ReconcileResult Reconcile(const std::string& key) override;

 private:
  // Applies `obj` unless the cached copy already carries all of it.
  Status ApplyChild(const kube::Gvr& gvr, const kube::Store& cache, Json obj, bool* changed);
  // Time left before `key`'s status may be written again (<= 0: now).
  Nanos StatusWait(const std::string& key);
  void StatusWritten(const std::string& key);

  kube::KubeApi& api_;
  PolicyCaches caches_;
  kube::EventRecorder& events_;
  Clock& clock_;
  const OperatorSettings settings_;
  const PolicyReconcilerOptions options_;
  std::mutex mu_;
  std::map<std::string, MonoTime> last_status_write_;  // GUARDED_BY(mu_)
};

// All policies in the cache as planning views.
std::vector<PolicyView> PolicyViews(const kube::Store& policies);

inline constexpr char kAppliedHashAnnotation[] = "lockstep.dev/applied-hash";

}  // namespace lockstep::op
