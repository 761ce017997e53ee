// The pod contract between the operator, the coordinator and the training
// library: the labels and annotations on a job's pods and on the Kubeflow
// jobs it protects, the role values, the environment the library reads
// (python/lockstep_train/protocol.py settings_from) and the coordinator's
// port. One definition for every binary: the operator (trainingjob_*), the
// coordinator's Kubernetes adapters and the pure migration decisions
// (kube_triggers.h) use these names. Header-only (target
// lockstep_api_contract): constants, no code, no dependencies.
#pragma once

namespace lockstep::api {

// Labels on every pod of a protected job (ranks, spares, the coordinator).
inline constexpr char kJobLabel[] = "lockstep.dev/job";    // the TrainingJob's name
inline constexpr char kRoleLabel[] = "lockstep.dev/role";  // one of the kRole* values
inline constexpr char kRankLabel[] = "lockstep.dev/rank";  // the rank a pod holds (decimal)

inline constexpr char kRoleRank[] = "rank";
inline constexpr char kRoleSpare[] = "spare";
inline constexpr char kRoleCoordinator[] = "coordinator";
inline constexpr char kRoleRetired[] = "retired";  // a pod whose rank was migrated away

// Pod annotation asking the coordinator to move the pod's rank, and why.
inline constexpr char kMigrateAnnotation[] = "lockstep.dev/migrate";  // now | drain | early-warning | node-not-ready
inline constexpr char kMigrateReasonAnnotation[] = "lockstep.dev/migrate-reason";
inline constexpr char kMigrateNow[] = "now";
inline constexpr char kMigrateDrain[] = "drain";
inline constexpr char kMigrateEarlyWarning[] = "early-warning";
// Unplanned: the pod's node is NotReady (its kubelet silent); the coordinator
// takes the member for dead and fences its pod (rank and spare pods alike).
inline constexpr char kMigrateNodeNotReady[] = "node-not-ready";

// Annotations on a Kubeflow TrainJob or PyTorchJob that ask for protection.
inline constexpr char kFaultToleranceAnnotation[] = "lockstep.dev/fault-tolerance";  // "enabled" | "disabled"
inline constexpr char kFaultToleranceEnabled[] = "enabled";
inline constexpr char kFaultToleranceDisabled[] = "disabled";
inline constexpr char kSparesAnnotation[] = "lockstep.dev/spares";  // "0".."64", default 1

// The environment the training library reads (lockstep_train settings_from).
inline constexpr char kEnvCoordinator[] = "LOCKSTEP_COORDINATOR";  // http://HOST:PORT
inline constexpr char kEnvRole[] = "LOCKSTEP_ROLE";                // rank | spare
inline constexpr char kEnvRank[] = "LOCKSTEP_RANK";
inline constexpr char kEnvWorldSize[] = "LOCKSTEP_WORLD_SIZE";
inline constexpr char kEnvPodName[] = "LOCKSTEP_POD_NAME";
inline constexpr char kEnvPodUid[] = "LOCKSTEP_POD_UID";
// From the TrainingJob's spec.detection, unless the pod's container sets them itself.
inline constexpr char kEnvHeartbeatInterval[] = "LOCKSTEP_HEARTBEAT_INTERVAL";  // seconds
inline constexpr char kEnvHangTimeout[] = "LOCKSTEP_HANG_TIMEOUT";              // seconds

// The coordinator's HTTP port (its Service "<job>-coordinator" too).
inline constexpr int kCoordinatorPort = 8470;

}  // namespace lockstep::api
