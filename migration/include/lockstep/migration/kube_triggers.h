// What the coordinator does about the job's pods in Kubernetes mode, decided
// from values (docs/migration.md, "Triggers and status in Kubernetes"):
//   DecideTriggers  the migrations that pod annotations ask for
//                   (lockstep.dev/migrate = now | drain | early-warning), and
//                   the members a node-not-ready annotation takes for dead
//   DecidePodUpkeep the label patches that keep lockstep.dev/rank on the pod
//                   holding each rank, and the migrated-away pods to delete
//   RankMoves       every rank that moved to another member, for the job's
//                   status and Events
// Pure: pods and the JobState in, decisions out; no I/O, clocks or logging.
// Thread-compatible.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/api/pod_contract.h"
#include "lockstep/migration/event.h"
#include "lockstep/migration/job_state.h"

namespace lockstep::migration {

// The pod contract's names (lockstep/api/pod_contract.h), shared with the operator.
inline constexpr const char* kMigrateAnnotation = api::kMigrateAnnotation;
inline constexpr const char* kMigrateReasonAnnotation = api::kMigrateReasonAnnotation;
inline constexpr const char* kRankLabel = api::kRankLabel;
inline constexpr const char* kPodRoleLabel = api::kRoleLabel;
inline constexpr const char* kRoleRankValue = api::kRoleRank;
inline constexpr const char* kRoleRetiredValue = api::kRoleRetired;  // a pod whose member was migrated away

// The parts of a pod the decisions read.
struct PodView {
  std::string name;
  std::string uid;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string phase;      // Pending | Running | Succeeded | Failed | Unknown
  bool deleting = false;  // metadata.deletionTimestamp set
};

// One annotation value seen on one pod: each is acted on (or reported) once.
using TriggerKey = std::pair<std::string, std::string>;  // (pod uid, annotation value)

struct TriggerRequest {
  std::string pod;
  std::string pod_uid;
  std::string member;
  std::string value;  // now | drain | early-warning | node-not-ready
  MigrationRequested request;
  // node-not-ready: the member (rank or spare) is dead and fenced instead
  // (request is then unused).
  std::optional<ProcessGone> gone;
};

struct UnknownTrigger {
  std::string pod;
  std::string value;
};

struct TriggerDecision {
  std::vector<TriggerRequest> requests;
  std::vector<UnknownTrigger> unknown;  // to log and count, not to act on
  // The keys to remember for the next call: `requested` less the keys whose
  // pod no longer carries that value (annotating it again asks again), plus
  // the keys of `requests` and `unknown`.
  std::set<TriggerKey> remember;
};

// Rules:
//  - A pod counts when it is the pod (same uid; the name when the member has
//    no uid) of an alive member holding rank r in the current generation, it
//    is not being deleted and its phase is neither Succeeded nor Failed (a
//    pod going away is the pod probe's, as a failure).
//  - Its lockstep.dev/migrate value: "now" (a user asks) and "drain" (the
//    operator: the pod's node is cordoned or draining) ask for a planned
//    migration of r, "early-warning" (the operator: a GPU early warning on the
//    node) for a pre-emptive one; the reason is lockstep.dev/migrate-reason
//    when set, else a sentence naming the pod and the value. Any other value
//    is reported in `unknown`.
//  - "node-not-ready" (the operator: the pod's node is NotReady) is
//    unplanned: the pod's alive member, holding a rank or a spare, is taken
//    for dead and fenced (`gone`: ProcessGone, fence, cause
//    "node_not_ready", the reason annotation or a sentence naming the pod),
//    at once in every phase but terminal and finished, even while a
//    migration of its rank is in flight or before generation 0 formed.
//  - Each (pod uid, value) in `requested` is neither asked for nor reported again.
//  - Nothing is asked while generation 0 is not formed, or for a rank whose
//    migration is pending, pausing or reforming (not remembered: asked once
//    that ends if the pod still holds the rank); nothing once the job is
//    terminal or finished.
TriggerDecision DecideTriggers(const std::vector<PodView>& pods, const JobState& s,
                               const std::set<TriggerKey>& requested);

struct LabelPatch {
  std::string pod;
  std::string pod_uid;
  std::string role;  // the lockstep.dev/role value to set
  int rank = -1;     // lockstep.dev/rank to set; -1: remove the label
};

struct PodDelete {
  std::string pod;
  std::string pod_uid;
  std::string why;
};

struct PodUpkeep {
  std::vector<LabelPatch> labels;
  std::vector<PodDelete> deletes;
};

// Rules:
//  - The pod of an alive member holding rank r in the current generation is
//    labelled role=rank, rank=r (patched when either differs), so that
//    `kubectl get pods -l lockstep.dev/rank=r` finds the holder.
//  - The pod of a member migrated away (exited, cause "replaced") is labelled
//    role=retired without a rank label; once it has left (phase Succeeded or
//    Failed, or `leave_grace_s` after it was replaced) it is deleted, so that
//    a `kubectl drain` of its node can finish.
//  - Pods being deleted are left alone; members are matched to pods as in
//    DecideTriggers (uid, else name).
PodUpkeep DecidePodUpkeep(const std::vector<PodView>& pods, const JobState& s, double now, double leave_grace_s);

// One rank moved to another member by generation `generation` (a failure
// re-form or a planned/pre-emptive migration).
struct RankMove {
  int64_t generation = 0;
  int rank = -1;
  std::string from_member, to_member;
  std::string from_pod, to_pod;  // the members' pods ("" outside Kubernetes)
  std::string kind;              // failure | planned | preemptive
  std::string reason;            // the migration's reason, else the generation's cause
  double start = 0;              // the failure detected or the migration requested
  double complete = 0;           // the new generation complete (0: not yet)
};

// Every move, oldest generation first and by rank within one.
std::vector<RankMove> RankMoves(const JobState& s);

}  // namespace lockstep::migration
