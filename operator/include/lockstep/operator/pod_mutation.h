// The pod mutation of the admission webhook (webhook_server.h): a rank pod of
// a protected Kubeflow job gets what lockstep_train reads
// (python/lockstep_train/protocol.py settings_from) and the labels the
// operator and the coordinator find ranks by, so users edit nothing but the
// job's annotation. Pure: pod in, JSON Patch (RFC 6902) out. Thread-safe.
//
// Which job a pod belongs to (KubeflowJobOfPod):
//  - TrainJob: label jobset.sigs.k8s.io/jobset-name=<job> (JobSet names the
//    JobSet after the TrainJob) on a pod of the trainer step: label
//    trainer.kubeflow.org/trainjob-ancestor-step=trainer, or (Trainer v2.3
//    puts that label on the Job, not on its pods) jobset.sigs.k8s.io/
//    replicatedjob-name=node, the trainer step's name in Trainer's runtimes
//    (the initializers are dataset-initializer and model-initializer); rank = the batch Job's completion index (label or annotation
//    batch.kubernetes.io/job-completion-index, what Trainer passes as
//    PET_NODE_RANK) plus jobset.sigs.k8s.io/job-index x the Job's
//    parallelism when the TrainingJob has several Jobs (not Trainer's shape).
//  - PyTorchJob: label training.kubeflow.org/job-name=<job>; rank = the
//    container's literal RANK variable the v1 operator sets (master 0, worker
//    i -> i + 1) on every pod of a job with a Master; without it (a Worker-only
//    job: v1.9.3 sets no RANK there) the replica index
//    (training.kubeflow.org/replica-index).
// The patch: labels lockstep.dev/job=<TrainingJob>, role=rank, rank=<r>;
// every container's env gets LOCKSTEP_COORDINATOR (the coordinator Service),
// LOCKSTEP_ROLE=rank, LOCKSTEP_RANK, LOCKSTEP_WORLD_SIZE and LOCKSTEP_POD_NAME /
// LOCKSTEP_POD_UID from the downward API (a variable of those names the pod
// already has is replaced).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/api/training_job.h"
#include "lockstep/operator/kubeflow_plan.h"

namespace lockstep::op {

struct KubeflowPodOwner {
  KubeflowKind kind = KubeflowKind::kTrainJob;
  std::string job;  // the TrainJob's or PyTorchJob's name
};

// The Kubeflow job a pod is a rank of, or nullopt (not a Kubeflow rank pod).
std::optional<KubeflowPodOwner> KubeflowJobOfPod(const Json& pod);

// The pod's rank, or nullopt when its labels do not give one.
std::optional<int> KubeflowPodRank(const Json& pod, KubeflowKind kind);

struct PodMutationTarget {
  std::string training_job;  // the TrainingJob (coordinator "<it>-coordinator")
  std::string ns;
  int replicas = 1;
  std::string coordinator_url = "";  // LOCKSTEP_COORDINATOR; "": the coordinator Service's URL
  api::DetectionSpec detection{};    // LOCKSTEP_HEARTBEAT_INTERVAL, LOCKSTEP_HANG_TIMEOUT where the pod sets none
};

// The JSON Patch for `pod` as rank `rank` of `target`.
Json PodMutationPatch(const Json& pod, const PodMutationTarget& target, int rank);

}  // namespace lockstep::op
