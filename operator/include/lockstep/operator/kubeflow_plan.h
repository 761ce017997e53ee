// Protecting Kubeflow jobs: a TrainJob (trainer.kubeflow.org/v1alpha1, run as
// a JobSet) or a PyTorchJob (kubeflow.org/v1) annotated
// lockstep.dev/fault-tolerance=enabled (spares: lockstep.dev/spares, default
// 1) gets a TrainingJob of the same name, owned by the Kubeflow job
// (controller ownerReference: deleting the Kubeflow job garbage-collects it)
// and referencing it (spec.trainJobRef or spec.pytorchJobRef). The
// TrainingJob's coordinator creates spares from the Kubeflow job's own pod
// template, stripped of what would make the job's controllers adopt or count
// them (SpareTemplateFrom). Pure: objects in, decisions out. Thread-safe.
//
// Rules (tests/operator/kubeflow_plan_test.cc):
//  - lockstep.dev/fault-tolerance absent or "disabled": no TrainingJob; one
//    this job owns is deleted (protection turned off). Any other value than
//    "enabled"/"disabled" is an error naming the annotation.
//  - lockstep.dev/spares: a decimal 0..64 (absent: 1); else an error naming it.
//  - The job's name must fit a TrainingJob (at most 45 characters).
//  - A TrainingJob of that name that this job does not control is left alone
//    and reported (NameTaken).
//  - The world size: TrainJob spec.trainer.numNodes, else its JobSet's
//    trainer replicated job (replicas x parallelism); PyTorchJob: the sum of
//    its replica specs' replicas (default 1 each). Unknown yet: wait.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"

namespace lockstep::op {

using Json = nlohmann::json;

enum class KubeflowKind { kTrainJob, kPyTorchJob };

const char* KubeflowApiVersion(KubeflowKind kind);  // "trainer.kubeflow.org/v1alpha1" | "kubeflow.org/v1"
const char* KubeflowKindName(KubeflowKind kind);    // "TrainJob" | "PyTorchJob"
const char* KubeflowRefField(KubeflowKind kind);    // "trainJobRef" | "pytorchJobRef"

// The label JobSet puts on a TrainJob's pods naming the JobSet (= the TrainJob),
// Trainer's label on the trainer step, and the v1 operator's job-name label.
inline constexpr char kJobSetNameLabel[] = "jobset.sigs.k8s.io/jobset-name";
inline constexpr char kTrainerAncestorLabel[] = "trainer.kubeflow.org/trainjob-ancestor-step";
inline constexpr char kTrainerAncestorTrainer[] = "trainer";
inline constexpr char kPyTorchJobNameLabel[] = "training.kubeflow.org/job-name";
// JobSet's label naming a pod's replicated job, and the name Trainer's
// runtimes give the trainer step's replicated job.
inline constexpr char kReplicatedJobNameLabel[] = "jobset.sigs.k8s.io/replicatedjob-name";
inline constexpr char kTrainerReplicatedJob[] = "node";

struct Protection {
  bool enabled = false;
  int spares = 1;
};

// The job's lockstep.dev/* annotations. Errors name the annotation, the value
// and what is accepted.
Result<Protection> ParseProtection(const Json& kubeflow_job);

// The world size (see the rules), or nullopt while unknown. `jobset`: the
// TrainJob's JobSet, or null.
std::optional<int> KubeflowReplicas(KubeflowKind kind, const Json& kubeflow_job, const Json* jobset);

// The pod template of the job's ranks: a PyTorchJob's Worker template (else
// Master's); a TrainJob's from its JobSet (the replicated job labelled
// trainer.kubeflow.org/trainjob-ancestor-step=trainer, else "node"). Null when
// there is none (yet).
const Json* KubeflowPodTemplate(KubeflowKind kind, const Json& kubeflow_job, const Json* jobset);

// A spare's template from a rank's: the same spec (resources, tolerations,
// affinity, image, command) without the labels and annotations of JobSet,
// batch Jobs and Kubeflow (jobset.sigs.k8s.io/*, batch.kubernetes.io/*,
// *.kubeflow.org/*, job-name, controller-uid), owner references, a fixed
// node, hostname or subdomain, and without the rank's environment (RANK,
// PET_NODE_RANK, JOB_COMPLETION_INDEX, and any variable read from a stripped
// label or annotation): a spare has no rank until the coordinator gives it one.
Json SpareTemplateFrom(const Json& pod_template);

// Whether the Kubeflow job has ended: "Succeeded", "Failed" or "" (TrainJob
// conditions Complete/Failed, PyTorchJob Succeeded/Failed, status True).
std::string KubeflowJobEnded(KubeflowKind kind, const Json& kubeflow_job);

// The TrainingJob protecting `kubeflow_job`: same name and namespace, owned
// by it (controller), labelled managed-by lockstep-operator.
Json DesiredTrainingJob(KubeflowKind kind, const Json& kubeflow_job, int replicas, int spares);

struct KubeflowJobPlan {
  std::optional<Json> apply;         // the TrainingJob to apply
  bool delete_training_job = false;  // protection off: delete the TrainingJob it owns
  bool waiting = false;              // world size not known yet (no JobSet): look again later
  std::string warning_reason;        // a Warning Event on the Kubeflow job when set
  std::string warning;
};

// `training_job`: the TrainingJob of the Kubeflow job's name, or null.
KubeflowJobPlan PlanKubeflowJob(KubeflowKind kind, const Json& kubeflow_job, const Json* training_job,
                                const Json* jobset);

// Whether `training_job` has a controller ownerReference to `kubeflow_job` (by uid).
bool ControlledBy(const Json& training_job, const Json& kubeflow_job);

}  // namespace lockstep::op
