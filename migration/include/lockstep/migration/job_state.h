// JobState: everything the migration coordinator knows about one training job
// (members, the current generation and its history, the transition being
// collected, migrations, spares requested). A plain value: the pure Decide()
// (decide.h) maps (JobState, Event, now) to the next JobState, and the whole
// value is what the state file and GET /v1/state hold (state_json.h).
// Times are Unix seconds (CLOCK_REALTIME) passed in by the caller; nothing here
// reads a clock. Thread-compatible (a value type).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lockstep::migration {

struct JobConfig {
  std::string job;
  int world_size = 1;
  double heartbeat_timeout_s = 3.0;  // a member not heard from for this long is dead
  double report_grace_s = 2.0;       // after a failure, time to report before "hung"
  double join_timeout_s = 20.0;      // time for a new generation to complete
  int spares = 0;                    // K: pool size kept ready once a spare was used
  bool can_launch_spares = false;    // a --spare-command exists
  bool spares_from_start = false;    // keep K ready from the start (Kubernetes spare pods), not once one was used
  int max_failed_launches = 3;       // spare launches that never registered, in a row
};

enum class Role { kRank, kSpare };
enum class MemberStatus { kAlive, kDead, kExited };

struct Member {
  std::string id;
  Role role = Role::kSpare;
  int requested_rank = -1;  // rank asked for at register (-1: none)
  std::string host;
  int store_port = 0;
  int pid = 0;
  std::string pod_name;  // Kubernetes: the member's pod and its uid (empty: not in a pod)
  std::string pod_uid;
  int64_t seq = 0;  // registration order (first registered spare is used first)
  double registered_at = 0;
  double last_seen = 0;  // any call from the member (heartbeat, report, plan poll)
  // Last heartbeat.
  int64_t hb_generation = -1;
  int64_t hb_step = 0;
  std::string hb_state;  // "training" | "waiting" | "done" | "" (none yet)
  double hb_at = 0;        // time of the last heartbeat
  double hb_interval = 0;  // recent heartbeat interval (a decaying max; 0: unknown)
  bool hb_intact = true;         // holds a verified state (see Heartbeat::state_intact)
  bool hb_in_collective = false; // waiting in a library collective
  // Last report (it counts for the generation it names only).
  int64_t report_generation = -1;
  int64_t report_step = 0;
  std::string report_reason;  // "error" | "pause"
  std::string report_error;
  bool report_intact = true;
  MemberStatus status = MemberStatus::kAlive;
  std::string gone_cause;   // dead: pid_gone | heartbeat_timeout | hung | join_timeout; exited: replaced | finished
  std::string gone_reason;  // a sentence for humans
  double gone_at = 0;
  // Its process was fenced (pod deleted, SIGKILL sent). Decide() sets it with the
  // Fence action; the runtime's FenceChanged clears it while the fence is deferred
  // (fence_due: when it is done, Unix seconds; 0: none pending) and when it was
  // skipped (the pod stays and runs the member's next process: nothing was fenced).
  bool fenced = false;
  double fence_due = 0;
  std::string fence_result;  // deferred | done | skipped: why (empty: no fence, or a fence done at once)
};

// One generation: an immutable assignment rank -> member plus a store.
struct Generation {
  int64_t number = 0;
  std::vector<std::string> members;  // index = rank
  std::string store_host;
  int store_port = 0;
  std::string store_prefix;
  int src_rank = 0;
  int64_t resume_step = 0;
  // The step its members' state sync restored, as they said in a heartbeat or report
  // (-1: none said yet). Below resume_step with the buddy mirror (every rank goes back
  // to the last mirrored step); a failure of this generation is judged against it.
  int64_t restored_step = -1;
  std::string kind;   // formation | failure | planned | preemptive
  std::string cause;  // why it was formed, for humans
  double detected_at = 0;  // the failure (or migration request) that led to it
  double decided_at = 0;
  double complete_at = 0;  // every member heartbeated training in this generation
  double join_from = 0;    // start of the join timeout (decided_at, or a restart)
  std::string status;      // joining | complete | failed | paused
  double ended_at = 0;
  // Step rate observed since completion (for the pause step rule), and over the
  // last completed window of at least a second: a job that sped up after its
  // first steps (FSDP2's first steps are slow) pauses by its recent pace.
  double rate_anchor_time = 0;
  int64_t rate_anchor_step = 0;
  double rate_window_time = 0;
  int64_t rate_window_step = 0;
  double rate_recent = 0;  // steps/s over the last completed window; 0 before one
};

struct Migration {
  std::string id;
  int rank = -1;
  std::string kind;    // planned | preemptive
  std::string reason;
  std::string state;   // pending | pausing | reforming | done | failed
  int64_t pause_at_step = -1;
  double requested_at = 0;
  double done_at = 0;
  std::string error;
  std::string old_member, new_member;
  int64_t generation = -1;  // the generation that moved the rank
};

enum class Phase {
  kAssembling,    // generation 0 not formed yet
  kRunning,       // the current generation is joining or complete
  kPausing,       // a pause directive is out for a planned/pre-emptive migration
  kCollecting,    // the current generation failed: collecting reports
  kWaitingSpare,  // reports are in but a dead rank has no spare
  kTerminal,      // the job cannot continue (terminal_reason)
  kFinished,      // every member of the current generation ran every step ("done")
};

// The end of the current generation being collected (kPausing, kCollecting,
// kWaitingSpare).
struct Transition {
  std::string kind;      // failure | planned | preemptive
  std::string cause;     // for humans: "rank 2 died (member m2): process exited"
  std::string category;  // metrics label: report | pid_gone | heartbeat_timeout | hung | join_timeout | planned | preemptive
  double detected_at = 0;
  double grace_from = 0;  // start of the report grace (0 while pausing and nobody reported)
  int64_t pause_at_step = -1;
  std::vector<std::string> migration_ids;
};

struct JobState {
  JobConfig config;
  Phase phase = Phase::kAssembling;
  std::map<std::string, Member> members;
  int64_t next_seq = 0;
  std::vector<Generation> history;  // history.back() is the current generation
  Transition transition;            // meaningful in kPausing/kCollecting/kWaitingSpare
  std::vector<Migration> migrations;
  int64_t next_migration = 1;
  int spares_starting = 0;   // launched, not registered yet
  int spares_requested_total = 0;
  int failed_launches = 0;   // in a row
  bool refill_active = false;  // a generation used spares: keep K ready
  std::string terminal_reason;
  std::string waiting_reason;  // kWaitingSpare: what is missing
  bool spares_exhausted = false;  // kWaitingSpare and no spare will be started (no command, or launches stopped)

  // -1 before generation 0.
  int64_t generation() const { return history.empty() ? -1 : history.back().number; }
  const Generation* current() const { return history.empty() ? nullptr : &history.back(); }
  Generation* current() { return history.empty() ? nullptr : &history.back(); }
  // The member's rank in the current generation, or -1.
  int RankOf(const std::string& member) const;
  const Member* Find(const std::string& member) const;
  Member* Find(const std::string& member);
  bool Alive(const std::string& member) const;
};

const char* PhaseName(Phase p);
const char* RoleName(Role r);
const char* MemberStatusName(MemberStatus s);

}  // namespace lockstep::migration
