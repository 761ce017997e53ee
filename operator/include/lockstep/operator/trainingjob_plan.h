// What to do for one TrainingJob, from the job and the pods observed: the
// objects to apply, the pods to create and delete, and the status. Pure:
// the reconciler applies the plan on the KubeApi port. Thread-safe.
//
// Rules (each tested in tests/operator/trainingjob_plan_test.cc):
//  - spec.template: the coordinator's ServiceAccount, RoleBinding, ConfigMap,
//    state ConfigMap (metadata only) and Service are applied; its Pod is
//    created when missing (and deleted when it ended, to be created again:
//    the coordinator keeps its state in "<job>-coordinator-state", so a new
//    one continues).
//  - Rank pods "<job>-rank-<i>" are created when missing only before the job
//    has started (phase unset or Pending); once it started, a gone rank is
//    the coordinator's to move onto a spare, never recreated here. Before the
//    start, rank pods at or above spec.replicas are deleted.
//  - Phase: Succeeded when every rank has a pod that succeeded; Failed when a
//    rank pod failed and no spare can take it (spec.spares 0 or
//    migration.onFailure false); Running when every rank has a Running pod;
//    Degraded when it had started, or a rank pod failed and a spare may take
//    it; else Pending. Succeeded and Failed are final: nothing is created and
//    the spares are deleted.
//  - spec.trainJobRef / spec.pytorchJobRef (a Kubeflow job; kubeflow_plan.h):
//    the same coordinator objects, with the spare pod manifest made from the
//    Kubeflow job's pod template (SpareTemplateFrom); no rank pods (the
//    Kubeflow controller makes them; the admission webhook labels them as
//    ranks). The Kubeflow job missing: Ready False, KubeflowJobNotFound,
//    naming the field, nothing created (kubeflow_missing: the reconciler
//    tells once and looks again slowly). A TrainJob whose JobSet is not there
//    yet: Pending, WaitingForJobSet. The Kubeflow job ended (Complete or
//    Succeeded, Failed): the phase follows it (final).
//  - A spec that does not parse: the status names the field, nothing is created.
//    A pod the API server rejects (a template the CRD's schema lets through):
//    Ready False, reason InvalidTemplate, naming the field (DescribeRejectedPod).
//  - The ranks' PodDisruptionBudget (maxUnavailable 0) is applied while the
//    job runs, so a drain cannot evict a rank pod before its rank moved.
//  - Migration triggers (drain, early-warning) while the job is neither
//    Succeeded nor Failed: PlanMigrationTriggers; the MigrationBlocked
//    condition says when a rank should move and no spare can take it.
//  - Status: phase, readyReplicas (distinct ranks with a Running pod),
//    availableSpares (Running spare pods), observedGeneration and the Ready
//    condition are the operator's; other keys (the coordinator's migrations)
//    are kept as found.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/operator/kubeflow_plan.h"
#include "lockstep/operator/trainingjob_objects.h"
#include "lockstep/operator/trainingjob_triggers.h"

namespace lockstep::op {

struct TrainingJobInput {
  const Json* job = nullptr;      // the TrainingJob
  std::vector<const Json*> pods;  // pods in its namespace labelled lockstep.dev/job=<job>
  std::string now;                // RFC 3339, for condition transitions
  // For the migration triggers (trainingjob_triggers.h): Nodes and
  // FabricHealths by name; those of the pods' nodes suffice.
  std::map<std::string, const Json*> nodes, healths;
  // For spec.trainJobRef / spec.pytorchJobRef: the Kubeflow job (null: not
  // found) and a TrainJob's JobSet (null: none yet).
  const Json* kubeflow_job = nullptr;
  const Json* jobset = nullptr;
};

struct TrainingJobPlan {
  // ServiceAccount, RoleBinding, ConfigMap, state ConfigMap, Service,
  // PodDisruptionBudget (in this order).
  std::vector<Json> apply;
  std::vector<Json> create_pods;           // the coordinator, then missing rank pods
  std::vector<std::string> delete_pods;    // pod names in the job's namespace
  std::vector<MigrationTrigger> annotate;  // pods to annotate lockstep.dev/migrate
  Json status = Json::object();            // the whole status to write (when it differs from the job's)
  std::string spec_error;                  // the spec did not parse (field named)
  std::string kubeflow_missing;            // the referenced Kubeflow job is not there (the message)
};

// REQUIRES: in.job != nullptr.
TrainingJobPlan PlanTrainingJob(const TrainingJobInput& in, const TrainingJobSettings& settings);

// What to tell the user when the API server rejected (422) one of the job's
// pods: for a rank pod the TrainingJob field (the pod's field path under
// spec.template), then the server's words and what to do.
std::string DescribeRejectedPod(const Json& pod, const std::string& server_message);

// `status` with Ready False, reason InvalidTemplate, `message`.
Json WithRejectedPod(const Json& status, const std::string& message, int64_t generation, const std::string& now);

}  // namespace lockstep::op
