// Decide: the migration coordinator's decisions as one pure function,
//   Decide(state, event, now) -> {state', actions, status}
// following docs/migration.md ("Decisions"). The event is applied, then the
// state converges (level-based, like a reconciler): timeouts, failure
// detection, report collection, the next generation, pauses for migrations,
// completion, spare requests. `status` is not ok when the event is refused
// (unknown member: NotFound -> 404; stale generation, rank held: Conflict ->
// 409; bad values: InvalidArgument -> 400); a refused event changes nothing.
// No I/O, no clock reads: `now` is Unix seconds from the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/common/result.h"
#include "lockstep/migration/action.h"
#include "lockstep/migration/event.h"
#include "lockstep/migration/job_state.h"

namespace lockstep::migration {

struct Outcome {
  JobState state;
  Actions actions;
  Status status;
  std::string created_id;  // MigrationRequested: the new migration's id
};

Outcome Decide(JobState state, const Event& event, double now);

// A fresh job (phase kAssembling). Validates the config.
Result<JobState> NewJob(const JobConfig& config);

// --- helpers (public for tests) ---

// The spare for `rank`: one that registered asking for that rank, else the
// first registered. Candidates in registration order; returns an index or -1.
int ChooseSpare(const std::vector<const Member*>& spares, int rank);

struct SourceChoice {
  int src_rank = -1;
  int64_t resume_step = 0;
};
// The survivor with the highest committed step, lowest rank on a tie.
// `committed[r]` is rank r's committed step, or nullopt when rank r is not a
// survivor. nullopt when there is no survivor.
std::optional<SourceChoice> ChooseSource(const std::vector<std::optional<int64_t>>& committed);

// What follows the end of generation g (a failure, a second failure during a
// re-form, or a pause): form g+1, wait for spares, or give up.
struct FailureInput {
  int64_t generation = 0;   // g
  int64_t resume_step = 0;  // g's resume step: the step counter never goes below it
  // The step g's members restored, when one of them said so: below resume_step where
  // the plan's step was not kept anywhere and every rank went back to an older copy
  // of it (the buddy mirror). The step counter never goes below this one instead.
  std::optional<int64_t> restored_step;
  int64_t max_known = 0;    // the highest step any member of g heartbeated (for messages)
  // committed[r]: rank r's committed step when it survives g, nullopt when dead.
  std::vector<std::optional<int64_t>> committed;
  // intact[r]: rank r holds a verified state at committed[r] (empty: every survivor
  // does). A survivor without one (a spare whose transfer did not complete) needs
  // no spare but can never be the source.
  std::vector<bool> intact;
  std::vector<int> leaving;  // ranks being moved (planned/pre-emptive); not the source if avoidable
  size_t spares = 0;         // registered spares ready now
  int spares_starting = 0;
};
struct FailureDecision {
  enum class Kind { kForm, kWaitForSpare, kTerminal };
  Kind kind = Kind::kForm;
  SourceChoice source;       // kForm
  std::vector<int> dead;     // ranks that need a spare
  std::string reason;        // kWaitForSpare, kTerminal
};
// The source is chosen among the survivors that hold an intact state only; when
// none holds g's resume step (or the lower step its members restored) the decision
// is kTerminal ("no replica holds step s").
FailureDecision OnFailure(const FailureInput& in);

// True when every member of the current generation heartbeated "training"
// (or "done") in it: the re-form is complete.
bool GenerationComplete(const JobState& s);

// The step at which every rank pauses for a migration: far enough ahead that
// every rank reads the directive before it gets there: max_step + 2 + the
// steps run in `directive_latency_s` (pre-emptive: + 1 + half of them).
// max_step: the highest heartbeat step; steps_per_s: the observed rate (0 if
// unknown); directive_latency_s: two heartbeat intervals of the slowest member
// (as observed; the heartbeat timeout when unknown, and at most that).
int64_t PauseStep(int64_t max_step, double steps_per_s, double directive_latency_s, bool preemptive);

}  // namespace lockstep::migration
