#include "lockstep/migration/state_json.h"

#include <stdexcept>
#include <utility>

namespace lockstep::migration {

// Enums as strings; an unknown value is an error (nlohmann's enum macro would
// silently map it to the first value).
template <typename E, size_t N>
void EnumTo(nlohmann::json& j, E e, const std::pair<E, const char*> (&names)[N]) {
  for (const auto& [v, n] : names) if (v == e) { j = n; return; }
  j = nullptr;
}
template <typename E, size_t N>
void EnumFrom(const nlohmann::json& j, E& e, const std::pair<E, const char*> (&names)[N], const char* what) {
  if (j.is_string()) {
    for (const auto& [v, n] : names) if (j.get<std::string>() == n) { e = v; return; }
  }
  throw std::invalid_argument(std::string("bad ") + what + " " + j.dump());
}

const std::pair<Role, const char*> kRoles[] = {{Role::kRank, "rank"}, {Role::kSpare, "spare"}};
const std::pair<MemberStatus, const char*> kStatuses[] = {
    {MemberStatus::kAlive, "alive"}, {MemberStatus::kDead, "dead"}, {MemberStatus::kExited, "exited"}};
const std::pair<Phase, const char*> kPhases[] = {{Phase::kAssembling, "assembling"},
                                                 {Phase::kRunning, "running"},
                                                 {Phase::kPausing, "pausing"},
                                                 {Phase::kCollecting, "collecting"},
                                                 {Phase::kWaitingSpare, "waiting_for_spare"},
                                                 {Phase::kTerminal, "terminal"},
                                                 {Phase::kFinished, "finished"}};

void to_json(nlohmann::json& j, Role e) { EnumTo(j, e, kRoles); }
void from_json(const nlohmann::json& j, Role& e) { EnumFrom(j, e, kRoles, "role"); }
void to_json(nlohmann::json& j, MemberStatus e) { EnumTo(j, e, kStatuses); }
void from_json(const nlohmann::json& j, MemberStatus& e) { EnumFrom(j, e, kStatuses, "member status"); }
void to_json(nlohmann::json& j, Phase e) { EnumTo(j, e, kPhases); }
void from_json(const nlohmann::json& j, Phase& e) { EnumFrom(j, e, kPhases, "phase"); }

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(JobConfig, job, world_size, heartbeat_timeout_s, report_grace_s,
                                                join_timeout_s, spares, can_launch_spares, spares_from_start,
                                                max_failed_launches)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Member, id, role, requested_rank, host, store_port, pid, pod_name,
                                                pod_uid, seq,
                                                registered_at, last_seen, hb_generation, hb_step, hb_state, hb_at, hb_interval, hb_intact, hb_in_collective,
                                                report_generation, report_step, report_reason, report_error, report_intact, status,
                                                gone_cause, gone_reason, gone_at, fenced, fence_due, fence_result)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Generation, number, members, store_host, store_port, store_prefix,
                                                src_rank, resume_step, restored_step, kind, cause, detected_at, decided_at,
                                                complete_at, join_from, status, ended_at, rate_anchor_time,
                                                rate_anchor_step, rate_window_time, rate_window_step, rate_recent)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Migration, id, rank, kind, reason, state, pause_at_step, requested_at,
                                                done_at, error, old_member, new_member, generation)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Transition, kind, cause, category, detected_at, grace_from,
                                                pause_at_step, migration_ids)

nlohmann::json MigrationToJson(const Migration& m) { return m; }

nlohmann::json StateToJson(const JobState& s) {
  nlohmann::json j;
  j["version"] = 1;
  j["config"] = s.config;
  j["phase"] = s.phase;
  j["generation"] = s.generation();
  nlohmann::json members = nlohmann::json::array();
  for (const auto& [id, m] : s.members) {
    nlohmann::json mj = m;
    mj["rank"] = s.RankOf(id);
    members.push_back(mj);
  }
  j["members"] = members;
  j["next_seq"] = s.next_seq;
  j["history"] = s.history;
  j["transition"] = s.transition;
  j["migrations"] = s.migrations;
  j["next_migration"] = s.next_migration;
  j["spares_starting"] = s.spares_starting;
  j["spares_requested_total"] = s.spares_requested_total;
  j["failed_launches"] = s.failed_launches;
  j["refill_active"] = s.refill_active;
  j["terminal_reason"] = s.terminal_reason;
  j["waiting_reason"] = s.waiting_reason;
  j["spares_exhausted"] = s.spares_exhausted;
  return j;
}

Result<JobState> StateFromJson(const nlohmann::json& j) {
  try {
    if (!j.is_object()) return InvalidArgument("state: not a JSON object");
    if (j.value("version", 0) != 1) return InvalidArgument("state: unknown version (want 1)");
    JobState s;
    s.config = j.at("config").get<JobConfig>();
    s.phase = j.at("phase").get<Phase>();
    for (const auto& mj : j.at("members")) {
      Member m = mj.get<Member>();
      if (m.id.empty()) return InvalidArgument("state: a member without an id");
      s.members[m.id] = m;
    }
    s.next_seq = j.value("next_seq", int64_t{0});
    s.history = j.at("history").get<std::vector<Generation>>();
    s.transition = j.value("transition", Transition{});
    s.migrations = j.value("migrations", std::vector<Migration>{});
    s.next_migration = j.value("next_migration", int64_t{1});
    s.spares_starting = j.value("spares_starting", 0);
    s.spares_requested_total = j.value("spares_requested_total", 0);
    s.failed_launches = j.value("failed_launches", 0);
    s.refill_active = j.value("refill_active", false);
    s.terminal_reason = j.value("terminal_reason", std::string());
    s.waiting_reason = j.value("waiting_reason", std::string());
    s.spares_exhausted = j.value("spares_exhausted", false);
    const int w = s.config.world_size;
    if (w < 1) return InvalidArgument("state: world_size must be >= 1");
    for (const auto& g : s.history) {
      if (static_cast<int>(g.members.size()) != w) {
        return InvalidArgument("state: generation " + std::to_string(g.number) + " has " +
                               std::to_string(g.members.size()) + " members, world size is " + std::to_string(w));
      }
      for (const auto& id : g.members) {
        if (!s.members.count(id)) return InvalidArgument("state: generation " + std::to_string(g.number) +
                                                         " names unknown member " + id);
      }
    }
    for (const auto& [id, m] : s.members) {
      if (m.requested_rank >= w) return InvalidArgument("state: member " + id + " asks for a rank out of range");
    }
    for (const auto& mig : s.migrations) {
      if (mig.rank < 0 || mig.rank >= w) return InvalidArgument("state: migration " + mig.id + " has a bad rank");
    }
    if (s.phase != Phase::kAssembling && s.history.empty()) {
      return InvalidArgument("state: phase " + std::string(PhaseName(s.phase)) + " without a generation");
    }
    return s;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("state: ") + e.what());
  }
}

Result<JobState> StateFromString(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("state: not valid JSON");
  return StateFromJson(j);
}

}  // namespace lockstep::migration
