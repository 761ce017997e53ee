// Runs one arm of the migration benchmark: starts the training processes
// (torchrun, or the lockstep-coordinator and ranks), applies the fault
// schedule, watches the workload's log, and tears down everything it started
// (every descendant: the driver is a child subreaper). Not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "migration_score.h"

namespace lockstep::bench::migration {

struct Tools {
  std::string python = "/usr/bin/python3";
  std::vector<std::string> torchrun = {"/usr/bin/torchrun"};
  // The torch 2.x arms (torchft, ddp_torch2): scripts/install-torchft's environment
  // ("" if those arms do not run); torchrun there is `python -m torch.distributed.run`.
  std::string python2, lighthouse;
  std::string workload;     // e2e/workloads/migration_train.py
  std::string pylib;        // the folder holding lockstep_train (python/)
  std::string coordinator;  // lockstep-coordinator ("" if not built)
};

// One scheduled fault: what, on which rank, when rank 0 has committed `step`.
// kill/stop are self-injected by the workload when the rank is about to run
// `step`; planned/preemptive are requested by the driver once rank 0 logged
// `step` (checkpoint_restart: SIGTERM to the rank's process, what a drain does
// without Lockstep).
struct ScheduledFault {
  std::string kind;
  int rank = 0;
  int step = 0;
};

struct Options {
  int world_size = 4;
  int steps = 400;
  int hidden = 1024;  // 3 layers: 5.25M parameters
  int batch = 16;
  int checkpoint_every = 100;
  double hang_s = 30;      // checkpoint_restart: the process group timeout a user sets
  double monitor_s = 5;    // torchrun --monitor_interval (its default)
  int max_restarts = 6;
  double heartbeat_timeout_s = 3.0;
  int hot_spares = 1;  // lockstep_hot: spares running from the start, and the pool kept (--spares)
  double arm_timeout_s = 1800;
  double min_step_s = 0;   // the workload pads shorter steps with a sleep (quick mode)
  std::vector<ScheduledFault> faults;
  std::string workdir;
};

struct ArmResult {
  std::string arm;
  bool ran = false;
  std::string note;  // why not run, or what went wrong
  bool completed = false;  // every rank committed the last step and rank 0 wrote the hash
  double total_s = 0;
  std::optional<std::string> sha256;
  std::optional<double> time_to_n_s;  // arm start -> the last step committed (by every rank still there)
  std::vector<int> gone;              // ranks that never came back (torchft: a hung group)
  ArmScore score;
  nlohmann::ordered_json details;  // per-fault extras (migration ids, pause steps, coordinator history)
};

ArmResult RunArm(const Tools& tools, const Options& o, const std::string& arm);

// Makes this process a child subreaper and kills + reaps every descendant.
void BecomeSubreaper();
void KillDescendants();

}  // namespace lockstep::bench::migration
