// The objects the operator makes for one TrainingJob run from spec.template:
// the ranks' pods, the job's coordinator (ServiceAccount, RoleBinding, the
// ConfigMap with the spare pod manifest, the state ConfigMap, Pod, Service).
// Pure: job in, objects out. Every object is owned by the TrainingJob
// (ownerReference with controller=true; deleting the job garbage-collects
// them) and labelled lockstep.dev/job=<job>. Pure functions; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/api/defaults.h"
#include "lockstep/api/pod_contract.h"
#include "lockstep/api/training_job.h"

namespace lockstep::op {

using Json = nlohmann::json;

// How rank and spare pods reach their coordinator (--coordinator-address):
// kService: the coordinator Service's DNS name (needs cluster DNS and a Service
// proxy); kPodIp: the coordinator pod's IP, for clusters without them (the e2e
// cluster): rank pods are created once the coordinator pod has an IP, and the
// coordinator advertises http://$(POD_IP):8470 to its spares. A coordinator pod
// recreated with a new IP is not followed by the running ranks.
enum class CoordinatorAddress { kService, kPodIp };

// Operator-wide TrainingJob settings from flags.
struct TrainingJobSettings {
  std::string coordinator_image = api::kCoordinatorImage;                 // --coordinator-image
  std::string coordinator_cluster_role = api::kCoordinatorClusterRole;    // --coordinator-cluster-role
  CoordinatorAddress coordinator_address = CoordinatorAddress::kService;  // --coordinator-address
};

// Identity of the owning TrainingJob.
struct JobRef {
  std::string name;
  std::string ns;
  std::string uid;
};

// The pod contract (lockstep/api/pod_contract.h), shared with the coordinator.
inline constexpr int kCoordinatorPort = api::kCoordinatorPort;
inline constexpr const char* kJobLabel = api::kJobLabel;
inline constexpr const char* kRoleLabel = api::kRoleLabel;
inline constexpr const char* kRankLabel = api::kRankLabel;
inline constexpr const char* kRoleRank = api::kRoleRank;
inline constexpr const char* kRoleSpare = api::kRoleSpare;
inline constexpr const char* kRoleCoordinator = api::kRoleCoordinator;
inline constexpr char kSparePodKey[] = "spare-pod.json";  // key of the coordinator ConfigMap
inline constexpr char kCoordinatorConfigDir[] = "/etc/lockstep";

std::string CoordinatorName(const std::string& job);        // "<job>-coordinator" (Pod, Service, SA, RB, ConfigMap)
std::string CoordinatorStateName(const std::string& job);   // "<job>-coordinator-state" (left to the coordinator)
std::string RankPodName(const std::string& job, int rank);  // "<job>-rank-<rank>"
std::string CoordinatorUrl(const JobRef& job);              // "http://<job>-coordinator.<ns>.svc:8470"
std::string CoordinatorPodIpUrl(const std::string& ip);     // "http://<ip>:8470" ("[ip]" for IPv6)
// "<job>-ranks" (the ranks' PodDisruptionBudget).
std::string RankDisruptionBudgetName(const std::string& job);

// The coordinator's argv after the binary name, flags as lockstep-coordinator takes them;
// --advertise-url (what its spare pods get as LOCKSTEP_COORDINATOR) is the Service URL,
// or http://$(POD_IP):8470 with CoordinatorAddress::kPodIp. A Kubeflow job's
// (trainJobRef, pytorchJobRef) adds --keep-restarted-pods.
Json CoordinatorArgs(const JobRef& job, const api::TrainingJobSpec& spec, const TrainingJobSettings& settings = {});
// LOCKSTEP_HEARTBEAT_INTERVAL and LOCKSTEP_HANG_TIMEOUT (seconds) from spec.detection.
Json DetectionEnv(const api::DetectionSpec& detection);
// Appends to the env list `env` (an array) the entries of `add` it does not name itself.
void AddMissingEnv(Json& env, const Json& add);

Json RenderCoordinatorServiceAccount(const JobRef& job);
// Binds settings.coordinator_cluster_role to the coordinator's ServiceAccount in the job's namespace.
Json RenderCoordinatorRoleBinding(const JobRef& job, const TrainingJobSettings& settings);
// The Pod manifest the coordinator creates each spare from (generateName
// "<job>-spare-"): the job's template, role spare, the rank environment
// without LOCKSTEP_RANK. REQUIRES: spec.pod_template.
Json RenderSparePod(const JobRef& job, const api::TrainingJobSpec& spec);
// ConfigMap "<job>-coordinator-state", without data: the coordinator writes
// its state there (the operator applies only the metadata, so it never claims
// or reverts the coordinator's keys); owned by the job, so it goes with it.
Json RenderCoordinatorStateConfigMap(const JobRef& job);
// ConfigMap "<job>-coordinator" with kSparePodKey: RenderSparePod as JSON.
Json RenderCoordinatorConfigMap(const JobRef& job, const api::TrainingJobSpec& spec);
// The coordinator Pod: restartPolicy Always, the ConfigMap at /etc/lockstep,
// preferably not on a node that runs one of the job's ranks.
Json RenderCoordinatorPod(const JobRef& job, const api::TrainingJobSpec& spec, const TrainingJobSettings& settings);
Json RenderCoordinatorService(const JobRef& job);
// Rank `rank`'s pod from spec.template: restartPolicy Never (a failed rank is
// replaced by a spare through the coordinator, never restarted in place).
// LOCKSTEP_COORDINATOR is `coordinator_url`, CoordinatorUrl(job) when empty.
// REQUIRES: spec.pod_template, 0 <= rank < spec.replicas.
Json RenderRankPod(const JobRef& job, const api::TrainingJobSpec& spec, int rank,
                   const std::string& coordinator_url = "");
// The ranks' PodDisruptionBudget (policy/v1) "<job>-ranks": selector
// lockstep.dev/job=<job>, lockstep.dev/role=rank, maxUnavailable 0. An
// eviction (kubectl drain) of a rank pod is refused and retried while the
// coordinator moves the rank onto a spare (the operator annotates the pod
// drain on the cordon), which then deletes the old pod itself.
Json RenderRankDisruptionBudget(const JobRef& job);

// A pod as the planners read it: being deleted, its role and rank labels (the rank as
// a number, -1 when absent or not one), status.phase.
bool IsDeleting(const Json& pod);
std::string PodRole(const Json& pod);
int PodRank(const Json& pod);
std::string PodPhase(const Json& pod);

}  // namespace lockstep::op
