// FabricHealthReconciler: keeps exactly one FabricHealth per node that a
// FabricPolicy selects (key = node name): creates it when the node appears or
// starts to match, relabels it when its policy changes, deletes it when the
// node goes away or stops matching, and initialises the status fields the
// operator owns (PlanHealth in health_plan.h). Thread-safe.
#pragma once

#include "lockstep/common/clock.h"
#include "lockstep/kube/controller.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/kube/store.h"

namespace lockstep::op {

struct HealthCaches {
  const kube::Store& policies;
  const kube::Store& nodes;
  const kube::Store& healths;
};

class FabricHealthReconciler final : public kube::Reconciler {
 public:
  // REQUIRES: everything referenced outlives the reconciler.
  FabricHealthReconciler(kube::KubeApi& api, HealthCaches caches, Clock& clock);

  kube::ReconcileResult Reconcile(const std::string& key) override;

 private:
  kube::KubeApi& api_;
  HealthCaches caches_;
  Clock& clock_;
};

}  // namespace lockstep::op
