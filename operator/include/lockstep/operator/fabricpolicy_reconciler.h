// FabricPolicyReconciler: converges one FabricPolicy (key = its name) into the
// node agent's ConfigMap and DaemonSet (server-side apply, owner references)
// and writes the policy's status (desired/ready/conflicting nodes, Ready /
// Progressing / Degraded conditions, observedGeneration).
//
// Level-based and idempotent: reads only the caches; an apply is skipped when
// the cached child already carries the hash of what would be applied, and the
// status is written only when it changes. Thread-safe (distinct keys may be
// reconciled concurrently).
#pragma once

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

class FabricPolicyReconciler final : public kube::Reconciler {
 public:
  // REQUIRES: everything referenced outlives the reconciler.
  FabricPolicyReconciler(kube::KubeApi& api, PolicyCaches caches, kube::EventRecorder& events, Clock& clock,
                         OperatorSettings settings);

  kube::ReconcileResult Reconcile(const std::string& key) override;

 private:
  // Applies `obj` unless the cached copy already has its hash. Returns an
  // error message or "".
  std::string ApplyChild(const kube::Gvr& gvr, const kube::Store& cache, Json obj, bool* changed);

  kube::KubeApi& api_;
  PolicyCaches caches_;
  kube::EventRecorder& events_;
  Clock& clock_;
  const OperatorSettings settings_;
};

// All policies in the cache as planning views.
std::vector<PolicyView> PolicyViews(const kube::Store& policies);

inline constexpr char kAppliedHashAnnotation[] = "lockstep.dev/applied-hash";

}  // namespace lockstep::op
