// The migration benchmark's scoring (pure): from what the training processes
// logged (e2e/workloads/migration_train.py: committed steps with rank, step,
// pid and wall time) and the faults of the schedule (when, which rank, and when
// each was detected), one arm's numbers: detection latency, fault -> next
// full-size committed step, committed steps computed again, restarts of healthy
// ranks, steady-state step time. All times are wall-clock seconds (time.time()
// of processes on one host). Values only; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::bench::migration {

// One committed step: rank `rank` (process `pid`) applied step `step` at `t`.
// `participants`: how many ranks' batches the step averaged, where the workload
// says (torchft: the replica groups in the step's quorum; -1: every rank).
struct Commit {
  int rank = 0, step = 0, pid = 0;
  double t = 0;
  int participants = -1;
};

// A line of the workload's log that is not a commit (start, fault, error, end,
// lib, checkpoint, resume); `json` is the whole line.
struct Event {
  std::string event;
  int rank = -1, step = -1, pid = 0;
  double t = 0;
  nlohmann::json json;
};

struct WorkloadLog {
  std::vector<Commit> commits;  // in file order
  std::vector<Event> events;
  int bad_lines = 0;  // not JSON (interleaved writes, warnings)
};

// The workload's JSON lines; other lines are counted in bad_lines.
WorkloadLog ParseWorkloadLog(const std::string& text);

// Highest step index committed by any rank at or before t (-1: none).
int HighestCommittedAt(const std::vector<Commit>& commits, double t);

// kill (SIGKILL), stop (SIGSTOP: a hang), planned, preemptive.
struct Fault {
  std::string kind;
  int rank = 0;
  double t = 0;  // when it struck (the workload's fault event; the driver's signal or request)
  // The first step index every rank must commit again after it (none: the
  // highest step committed by any rank at `t`, plus one).
  std::optional<int> target_step;
  std::optional<double> detected_t;  // when the job noticed it (unplanned faults)
  std::string note;                  // e.g. what became of a requested migration
  std::optional<double> paused_t;    // a Lockstep move: when every rank had committed the step it paused after
};

struct FaultScore {
  Fault fault;
  int target_step = 0;
  std::optional<double> detect_s;   // detected_t - t
  std::optional<double> recover_s;  // t -> every rank committed a step >= target_step
  std::optional<double> resume_s;   // t -> any rank committed a step >= target_step (the job went on)
  std::optional<double> stall_s;    // paused_t -> every rank committed a step >= target_step
};

struct Stat {
  std::optional<double> p50, max;
};
Stat Summarize(std::vector<double> v);

// A time window [from, to) (wall-clock seconds).
using Window = std::pair<double, double>;

// When a spare process was starting: from its `launch` line (the workload's first,
// before `import torch`) to its first `waiting` or `plan_received` library event (in
// the pool, or given a rank at once); a spare that never got there: to the end of the
// log. Importing torch and building the model cost seconds of CPU on the ranks' cores.
std::vector<Window> SpareStartWindows(const WorkloadLog& log);

struct ArmScore {
  int world_size = 4;
  std::vector<FaultScore> faults;
  Stat detect_s, recover_s, resume_s;
  int lost_steps = 0;        // committed steps computed again (max over ranks)
  int healthy_restarts = 0;  // pid changes of a rank not explained by a fault on that rank
  std::optional<double> step_s;  // median rank-0 step time outside fault and `busy` windows
  std::optional<double> step_mean_s;  // their mean (periodic costs, e.g. fingerprint checks, count)
  int steady_steps = 0;          // how many rank-0 step intervals that median is over
  int final_step = -1;           // highest step committed by every rank
  bool step_went_back = false;   // some rank committed a step it had committed before
  // Per-rank batches that no committed step averaged: for each step index committed,
  // world_size minus its participants (torchft drops the batches of the groups
  // outside a step's quorum). Times the batch size: samples skipped.
  int skipped_batches = 0;
};

// REQUIRES: faults in time order. `busy`: further windows left out of step_s
// (spare starts, SpareStartWindows). `gone`: ranks that never came back (torchft:
// a hung group that no one restarts): recover_s of a fault on another rank does not
// wait for them once they commit nothing after it; a fault on a gone rank has none.
ArmScore ScoreArm(const WorkloadLog& log, std::vector<Fault> faults, int world_size,
                  const std::vector<Window>& busy = {}, const std::vector<int>& gone = {});

// (arm / reference - 1) * 100; none if either is missing.
std::optional<double> OverheadPercent(const std::optional<double>& arm, const std::optional<double>& reference);

// The interleaved steady-state comparison: per round, one fault-free run of each
// arm (reference and lockstep, back to back, ABBA order); the overhead is the
// median of the rounds' OverheadPercent. Rounds missing either time are skipped.
struct Round {
  std::optional<double> reference_s, arm_s;
};
struct RoundsScore {
  std::vector<std::optional<double>> round_percent;  // per round
  std::optional<double> median_percent;
  // The mean of the rounds' percents and its 95% confidence interval (Student's t,
  // rounds - 1 degrees of freedom; none below two rounds). An interval that holds 0
  // cannot tell the overhead from noise: it is "not resolvable below" its half-width.
  std::optional<double> mean_percent, ci95_low, ci95_high, ci95_half_width;
  bool resolvable = false;
};
RoundsScore ScoreRounds(const std::vector<Round>& rounds);

nlohmann::ordered_json ToJson(const Stat& s);

}  // namespace lockstep::bench::migration
