// The operator's planned and pre-emptive migration triggers for one
// TrainingJob: which rank pods to annotate lockstep.dev/migrate (the job's
// coordinator moves an annotated pod's rank onto a spare, then deletes the
// pod). Pure: pods, nodes and FabricHealths in, annotations out; the
// reconciler merge-patches them onto the pods. Thread-safe.
//
// Rules (each tested in tests/operator/trainingjob_triggers_test.cc):
//  - Candidates: pods labelled role=rank with a rank below spec.replicas,
//    bound to a node (spec.nodeName), not being deleted and not ended.
//  - drain (spec.migration.onDrain): the pod's node is cordoned
//    (spec.unschedulable, which `kubectl drain` sets first). Reason
//    "node <n> cordoned".
//  - early-warning (spec.migration.onEarlyWarning): the node's FabricHealth
//    (named after the node) reports a GPU at or beyond the job's
//    spec.earlyWarning thresholds: status.gpu.devices[].temperatureCelsius
//    >= gpuTempCelsius, eccSingleBitPerHour >= eccSingleBitPerHour, or an Xid
//    of xids in xids. Where no device carries any of those readings, the
//    agent's verdict decides: condition GPUHealthy False.
//    A pod both cordoned and warned is annotated drain.
//  - node-not-ready (always; unplanned): the pod's node has condition Ready
//    False or Unknown (the node lifecycle controller's verdict on a silent
//    kubelet). Reason "node <n> NotReady (<reason>)". It is annotated on rank
//    pods and on spare pods (the coordinator fences both: a spare there is no
//    spare to move to), even over another lockstep.dev/migrate value (a
//    planned move off a node that stopped answering may never finish), never
//    held back by spares or maxConcurrent (the rank fails either way), and
//    such pods do not count as in flight.
//  - A pod that already carries lockstep.dev/migrate (any value: the user's
//    "now", or ours) is never annotated drain or early-warning again; it
//    counts as in flight.
//  - Spares: at most (available spares - in flight) new annotations and at
//    most (spec.migration.maxConcurrent - in flight), by rank order. A
//    candidate held back is reported (MigrationBlocked True, reason NoSpare
//    or MaxConcurrent, naming the ranks and why they should move); a job
//    with nothing held back has MigrationBlocked False once it had it.
//    Available spares: spare pods Running, not being deleted, on a node
//    that is neither cordoned, NotReady nor warned (by the rules above).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/api/pod_contract.h"
#include "lockstep/api/training_job.h"

namespace lockstep::op {

using Json = nlohmann::json;

inline constexpr const char* kMigrateAnnotation = api::kMigrateAnnotation;  // lockstep/api/pod_contract.h
inline constexpr const char* kMigrateReasonAnnotation = api::kMigrateReasonAnnotation;
inline constexpr const char* kTriggerDrain = api::kMigrateDrain;
inline constexpr const char* kTriggerEarlyWarning = api::kMigrateEarlyWarning;
inline constexpr const char* kTriggerNodeNotReady = api::kMigrateNodeNotReady;
inline constexpr char kMigrationBlockedCondition[] = "MigrationBlocked";

struct MigrationTriggerInput {
  const api::TrainingJobSpec* spec = nullptr;
  std::vector<const Json*> pods;               // the job's pods, every role
  std::map<std::string, const Json*> nodes;    // Nodes by name (those of the pods suffice)
  std::map<std::string, const Json*> healths;  // FabricHealths by name (= node name)
};

struct MigrationTrigger {
  std::string pod;
  int rank = -1;                 // -1: a spare pod (node-not-ready only)
  std::string trigger;           // kTriggerDrain, kTriggerEarlyWarning or kTriggerNodeNotReady
  std::string reason;            // e.g. "node n1 cordoned"
  std::string resource_version;  // of the pod as seen (the patch's precondition)
  bool operator==(const MigrationTrigger&) const = default;
};

struct MigrationTriggerPlan {
  std::vector<MigrationTrigger> annotate;  // by rank
  std::vector<MigrationTrigger> held;      // should move, no spare (or concurrency) left
  std::string blocked_reason;              // NoSpare or MaxConcurrent when held is not empty
  std::string blocked_message;
};

// REQUIRES: in.spec != nullptr.
MigrationTriggerPlan PlanMigrationTriggers(const MigrationTriggerInput& in);

// "" when `node` is Ready (or has no Ready condition yet), else why not:
// "node <n> NotReady (<reason>)". Also the operator's Node watch filter.
std::string NodeNotReadyReason(const Json& node);

// Why the GPU readings in `health` (a FabricHealth) trip `ew`, or "" when
// they do not (see the rules above). Exposed for tests.
std::string EarlyWarningReason(const Json& health, const api::EarlyWarningSpec& ew);

// The merge patch that annotates the pod (with its resourceVersion as the
// precondition, so a pod changed since it was seen is not annotated blind).
Json MigrationAnnotationPatch(const MigrationTrigger& t);

}  // namespace lockstep::op
