#include "lockstep/migration/job_state.h"

namespace lockstep::migration {

int JobState::RankOf(const std::string& member) const {
  const Generation* g = current();
  if (!g) return -1;
  for (size_t r = 0; r < g->members.size(); ++r) {
    if (g->members[r] == member) return static_cast<int>(r);
  }
  return -1;
}

const Member* JobState::Find(const std::string& member) const {
  auto it = members.find(member);
  return it == members.end() ? nullptr : &it->second;
}

Member* JobState::Find(const std::string& member) {
  auto it = members.find(member);
  return it == members.end() ? nullptr : &it->second;
}

bool JobState::Alive(const std::string& member) const {
  const Member* m = Find(member);
  return m && m->status == MemberStatus::kAlive;
}

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kAssembling: return "assembling";
    case Phase::kRunning: return "running";
    case Phase::kPausing: return "pausing";
    case Phase::kCollecting: return "collecting";
    case Phase::kWaitingSpare: return "waiting_for_spare";
    case Phase::kTerminal: return "terminal";
    case Phase::kFinished: return "finished";
  }
  return "unknown";
}

const char* RoleName(Role r) { return r == Role::kRank ? "rank" : "spare"; }

const char* MemberStatusName(MemberStatus s) {
  switch (s) {
    case MemberStatus::kAlive: return "alive";
    case MemberStatus::kDead: return "dead";
    case MemberStatus::kExited: return "exited";
  }
  return "unknown";
}

}  // namespace lockstep::migration
