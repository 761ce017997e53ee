// ApplyEvent(): one event's direct effect on the JobState (registration,
// heartbeat, report, ...), or the error that refuses it. Decide() (decide.cc)
// then converges the state.
#include <algorithm>
#include <type_traits>

#include "internal.h"

namespace lockstep::migration::internal {
namespace {

std::string Who(const Member& m) {
  return "member " + m.id + " was " + (m.status == MemberStatus::kDead ? "declared dead" : "replaced") + ": " +
         m.gone_reason;
}

// A member of the current generation said which step its state sync in it restored:
// the generation's restored step is the lowest one said (every member restores the
// same step: the sync is all or nothing).
void NoteRestored(JobState& s, const std::string& member, int64_t generation, int64_t step) {
  Generation* g = s.current();
  if (step < 0 || !g || generation != g->number || s.RankOf(member) < 0) return;
  g->restored_step = g->restored_step < 0 ? step : std::min(g->restored_step, step);
}

}  // namespace

Status ApplyEvent(JobState& s, const Event& event, double now, Actions& a, std::string& created) {
  return std::visit(
      [&](const auto& e) -> Status {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, Registered>) {
          if (Member* m = s.Find(e.member)) {
            if (m->status != MemberStatus::kAlive) {
              return Conflict(Who(*m) + "; a fenced or replaced process must not rejoin: start it with a new member id");
            }
            m->host = e.host;
            m->store_port = e.store_port;
            m->pid = e.pid;
            m->pod_name = e.pod_name;
            m->pod_uid = e.pod_uid;
            m->last_seen = now;
            return Status::Ok();
          }
          const int w = s.config.world_size;
          if (e.rank >= w) {
            return InvalidArgument("rank " + std::to_string(e.rank) + " is out of range: job " + s.config.job +
                                   " has ranks 0.." + std::to_string(w - 1));
          }
          Member m;
          m.id = e.member;
          m.role = e.role;
          m.host = e.host;
          m.store_port = e.store_port;
          m.pid = e.pid;
          m.pod_name = e.pod_name;
          m.pod_uid = e.pod_uid;
          m.requested_rank = e.rank;
          m.hb_intact = m.report_intact = e.role == Role::kRank;  // a spare holds no state until a transfer
          if (e.role == Role::kRank && s.phase == Phase::kAssembling) {
            std::vector<std::string> held(w);
            for (const auto& [id, o] : s.members) {
              if (o.status == MemberStatus::kAlive && o.role == Role::kRank && o.requested_rank >= 0) {
                held[o.requested_rank] = id;
              }
            }
            if (e.rank >= 0 && !held[e.rank].empty()) {
              return Conflict("rank " + std::to_string(e.rank) + " is held by live member " + held[e.rank]);
            }
            if (e.rank < 0) {
              auto it = std::find(held.begin(), held.end(), std::string());
              if (it == held.end()) {
                return Conflict("all " + std::to_string(w) + " ranks are held by live members; register as a spare");
              }
              m.requested_rank = static_cast<int>(it - held.begin());
            }
          } else if (e.role == Role::kRank && e.rank >= 0 && s.current()) {
            const std::string& holder = s.current()->members[e.rank];
            // Also once the job finished (its holder exited "finished"): nothing is
            // left to train, the process is told to exit like every spare.
            if (s.Alive(holder) || s.phase == Phase::kFinished) {
              // A process asking for a rank that a live member holds: its own earlier
              // process was replaced and it came back (a container restarted in place,
              // a pod recreated at its index by a Job). It joins as a spare of the job
              // instead of failing (a refusal would crash-loop it, and its controller
              // would count every crash), so its pod runs on and refills the pool.
              m.role = Role::kSpare;
              m.requested_rank = -1;
              m.hb_intact = m.report_intact = false;
              a.push_back(Notice{"registered_as_spare",
                                 {{"member", e.member},
                                  {"rank", std::to_string(e.rank)},
                                  {"holder", holder},
                                  {"generation", Num(s.generation())}}});
            }
          }
          if (e.role == Role::kSpare) {  // a launched spare (not a rank that came back as one)
            s.spares_starting = std::max(0, s.spares_starting - 1);
            s.failed_launches = 0;
          }
          m.seq = s.next_seq++;
          m.registered_at = m.last_seen = now;
          s.members[m.id] = m;
          return Status::Ok();
        } else if constexpr (std::is_same_v<E, Heartbeat>) {
          Member* m = s.Find(e.member);
          if (!m) return NotFound("unknown member " + e.member + ": register first (POST /v1/register)");
          if (m->status != MemberStatus::kAlive) return Status::Ok();  // the reply says exit
          m->last_seen = now;
          if (m->hb_at > 0 && now > m->hb_at) m->hb_interval = std::max(now - m->hb_at, 0.75 * m->hb_interval);
          m->hb_at = now;
          // A generation that does not exist (yet): a sign of life, nothing more.
          if (e.generation > s.generation()) return Status::Ok();
          m->hb_generation = e.generation;
          m->hb_step = e.step;
          m->hb_state = e.state;
          m->hb_intact = e.state_intact;
          m->hb_in_collective = e.in_collective;
          NoteRestored(s, e.member, e.generation, e.restored_step);
          return Status::Ok();
        } else if constexpr (std::is_same_v<E, Report>) {
          Member* m = s.Find(e.member);
          if (!m) return NotFound("unknown member " + e.member + ": register first (POST /v1/register)");
          if (m->status != MemberStatus::kAlive) return Conflict(Who(*m));
          if (e.generation != s.generation()) {
            return Conflict("stale generation " + Num(e.generation) + ": the current generation is " +
                            Num(s.generation()));
          }
          int r = s.RankOf(e.member);
          if (r < 0) return Conflict("member " + e.member + " is not part of generation " + Num(s.generation()));
          m->last_seen = now;
          m->report_generation = e.generation;
          m->report_step = e.committed_step;
          m->report_reason = e.reason;
          m->report_error = e.error;
          m->report_intact = e.state_intact;
          NoteRestored(s, e.member, e.generation, e.restored_step);
          std::string who = "rank " + std::to_string(r) + " (member " + e.member + ")";
          if (s.phase == Phase::kRunning || (s.phase == Phase::kPausing && e.reason == "error")) {
            StartCollecting(s,
                            e.reason == "error" ? who + " reported an error: " + (e.error.empty() ? "?" : e.error)
                                                : who + " reported a pause that was not asked for",
                            "report", now, a);
          } else if (s.phase == Phase::kPausing && s.transition.grace_from == 0) {
            s.transition.grace_from = now;
          }
          return Status::Ok();
        } else if constexpr (std::is_same_v<E, PlanPolled>) {
          Member* m = s.Find(e.member);
          if (!m) return NotFound("unknown member " + e.member + ": register first (POST /v1/register)");
          if (m->status == MemberStatus::kAlive) m->last_seen = now;
          return Status::Ok();
        } else if constexpr (std::is_same_v<E, Tick>) {
          return Status::Ok();
        } else if constexpr (std::is_same_v<E, ProcessGone>) {
          Member* m = s.Find(e.member);
          if (!m) return NotFound("unknown member " + e.member);
          std::string reason = m->pod_name.empty() ? "process " + std::to_string(m->pid) + " " + e.how : e.how;
          MarkDead(s, *m, e.cause.empty() ? "pid_gone" : e.cause, reason, now, e.fence, a);
          return Status::Ok();
        } else if constexpr (std::is_same_v<E, MigrationRequested>) {
          const int w = s.config.world_size;
          if (e.rank < 0 || e.rank >= w) {
            return Conflict("rank " + std::to_string(e.rank) + " is unknown: job " + s.config.job + " has ranks 0.." +
                            std::to_string(w - 1));
          }
          if (s.phase == Phase::kTerminal) return Conflict("the job has failed: " + s.terminal_reason);
          if (s.phase == Phase::kFinished) return Conflict("the job has finished");
          if (s.phase == Phase::kAssembling) return Conflict("generation 0 is not formed yet; retry once it is");
          for (const auto& mig : s.migrations) {
            if (mig.rank == e.rank && (mig.state == "pending" || mig.state == "pausing" || mig.state == "reforming")) {
              return Conflict("a migration of rank " + std::to_string(e.rank) + " is already " + mig.state + " (" +
                              mig.id + ")");
            }
          }
          Migration mig;
          mig.id = "mig-" + Num(s.next_migration++);
          mig.rank = e.rank;
          mig.kind = e.kind;
          mig.reason = e.reason;
          mig.state = "pending";
          mig.requested_at = now;
          s.migrations.push_back(mig);
          created = mig.id;
          a.push_back(Notice{"migration_requested",
                             {{"id", mig.id}, {"rank", std::to_string(e.rank)}, {"kind", e.kind}, {"reason", e.reason}}});
          return Status::Ok();
        } else if constexpr (std::is_same_v<E, SpareProcessExited>) {
          for (const auto& [id, m] : s.members) {
            if (e.pod.empty() ? m.pid == e.pid : m.pod_name == e.pod) return Status::Ok();  // it registered
          }
          s.spares_starting = std::max(0, s.spares_starting - 1);
          ++s.failed_launches;
          a.push_back(Notice{"spare_launch_failed", {{"pid", std::to_string(e.pid)}, {"how", e.how},
                                                    {"failed_in_a_row", std::to_string(s.failed_launches)}}});
          if (s.failed_launches == s.config.max_failed_launches) {
            a.push_back(Notice{"spare_launches_stopped",
                               {{"reason", "the spare command exited " + std::to_string(s.failed_launches) +
                                               " times in a row without registering; no more are started until a "
                                               "spare registers (check --spare-command)"}}});
          }
          return Status::Ok();
        } else if constexpr (std::is_same_v<E, Restarted>) {
          for (auto& [id, m] : s.members) {
            if (m.status != MemberStatus::kAlive) continue;
            m.last_seen = now;
            m.hb_at = m.hb_interval = 0;  // an interval spanning the outage means nothing
          }
          if (Generation* g = s.current()) g->join_from = now;
          if (s.transition.grace_from != 0) s.transition.grace_from = now;
          return Status::Ok();
        } else if constexpr (std::is_same_v<E, FenceChanged>) {
          Member* m = s.Find(e.member);
          if (!m) return NotFound("fence of unknown member " + e.member);
          m->fenced = e.what == FenceChanged::What::kDone;
          m->fence_due = e.what == FenceChanged::What::kDeferred ? e.due : 0;
          m->fence_result = e.result;
          return Status::Ok();
        }
      },
      event);
}

}  // namespace lockstep::migration::internal
