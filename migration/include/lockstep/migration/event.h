// Event: what Decide() reacts to. Calls of the HTTP API become events (after
// parsing, api.h), and the runtime adds Tick (time passed), ProcessGone (a
// local member's pid exited), SpareProcessExited (a launched spare command
// ended) and FenceChanged (what became of a Fence action). Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "lockstep/migration/job_state.h"

namespace lockstep::migration {

struct Registered {
  std::string member;
  Role role = Role::kSpare;
  int rank = -1;  // -1: any free rank (role rank) / none (spare)
  std::string host;
  int store_port = 0;
  int pid = 0;
  // Kubernetes: the member's pod (LOCKSTEP_POD_NAME/LOCKSTEP_POD_UID from the
  // downward API); empty elsewhere. The pod fencer and probe act on them.
  std::string pod_name;
  std::string pod_uid;
};

struct Heartbeat {
  std::string member;
  int64_t generation = -1;
  int64_t step = 0;
  std::string state;  // training | waiting | done (ran every step; about to exit)
  // False while the member holds no verified copy of the training state (a spare
  // before its first transfer): it is never chosen as a source.
  bool state_intact = true;
  // The training thread is waiting in one of the library's collectives (not
  // hung: it reports once the collective fails or is aborted).
  bool in_collective = false;
  // The step this member's state sync in `generation` left it at (-1: not synced in
  // it yet, or a library that does not say). The buddy mirror restores a step below
  // the plan's resume step; the coordinator then takes this one as the generation's.
  int64_t restored_step = -1;
};

struct Report {
  std::string member;
  int64_t generation = -1;
  int64_t committed_step = 0;
  std::string reason;  // error | pause
  std::string error;
  bool state_intact = true;    // false: committed_step is not backed by a verified state
  int64_t restored_step = -1;  // as in Heartbeat: the step its state sync in `generation` restored
};

// GET /v1/plan: counts as a sign of life.
struct PlanPolled {
  std::string member;
};

struct Tick {};

struct ProcessGone {
  std::string member;
  std::string how;  // "exited with status 1", "killed by signal 9", "gone", "zombie", "pod p was deleted"
  // Fence the member too: its pod (Kubernetes) could restart the container in
  // place and bring a second holder of the rank back. A gone local pid is not.
  bool fence = false;
  std::string cause = "pid_gone";  // the member's gone_cause; "node_not_ready" from a pod annotation
};

struct MigrationRequested {
  int rank = -1;
  std::string kind;  // planned | preemptive
  std::string reason;
};

// A process started for RequestSpare ended: pid as launched (local), or the
// spare pod's name (Kubernetes: pod non-empty, pid 0).
struct SpareProcessExited {
  int pid = 0;
  std::string how;
  std::string pod;
};

// The coordinator restarted from its state file: every member counts as alive
// as of now, and running deadlines start again.
struct Restarted {};

// What the runtime did with a Fence action: deferred it (Kubernetes,
// --keep-restarted-pods: the pod may yet show its container restarted in place),
// did it, or skipped it (the pod stays and runs the member's next process). Only
// the member's fence record changes (Member::fenced, fence_due, fence_result), so
// that a restarted coordinator finds a deferred fence in its state and a skipped
// one is not recorded as done.
struct FenceChanged {
  enum class What { kDeferred, kDone, kSkipped };
  std::string member;
  What what = What::kDone;
  double due = 0;      // kDeferred: when it is done unless the pod shows otherwise first (Unix seconds)
  std::string result;  // for humans: "deferred by the restart grace", "skipped: ...: the pod stays", "done ..."
};

using Event = std::variant<Registered, Heartbeat, Report, PlanPolled, Tick, ProcessGone, MigrationRequested,
                           SpareProcessExited, Restarted, FenceChanged>;

}  // namespace lockstep::migration
