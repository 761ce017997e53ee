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

// The step at which every rank pauses for a migration: far enough ahead that
// every rank reads the directive before it gets there. max_step: the highest
// heartbeat step; steps_per_s: the observed rate (0 if unknown).
int64_t PauseStep(int64_t max_step, double steps_per_s, double heartbeat_timeout_s, bool preemptive);

}  // namespace lockstep::migration
