#include "lockstep/migration/kube_triggers.h"

namespace lockstep::migration {
namespace {

bool Matches(const Member& m, const PodView& p) {
  if (m.pod_name.empty() && m.pod_uid.empty()) return false;
  return m.pod_uid.empty() ? m.pod_name == p.name : m.pod_uid == p.uid;
}

// The member whose pod `p` is, or nullptr.
const Member* MemberOf(const JobState& s, const PodView& p) {
  for (const auto& [id, m] : s.members) {
    if (Matches(m, p)) return &m;
  }
  return nullptr;
}

std::string Get(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

bool Active(const Migration& mig) {
  return mig.state == "pending" || mig.state == "pausing" || mig.state == "reforming";
}

// kind and default reason for a known value; kind "" for an unknown one.
std::pair<std::string, std::string> Meaning(const std::string& value, const std::string& pod) {
  if (value == api::kMigrateNow) return {"planned", "pod " + pod + " annotated " + kMigrateAnnotation + "=now"};
  if (value == api::kMigrateDrain) return {"planned", "the node of pod " + pod + " is cordoned or draining"};
  if (value == api::kMigrateEarlyWarning) return {"preemptive", "GPU early warning on the node of pod " + pod};
  return {"", ""};
}

}  // namespace

TriggerDecision DecideTriggers(const std::vector<PodView>& pods, const JobState& s,
                               const std::set<TriggerKey>& requested) {
  TriggerDecision d;
  std::set<TriggerKey> present;
  for (const auto& p : pods) {
    auto it = p.annotations.find(kMigrateAnnotation);
    if (it != p.annotations.end()) present.insert({p.uid, it->second});
  }
  for (const auto& key : requested) {
    if (present.count(key)) d.remember.insert(key);
  }
  if (s.phase == Phase::kTerminal || s.phase == Phase::kFinished) return d;
  // Unplanned: the pod's node stopped answering. Its member, rank or spare,
  // is dead in every phase; its pod is fenced.
  for (const auto& p : pods) {
    auto it = p.annotations.find(kMigrateAnnotation);
    if (it == p.annotations.end() || it->second != api::kMigrateNodeNotReady) continue;
    const TriggerKey key{p.uid, it->second};
    if (requested.count(key) || p.deleting || p.phase == "Succeeded" || p.phase == "Failed") continue;
    const Member* m = MemberOf(s, p);
    if (!m || m->status != MemberStatus::kAlive) continue;
    std::string how = Get(p.annotations, kMigrateReasonAnnotation);
    how = "pod " + p.name + ": " + (how.empty() ? "its node is NotReady" : how);
    TriggerRequest r{p.name, p.uid, m->id, it->second, {}, ProcessGone{m->id, how, true, "node_not_ready"}};
    r.request.rank = s.RankOf(m->id);
    d.requests.push_back(std::move(r));
    d.remember.insert(key);
  }
  if (s.phase == Phase::kAssembling) return d;
  const Generation* g = s.current();
  if (!g) return d;
  for (const auto& p : pods) {
    auto it = p.annotations.find(kMigrateAnnotation);
    if (it == p.annotations.end()) continue;
    const TriggerKey key{p.uid, it->second};
    if (requested.count(key) || it->second == api::kMigrateNodeNotReady) continue;
    if (p.deleting || p.phase == "Succeeded" || p.phase == "Failed") continue;
    const Member* m = MemberOf(s, p);
    if (!m || m->status != MemberStatus::kAlive) continue;
    const int rank = s.RankOf(m->id);
    if (rank < 0) continue;
    auto [kind, reason] = Meaning(it->second, p.name);
    if (kind.empty()) {
      d.unknown.push_back({p.name, it->second});
      d.remember.insert(key);
      continue;
    }
    bool busy = false;
    for (const auto& mig : s.migrations) busy = busy || (mig.rank == rank && Active(mig));
    if (busy) continue;
    const std::string given = Get(p.annotations, kMigrateReasonAnnotation);
    if (!given.empty()) reason = given;
    d.requests.push_back({p.name, p.uid, m->id, it->second, MigrationRequested{rank, kind, reason}, std::nullopt});
    d.remember.insert(key);
  }
  return d;
}

PodUpkeep DecidePodUpkeep(const std::vector<PodView>& pods, const JobState& s, double now, double leave_grace_s) {
  PodUpkeep u;
  for (const auto& p : pods) {
    if (p.deleting) continue;
    const Member* m = MemberOf(s, p);
    if (!m) continue;
    const std::string role = Get(p.labels, kPodRoleLabel);
    const bool has_rank = p.labels.count(kRankLabel) > 0;
    if (m->status == MemberStatus::kAlive) {
      const int rank = s.RankOf(m->id);
      if (rank < 0) continue;
      if (role != kRoleRankValue || Get(p.labels, kRankLabel) != std::to_string(rank)) {
        u.labels.push_back({p.name, p.uid, kRoleRankValue, rank});
      }
    } else if (m->status == MemberStatus::kExited && m->gone_cause == "replaced") {
      if (role != kRoleRetiredValue || has_rank) u.labels.push_back({p.name, p.uid, kRoleRetiredValue, -1});
      if (p.phase == "Succeeded" || p.phase == "Failed") {
        u.deletes.push_back({p.name, p.uid, "its member " + m->id + " was migrated away and its pod ended"});
      } else if (now - m->gone_at >= leave_grace_s) {
        u.deletes.push_back({p.name, p.uid, "its member " + m->id + " was migrated away and has not left"});
      }
    }
  }
  return u;
}

std::vector<RankMove> RankMoves(const JobState& s) {
  std::vector<RankMove> moves;
  for (size_t i = 1; i < s.history.size(); ++i) {
    const Generation& prev = s.history[i - 1];
    const Generation& g = s.history[i];
    for (size_t r = 0; r < g.members.size() && r < prev.members.size(); ++r) {
      if (g.members[r] == prev.members[r]) continue;
      RankMove mv;
      mv.generation = g.number;
      mv.rank = static_cast<int>(r);
      mv.from_member = prev.members[r];
      mv.to_member = g.members[r];
      if (const Member* m = s.Find(mv.from_member)) mv.from_pod = m->pod_name;
      if (const Member* m = s.Find(mv.to_member)) mv.to_pod = m->pod_name;
      mv.kind = "failure";
      mv.reason = g.cause;
      for (const auto& mig : s.migrations) {
        if (mig.generation == g.number && mig.rank == mv.rank) {
          mv.kind = mig.kind;
          mv.reason = mig.reason;
        }
      }
      mv.start = g.detected_at;
      mv.complete = g.complete_at;
      moves.push_back(std::move(mv));
    }
  }
  return moves;
}

}  // namespace lockstep::migration
