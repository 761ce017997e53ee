// Decide(): apply one event, then converge (see decide.h and docs/migration.md).
#include "lockstep/migration/decide.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "internal.h"

namespace lockstep::migration {
namespace internal {

std::string Secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

std::string Num(int64_t v) { return std::to_string(v); }

bool Joined(const Member& m, int64_t g) {
  return m.hb_generation == g && (m.hb_state == "training" || m.hb_state == "done");
}

// Alive members that are not part of the current generation, in registration
// order. Before generation 0: registered spares.
std::vector<const Member*> SparePool(const JobState& s) {
  std::vector<const Member*> pool;
  for (const auto& [id, m] : s.members) {
    if (m.status != MemberStatus::kAlive) continue;
    if (s.phase == Phase::kAssembling ? m.role == Role::kSpare : s.RankOf(id) < 0) pool.push_back(&m);
  }
  std::sort(pool.begin(), pool.end(), [](const Member* a, const Member* b) { return a->seq < b->seq; });
  return pool;
}

// True once a member of the current generation said it ran every step: the
// library sends "done" after a final barrier, so every member has then passed it.
// Also while pausing: a pause step beyond the job's last step is never reached.
bool GenerationDone(const JobState& s) {
  const Generation* g = s.current();
  if (!g || (s.phase != Phase::kRunning && s.phase != Phase::kPausing && s.phase != Phase::kFinished)) return false;
  for (const auto& id : g->members) {
    const Member* m = s.Find(id);
    if (m && m->hb_generation == g->number && m->hb_state == "done") return true;
  }
  return false;
}

void MarkDead(JobState& s, Member& m, const std::string& cause, const std::string& reason, double now, bool fence,
              Actions& a) {
  if (m.status != MemberStatus::kAlive) return;
  if (s.RankOf(m.id) >= 0 && GenerationDone(s)) {
    // The job is over for this member: its exit is not a failure, it is never fenced.
    m.status = MemberStatus::kExited;
    m.gone_cause = "finished";
    m.gone_reason = "finished training (" + reason + ")";
    m.gone_at = now;
    a.push_back(Notice{"member_finished", {{"member", m.id}, {"rank", std::to_string(s.RankOf(m.id))},
                                           {"generation", Num(s.generation())}}});
    return;
  }
  m.status = MemberStatus::kDead;
  m.gone_cause = cause;
  m.gone_reason = reason;
  m.gone_at = now;
  int rank = s.RankOf(m.id);
  a.push_back(Notice{"member_dead",
                     {{"member", m.id}, {"rank", std::to_string(rank)}, {"cause", cause}, {"reason", reason},
                      {"generation", Num(s.generation())}}});
  if (fence && m.pid > 0) {
    m.fenced = true;
    a.push_back(Fence{m.id, m.host, m.pid, reason});
  }
}

void EnterTerminal(JobState& s, const std::string& reason, double now, Actions& a) {
  s.phase = Phase::kTerminal;
  s.terminal_reason = reason;
  for (auto& mig : s.migrations) {
    if (mig.state == "done" || mig.state == "failed") continue;
    mig.state = "failed";
    mig.error = reason;
    mig.done_at = now;
  }
  a.push_back(Notice{"terminal", {{"reason", reason}}});
  a.push_back(Terminal{reason});
}

Migration* FindMigration(JobState& s, const std::string& id) {
  for (auto& m : s.migrations) if (m.id == id) return &m;
  return nullptr;
}

void StartCollecting(JobState& s, const std::string& cause, const std::string& category, double now, Actions& a) {
  Generation& g = *s.current();
  s.transition.kind = "failure";
  s.transition.cause = cause;
  s.transition.category = category;
  s.transition.detected_at = now;
  s.transition.grace_from = now;
  s.transition.pause_at_step = -1;  // a pause in progress becomes a failure; its migrations stay attached
  // Attached are only the migrations this generation's end concerns: the ones
  // pausing now, and the ones that moved their rank into g while g was still
  // joining. A migration done in an earlier generation is never attached again
  // (the ids left over from the pause that formed g once made a failure re-run
  // a finished drain, or set it back to pending: e2e.train-pods-faults).
  s.transition.migration_ids.clear();
  for (const auto& mig : s.migrations) {
    if (mig.state == "pausing" || (mig.state == "reforming" && mig.generation == g.number)) {
      s.transition.migration_ids.push_back(mig.id);
    }
  }
  g.status = "failed";
  g.ended_at = now;
  s.phase = Phase::kCollecting;
  a.push_back(Notice{"failure_detected",
                     {{"generation", Num(g.number)}, {"cause", cause}, {"category", category}}});
}

}  // namespace internal

namespace {

constexpr double kRecentRateWindowS = 1.0;  // the shortest window of the recent step rate
using namespace internal;

// The first dead member of the current generation, if any (finished ones are not).
const Member* DeadInGeneration(const JobState& s) {
  const Generation* g = s.current();
  if (!g) return nullptr;
  for (const auto& id : g->members) {
    const Member* m = s.Find(id);
    if (m && m->status != MemberStatus::kAlive && m->gone_cause != "finished") return m;
  }
  return nullptr;
}

// kRunning: every member of the generation is done (or exited after it was).
void CheckFinished(JobState& s, double now, Actions& a) {
  if (!GenerationDone(s)) return;
  const Generation& g = *s.current();
  int64_t step = 0;
  for (const auto& id : g.members) {
    const Member* m = s.Find(id);
    bool finished = m->status == MemberStatus::kExited && m->gone_cause == "finished";
    if (!finished && !(m->status == MemberStatus::kAlive && m->hb_state == "done")) return;
    step = std::max(step, m->hb_step);
  }
  s.phase = Phase::kFinished;
  if (Generation* cur = s.current(); cur->ended_at == 0) cur->ended_at = now;
  for (auto& mig : s.migrations) {
    if (mig.state == "done" || mig.state == "failed") continue;
    mig.state = "failed";
    mig.error = "the job finished first";
    mig.done_at = now;
  }
  a.push_back(Notice{"job_finished", {{"generation", Num(g.number)}, {"step", Num(step)}}});
}

void ExpireMembers(JobState& s, double now, Actions& a) {
  for (auto& [id, m] : s.members) {
    if (m.status != MemberStatus::kAlive) continue;
    // A member that reported for the generation it last heartbeated in is between
    // groups: freeing its old group can hold the Python GIL (and so its heartbeat
    // thread) for seconds under load. It is judged by the next generation's join
    // deadline instead (and by its pid where the coordinator can check it).
    const bool between_groups = m.report_generation >= 0 && m.report_generation >= m.hb_generation;
    if (between_groups) continue;
    // Nothing waits on a member outside the current generation (a spare in the pool,
    // a rank registered before generation 0 formed), and its heartbeats lag by
    // seconds while every process of a starting job imports torch on the same cores;
    // taking it for dead would cost a pod (Kubernetes) for nothing. It is judged by the
    // join timeout (the time a spare has to join anyway); members of the current
    // generation by the heartbeat timeout.
    const bool in_generation = s.phase != Phase::kAssembling && s.RankOf(id) >= 0;
    // Entering a generation starts a member's heartbeat timeout afresh.
    const double timeout = in_generation ? s.config.heartbeat_timeout_s
                                         : std::max(s.config.heartbeat_timeout_s, s.config.join_timeout_s);
    const double since = in_generation ? std::max(m.last_seen, s.current()->decided_at) : m.last_seen;
    if (now - since > timeout) {
      MarkDead(s, m, "heartbeat_timeout",
               "no heartbeat for " + Secs(now - m.last_seen) + " s (timeout " + Secs(timeout) + " s" +
                   (in_generation ? "" : ", outside the current generation") + ")",
               now, true, a);
    }
  }
  Generation* g = s.current();
  if (s.phase == Phase::kRunning && g && g->status == "joining" && now - g->join_from > s.config.join_timeout_s) {
    for (const auto& id : g->members) {
      Member* m = s.Find(id);
      if (m && m->status == MemberStatus::kAlive && !Joined(*m, g->number)) {
        MarkDead(s, *m, "join_timeout",
                 "did not join generation " + Num(g->number) + " within " + Secs(s.config.join_timeout_s) + " s", now,
                 true, a);
      }
    }
  }
}

void TryFormGeneration0(JobState& s, double now, Actions& a) {
  const int w = s.config.world_size;
  std::vector<const Member*> holders(w, nullptr);
  for (const auto& [id, m] : s.members) {
    if (m.status != MemberStatus::kAlive || m.role != Role::kRank || m.requested_rank < 0) continue;
    const Member*& h = holders[m.requested_rank];
    if (!h || m.seq < h->seq) h = &m;
  }
  for (const Member* h : holders) if (!h) return;
  Generation g;
  g.number = 0;
  for (const Member* h : holders) g.members.push_back(h->id);
  g.store_host = holders[0]->host;
  g.store_port = holders[0]->store_port;
  g.store_prefix = "lockstep/g0/";
  g.kind = "formation";
  g.cause = "formation: " + std::to_string(w) + " ranks registered";
  g.decided_at = g.join_from = now;
  g.status = "joining";
  s.history.push_back(g);
  s.phase = Phase::kRunning;
  a.push_back(Notice{"generation_decided",
                     {{"generation", "0"}, {"kind", "formation"}, {"cause", g.cause}, {"src_rank", "0"},
                      {"resume_step", "0"}, {"store", g.store_host + ":" + std::to_string(g.store_port)}}});
}

void CheckComplete(JobState& s, double now, Actions& a) {
  Generation& g = *s.current();
  if (g.status != "joining" || !GenerationComplete(s)) return;
  int64_t max_step = 0;
  for (const auto& id : g.members) max_step = std::max(max_step, s.Find(id)->hb_step);
  g.status = "complete";
  g.complete_at = now;
  g.rate_anchor_time = g.rate_window_time = now;
  g.rate_anchor_step = g.rate_window_step = max_step;
  g.rate_recent = 0;
  Notice n{"generation_complete", {{"generation", Num(g.number)}, {"kind", g.kind}}};
  if (g.kind != "formation") n.fields.push_back({"recovery_s", Secs(now - g.detected_at)});
  a.push_back(n);
  for (auto& mig : s.migrations) {
    if (mig.state == "reforming" && mig.generation == g.number) {
      mig.state = "done";
      mig.done_at = now;
      a.push_back(Notice{"migration_done",
                         {{"id", mig.id}, {"rank", std::to_string(mig.rank)}, {"kind", mig.kind},
                          {"old_member", mig.old_member}, {"new_member", mig.new_member},
                          {"total_s", Secs(now - mig.requested_at)}}});
    }
  }
}

// Closes the recent-rate window once it spans max(1 s, two heartbeat intervals):
// the rate over it becomes g.rate_recent and a new window starts.
void UpdateRecentRate(Generation& g, int64_t max_step, double interval, double now) {
  if (now - g.rate_window_time < std::max(kRecentRateWindowS, 2 * interval)) return;
  g.rate_recent = max_step > g.rate_window_step
                      ? static_cast<double>(max_step - g.rate_window_step) / (now - g.rate_window_time)
                      : 0;
  g.rate_window_time = now;
  g.rate_window_step = max_step;
}

void TryStartPause(JobState& s, double now, Actions& a) {
  Generation& g = *s.current();
  if (g.status != "complete") return;
  int64_t max_step = 0;
  double interval = 0;
  for (const auto& id : g.members) {
    max_step = std::max(max_step, s.Find(id)->hb_step);
    interval = std::max(interval, s.Find(id)->hb_interval);
  }
  UpdateRecentRate(g, max_step, interval, now);
  size_t pool = SparePool(s).size();
  if (g.members.size() < 2) pool = 0;  // the only rank cannot hand its state to anyone
  std::vector<Migration*> chosen;
  for (auto& mig : s.migrations) {
    if (mig.state != "pending" || chosen.size() >= pool) continue;
    chosen.push_back(&mig);
  }
  if (chosen.empty()) return;
  // How long until every rank has read the directive: its heartbeat step is up to one
  // interval old and the reply carrying the directive up to one interval away.
  const double latency = interval > 0 ? std::min(s.config.heartbeat_timeout_s, 2 * interval)
                                      : s.config.heartbeat_timeout_s;
  if (interval > 0 && now - g.rate_anchor_time < latency) return;  // measure the step rate first
  double rate = g.rate_recent;  // the faster of the recent pace and the pace since completion
  if (now - g.rate_anchor_time > 0.05 && max_step > g.rate_anchor_step) {
    rate = std::max(rate, static_cast<double>(max_step - g.rate_anchor_step) / (now - g.rate_anchor_time));
  }
  bool preemptive = false;
  double requested = now;
  std::string cause;
  Transition t;
  for (Migration* mig : chosen) {
    preemptive = preemptive || mig->kind == "preemptive";
    requested = std::min(requested, mig->requested_at);
    if (!cause.empty()) cause += "; ";
    cause += mig->kind + " migration of rank " + std::to_string(mig->rank) + ": " + mig->reason;
    t.migration_ids.push_back(mig->id);
  }
  t.kind = preemptive ? "preemptive" : "planned";
  t.category = t.kind;
  t.cause = cause;
  t.detected_at = requested;
  t.grace_from = 0;
  t.pause_at_step = PauseStep(max_step, rate, latency, preemptive);
  for (Migration* mig : chosen) {
    mig->state = "pausing";
    mig->pause_at_step = t.pause_at_step;
    mig->generation = g.number;
    a.push_back(Notice{"migration_pausing",
                       {{"id", mig->id}, {"rank", std::to_string(mig->rank)}, {"kind", mig->kind},
                        {"pause_at_step", Num(t.pause_at_step)}, {"max_step", Num(max_step)},
                        {"steps_per_s", Secs(rate)}, {"directive_latency_s", Secs(latency)}}});
  }
  s.transition = t;
  s.phase = Phase::kPausing;
}

void DecideNext(JobState& s, double now, Actions& a);

// kPausing / kCollecting: fence members that do not report in time; decide
// the next generation once every member reported or is dead.
void Collect(JobState& s, double now, Actions& a) {
  Generation& g = *s.current();
  bool all = true;
  for (const auto& id : g.members) {
    Member& m = *s.Find(id);
    if (m.status != MemberStatus::kAlive || m.report_generation == g.number) continue;
    // Never reached g (no heartbeat in it yet): it holds what it reported before g, and
    // it learns from its next plan poll that g ended; nothing to wait for.
    if (s.phase == Phase::kCollecting && m.hb_generation < g.number) continue;
    double deadline;
    if (s.phase == Phase::kPausing) {
      if (s.transition.grace_from == 0) { all = false; continue; }
      deadline = s.transition.grace_from + s.config.report_grace_s;
    } else {
      deadline = s.transition.grace_from + s.config.report_grace_s;
      // Still forming this generation: its rendezvous may take up to the join timeout to fail.
      if (!Joined(m, g.number)) deadline = std::max(deadline, g.join_from + s.config.join_timeout_s);
      // Waiting in a collective of g behind a peer: not hung. The heartbeat reply tells
      // it to abort; a library that cannot abort fails the collective by its timeout.
      if (m.hb_in_collective && m.hb_generation == g.number) {
        deadline = std::max(deadline, s.transition.grace_from + s.config.join_timeout_s);
      }
    }
    if (now > deadline) {
      MarkDead(s, m, "hung",
               "heartbeating but no report for generation " + Num(g.number) + " within " +
                   Secs(now - s.transition.grace_from) + " s",
               now, true, a);
      continue;
    }
    all = false;
  }
  if (s.phase == Phase::kPausing && DeadInGeneration(s)) return;  // becomes a failure on the next pass
  if (all) DecideNext(s, now, a);
}

void DecideNext(JobState& s, double now, Actions& a) {
  const Generation g = *s.current();  // a copy: history grows below
  const int w = static_cast<int>(g.members.size());
  FailureInput in;
  in.generation = g.number;
  in.resume_step = g.resume_step;
  if (g.restored_step >= 0) in.restored_step = g.restored_step;
  in.max_known = g.resume_step;
  in.committed.resize(w);
  in.intact.assign(w, false);
  for (int r = 0; r < w; ++r) {
    const Member& m = *s.Find(g.members[r]);
    in.max_known = std::max(in.max_known, m.hb_step);
    if (m.status == MemberStatus::kAlive) {
      // Its latest word on the state it holds: its report of g, else whichever is newer
      // of its last heartbeat and its report of an earlier generation. A survivor that
      // failed g before it heartbeated in g still holds what it reported for g - 1,
      // which is often ahead of its last heartbeat (steps faster than heartbeats).
      const bool report = m.report_generation == g.number ||
                          (m.report_generation >= 0 && m.report_generation >= m.hb_generation);
      in.committed[r] = report ? m.report_step : m.hb_step;
      in.intact[r] = report ? m.report_intact : m.hb_intact;
    }
  }
  // Leaving: the ranks whose pause is in progress (a reforming migration already
  // moved its rank: its new member stays).
  for (const auto& mid : s.transition.migration_ids) {
    Migration* mig = FindMigration(s, mid);
    if (mig && mig->state == "pausing" && in.committed[mig->rank]) in.leaving.push_back(mig->rank);
  }
  auto pool = SparePool(s);
  // Spares heard from within the heartbeat timeout first (a pool spare is declared
  // dead only after the join timeout: a silent one is the last choice).
  std::stable_partition(pool.begin(), pool.end(), [&](const Member* m) {
    return now - m->last_seen <= s.config.heartbeat_timeout_s;
  });
  in.spares = pool.size();
  in.spares_starting = s.spares_starting;
  const FailureDecision d = OnFailure(in);
  const std::vector<int>& dead = d.dead;
  const std::vector<int>& leaving = in.leaving;
  const SourceChoice* choice = &d.source;
  if (d.kind == FailureDecision::Kind::kTerminal) {
    EnterTerminal(s, d.reason, now, a);
    return;
  }
  s.spares_exhausted = false;
  if (d.kind == FailureDecision::Kind::kWaitForSpare) {
    // Say so when none will ever come: no spare command, or its launches stopped.
    s.spares_exhausted = !s.config.can_launch_spares || s.failed_launches >= s.config.max_failed_launches;
    const std::string reason =
        d.reason + (!s.spares_exhausted ? ""
                    : !s.config.can_launch_spares
                        ? "; no spare will be started (no --spare-command): start one with LOCKSTEP_ROLE=spare"
                        : "; spare launches stopped after " + std::to_string(s.failed_launches) +
                              " failed in a row (check --spare-command)");
    if (s.phase != Phase::kWaitingSpare || s.waiting_reason != reason) {
      a.push_back(Notice{"waiting_for_spare", {{"generation", Num(g.number)}, {"reason", reason}}});
    }
    s.phase = Phase::kWaitingSpare;
    s.waiting_reason = reason;
    return;
  }
  Generation ng;
  ng.number = g.number + 1;
  ng.members = g.members;
  std::string replaced;
  int used = 0;
  auto take = [&](int r) {
    int i = ChooseSpare(pool, r);
    std::string id = pool[i]->id;
    pool.erase(pool.begin() + i);
    replaced += (replaced.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + ": " + ng.members[r] +
                " -> " + id;
    ng.members[r] = id;
    ++used;
    return id;
  };
  for (int r : dead) {
    std::string id = take(r);
    for (const auto& mid : s.transition.migration_ids) {
      Migration* mig = FindMigration(s, mid);
      if (mig && mig->rank == r && (mig->state == "pausing" || mig->state == "reforming")) {
        // The rank to move (or the member it moved to) died first: its migration is this re-form.
        if (mig->state == "pausing") mig->old_member = g.members[r];
        mig->state = "reforming";
        mig->new_member = id;
        mig->generation = ng.number;
      }
    }
  }
  // A migration whose re-form failed before it completed: its new member keeps
  // the rank and the migration completes with the next generation.
  for (const auto& mid : s.transition.migration_ids) {
    Migration* mig = FindMigration(s, mid);
    if (mig && mig->state == "reforming" && mig->generation == g.number) mig->generation = ng.number;
  }
  bool other_survivor = static_cast<int>(leaving.size()) < w - static_cast<int>(dead.size());
  for (const auto& mid : s.transition.migration_ids) {
    Migration* mig = FindMigration(s, mid);
    if (!mig || std::find(leaving.begin(), leaving.end(), mig->rank) == leaving.end()) continue;
    if (pool.empty() || !other_survivor) {
      mig->state = "pending";  // held until a spare registers again
      mig->pause_at_step = -1;
      continue;
    }
    Member& old = *s.Find(g.members[mig->rank]);
    std::string id = take(mig->rank);
    old.status = MemberStatus::kExited;
    old.gone_cause = "replaced";
    old.gone_reason = "replaced by " + id + " at rank " + std::to_string(mig->rank) + " (" + mig->kind +
                      " migration: " + mig->reason + ")";
    old.gone_at = now;
    mig->state = "reforming";
    mig->old_member = old.id;
    mig->new_member = id;
    mig->generation = ng.number;
  }
  // Store and source: the lowest-ranked member carried over from g.
  for (int r = 0; r < w; ++r) {
    if (ng.members[r] != g.members[r]) continue;
    const Member& m = *s.Find(ng.members[r]);
    ng.store_host = m.host;
    ng.store_port = m.store_port;
    break;
  }
  ng.store_prefix = "lockstep/g" + Num(ng.number) + "/";
  ng.src_rank = choice->src_rank;
  ng.resume_step = choice->resume_step;
  ng.kind = s.transition.kind;
  ng.cause = s.transition.cause;
  ng.detected_at = s.transition.detected_at;
  ng.decided_at = ng.join_from = now;
  ng.status = "joining";
  Generation& old = *s.current();
  if (old.status != "failed") old.status = "paused";
  if (old.ended_at == 0) old.ended_at = now;
  s.history.push_back(ng);
  s.phase = Phase::kRunning;
  s.transition.migration_ids.clear();  // the transition is over
  s.waiting_reason.clear();
  if (used > 0) s.refill_active = true;
  a.push_back(Notice{"generation_decided",
                     {{"generation", Num(ng.number)}, {"kind", ng.kind}, {"cause", ng.cause},
                      {"replaced", replaced}, {"src_rank", std::to_string(ng.src_rank)},
                      {"resume_step", Num(ng.resume_step)},
                      {"store", ng.store_host + ":" + std::to_string(ng.store_port)},
                      {"detect_to_decide_s", Secs(now - ng.detected_at)}}});
}

void Step(JobState& s, double now, Actions& a) {
  ExpireMembers(s, now, a);
  switch (s.phase) {
    case Phase::kAssembling:
      TryFormGeneration0(s, now, a);
      break;
    case Phase::kRunning:
    case Phase::kPausing:
      if (const Member* d = DeadInGeneration(s)) {
        int r = s.RankOf(d->id);
        StartCollecting(s, "rank " + std::to_string(r) + " died (member " + d->id + "): " + d->gone_reason,
                        d->gone_cause, now, a);
      } else if (s.phase == Phase::kPausing) {
        // The job may end before the pause step: finished, and the pending
        // migrations fail with "the job finished first" (CheckFinished).
        CheckFinished(s, now, a);
        if (s.phase == Phase::kPausing) Collect(s, now, a);
      } else {
        CheckComplete(s, now, a);
        CheckFinished(s, now, a);
        if (s.phase == Phase::kRunning && !GenerationDone(s)) TryStartPause(s, now, a);
      }
      break;
    case Phase::kCollecting:
      Collect(s, now, a);
      break;
    case Phase::kWaitingSpare:
      DecideNext(s, now, a);
      break;
    case Phase::kTerminal:
    case Phase::kFinished:
      break;
  }
}

void EnsureSpares(JobState& s, Actions& a) {
  if (!s.config.can_launch_spares || s.phase == Phase::kTerminal || s.phase == Phase::kFinished) return;
  if (GenerationDone(s)) return;
  int urgent = 0;
  if (s.phase == Phase::kWaitingSpare) {
    for (const auto& id : s.current()->members) urgent += s.Alive(id) ? 0 : 1;
  }
  for (const auto& mig : s.migrations) urgent += mig.state == "pending" ? 1 : 0;
  int need = std::max(s.refill_active || s.config.spares_from_start ? s.config.spares : 0, urgent);
  int have = static_cast<int>(SparePool(s).size()) + s.spares_starting;
  while (have < need && s.failed_launches < s.config.max_failed_launches) {
    std::string reason = urgent > 0 ? "a rank needs a spare (" + std::to_string(have) + " ready or starting, " +
                                          std::to_string(urgent) + " needed)"
                                    : "refilling the pool to " + std::to_string(s.config.spares);
    a.push_back(RequestSpare{reason});
    ++s.spares_starting;
    ++s.spares_requested_total;
    ++have;
  }
}

void Progress(JobState& s, double now, Actions& a) {
  for (int i = 0; i < 16 && s.phase != Phase::kTerminal && s.phase != Phase::kFinished; ++i) {
    Phase before = s.phase;
    int64_t gen = s.generation();
    std::string status = s.current() ? s.current()->status : "";
    Step(s, now, a);
    if (s.phase == before && s.generation() == gen && (s.current() ? s.current()->status : "") == status) break;
  }
  EnsureSpares(s, a);
}

}  // namespace

Outcome Decide(JobState state, const Event& event, double now) {
  Outcome out;
  Status st = ApplyEvent(state, event, now, out.actions, out.created_id);
  if (!st.ok()) {
    out.status = st;
    out.actions.clear();
    out.state = std::move(state);  // Apply refuses before it changes anything
    return out;
  }
  Progress(state, now, out.actions);
  out.state = std::move(state);
  return out;
}

FailureDecision OnFailure(const FailureInput& in) {
  FailureDecision d;
  const int w = static_cast<int>(in.committed.size());
  std::vector<std::optional<int64_t>> staying(w), holders(w);
  int alive = 0;
  for (int r = 0; r < w; ++r) {
    if (!in.committed[r]) {
      d.dead.push_back(r);
      continue;
    }
    ++alive;
    if (!in.intact.empty() && !in.intact[r]) continue;  // alive, but no state to give
    holders[r] = in.committed[r];
    if (std::find(in.leaving.begin(), in.leaving.end(), r) == in.leaving.end()) staying[r] = in.committed[r];
  }
  auto choice = ChooseSource(staying);
  if (!choice) choice = ChooseSource(holders);
  if (!choice) {
    d.kind = FailureDecision::Kind::kTerminal;
    d.reason = "no replica holds step " + Num(std::max(in.resume_step, in.max_known)) + ": " +
               (alive == 0 ? "every rank of generation " + Num(in.generation) + " is gone"
                           : "none of the " + std::to_string(alive) + " live ranks of generation " +
                                 Num(in.generation) + " holds a verified state (their transfers did not complete)");
    return d;
  }
  // What g's members hold at least: the plan's step, or the older one their state sync
  // went back to (the buddy mirror restores the last mirrored step, and a failure while
  // they replay from it finds them below the plan's step, as it should).
  const int64_t lowest = in.restored_step ? std::min(in.resume_step, *in.restored_step) : in.resume_step;
  if (choice->resume_step < lowest) {
    d.kind = FailureDecision::Kind::kTerminal;
    d.reason = "no replica holds step " + Num(lowest) + ": the survivors of generation " +
               Num(in.generation) + " are at step " + Num(choice->resume_step) + " at most";
    return d;
  }
  d.source = *choice;
  if (in.spares < d.dead.size()) {
    std::string ranks;
    for (int r : d.dead) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    d.kind = FailureDecision::Kind::kWaitForSpare;
    d.reason = "waiting for a spare: rank" + std::string(d.dead.size() > 1 ? "s " : " ") + ranks + " of generation " +
               Num(in.generation) + " need " + std::to_string(d.dead.size()) + ", " + std::to_string(in.spares) +
               " registered, " + std::to_string(in.spares_starting) + " starting";
    return d;
  }
  return d;
}

bool GenerationComplete(const JobState& s) {
  const Generation* g = s.current();
  if (!g) return false;
  for (const auto& id : g->members) {
    const Member* m = s.Find(id);
    if (!m || !Joined(*m, g->number)) return false;
  }
  return true;
}

Result<JobState> NewJob(const JobConfig& c) {
  if (c.job.empty()) return InvalidArgument("the job name is empty (--job)");
  if (c.world_size < 1 || c.world_size > 65536) {
    return InvalidArgument("world size must be between 1 and 65536 (got " + std::to_string(c.world_size) + ")");
  }
  if (!(c.heartbeat_timeout_s > 0)) return InvalidArgument("heartbeat timeout must be > 0 s");
  if (!(c.report_grace_s >= 0)) return InvalidArgument("report grace must be >= 0 s");
  if (!(c.join_timeout_s > 0)) return InvalidArgument("join timeout must be > 0 s");
  if (c.spares < 0) return InvalidArgument("spares must be >= 0 (got " + std::to_string(c.spares) + ")");
  JobState s;
  s.config = c;
  return s;
}

int ChooseSpare(const std::vector<const Member*>& spares, int rank) {
  for (size_t i = 0; i < spares.size(); ++i) {
    if (spares[i]->requested_rank == rank) return static_cast<int>(i);
  }
  return spares.empty() ? -1 : 0;
}

std::optional<SourceChoice> ChooseSource(const std::vector<std::optional<int64_t>>& committed) {
  std::optional<SourceChoice> best;
  for (size_t r = 0; r < committed.size(); ++r) {
    if (!committed[r]) continue;
    if (!best || *committed[r] > best->resume_step) best = SourceChoice{static_cast<int>(r), *committed[r]};
  }
  return best;
}

int64_t PauseStep(int64_t max_step, double steps_per_s, double directive_latency_s, bool preemptive) {
  double in_timeout = std::max(0.0, steps_per_s) * directive_latency_s;
  int64_t margin = preemptive ? 1 + static_cast<int64_t>(std::ceil(in_timeout / 2))
                              : 2 + static_cast<int64_t>(std::ceil(in_timeout));
  return max_step + margin;
}

}  // namespace lockstep::migration