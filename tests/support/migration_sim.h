// MigrationSim: drives the pure migration Decide() on simulated time for
// tests: keeps the JobState, applies events at `now`, remembers the actions of
// the last call and every action so far. Not thread-safe (test-only).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lockstep/migration/api.h"
#include "lockstep/migration/decide.h"

namespace lockstep::migration {

class MigrationSim {
 public:
  explicit MigrationSim(JobConfig c) : state(*NewJob(c)) {}

  Outcome Do(const Event& e) {
    Outcome o = Decide(state, e, now);
    if (o.status.ok()) state = o.state;
    last = o.actions;
    all.insert(all.end(), o.actions.begin(), o.actions.end());
    return o;
  }
  void Advance(double dt) {
    now += dt;
    Do(Tick{});
  }

  Outcome Register(const std::string& id, Role role, int rank = -1, int pid = 0) {
    Registered r;
    r.member = id;
    r.role = role;
    r.rank = rank;
    r.host = "127.0.0.1";
    r.store_port = 40000 + static_cast<int>(state.next_seq);
    r.pid = pid ? pid : 1000 + static_cast<int>(state.next_seq);
    return Do(r);
  }
  // Registers ranks "m0".."m<n-1>".
  void RegisterRanks(int n) {
    for (int r = 0; r < n; ++r) Register("m" + std::to_string(r), Role::kRank, r);
  }
  Outcome Beat(const std::string& id, int64_t g, int64_t step, const std::string& st = "training") {
    return Do(Heartbeat{id, g, step, st});
  }
  // Every alive member of the current generation heartbeats `step` in it.
  void BeatAll(int64_t step) {
    auto g = state.current()->members;
    for (const auto& id : g) if (state.Alive(id)) Beat(id, state.generation(), step);
  }
  // Every alive member (spares too) heartbeats, keeping it alive.
  void KeepAlive(int64_t step) {
    for (const auto& [id, m] : std::map<std::string, Member>(state.members)) {
      if (m.status == MemberStatus::kAlive) Beat(id, state.RankOf(id) >= 0 ? state.generation() : -1, step,
                                                 state.RankOf(id) >= 0 ? "training" : "waiting");
    }
  }
  // Time passes in 0.25 s heartbeat intervals; every alive member heartbeats,
  // the step advancing at `steps_per_s` from `from`. Returns the last step.
  int64_t TrainFor(double seconds, int64_t from, double steps_per_s) {
    int64_t step = from;
    for (double t = 0.25; t <= seconds + 1e-9; t += 0.25) {
      now += 0.25;
      step = from + static_cast<int64_t>(t * steps_per_s);
      KeepAlive(step);
      Do(Tick{});
    }
    return step;
  }
  Outcome ReportErr(const std::string& id, int64_t g, int64_t step, const std::string& reason = "error") {
    return Do(Report{id, g, step, reason, reason == "error" ? "connection reset by peer" : ""});
  }
  nlohmann::json Plan(const std::string& id) { return PlanReply(state, id); }

  template <typename A>
  std::vector<A> Last() const {
    std::vector<A> out;
    for (const auto& a : last) if (auto* p = std::get_if<A>(&a)) out.push_back(*p);
    return out;
  }
  template <typename A>
  std::vector<A> All() const {
    std::vector<A> out;
    for (const auto& a : all) if (auto* p = std::get_if<A>(&a)) out.push_back(*p);
    return out;
  }
  std::vector<Notice> Notices(const std::string& what) const {
    std::vector<Notice> out;
    for (const auto& n : All<Notice>()) if (n.what == what) out.push_back(n);
    return out;
  }

  JobState state;
  double now = 1'800'000'000.0;
  Actions last, all;
};

}  // namespace lockstep::migration
