// DecideTriggers, DecidePodUpkeep and RankMoves (kube_triggers.h): pod
// annotations to migration requests, the rank labels and the migrated-away
// pods, the moves for the job's status. Pure, on MigrationSim's JobState.
#include <catch2/catch.hpp>

#include "lockstep/migration/kube_triggers.h"
#include "migration_sim.h"

namespace lockstep::migration {
namespace {

JobConfig Config(int world) {
  JobConfig c;
  c.job = "train";
  c.world_size = world;
  return c;
}

// Registers a member with pod "<pod>" (uid "uid-<pod>").
void RegisterPod(MigrationSim& sim, const std::string& id, Role role, int rank, const std::string& pod) {
  Registered r;
  r.member = id;
  r.role = role;
  r.rank = rank;
  r.host = "10.0.0." + std::to_string(sim.state.next_seq + 1);
  r.store_port = 29500;
  r.pod_name = pod;
  r.pod_uid = "uid-" + pod;
  REQUIRE(sim.Do(r).status.ok());
}

// Ranks m0..m<n-1> in pods train-rank-<i>, generation 0 complete; spares
// s0.. in pods train-spare-<i>.
MigrationSim Running(int world, int spares) {
  MigrationSim sim(Config(world));
  for (int r = 0; r < world; ++r)
    RegisterPod(sim, "m" + std::to_string(r), Role::kRank, r, "train-rank-" + std::to_string(r));
  for (int i = 0; i < spares; ++i)
    RegisterPod(sim, "s" + std::to_string(i), Role::kSpare, -1, "train-spare-" + std::to_string(i));
  sim.BeatAll(0);
  REQUIRE(sim.state.current()->status == "complete");
  return sim;
}

PodView Pod(const std::string& name, const std::string& role, int rank = -1) {
  PodView p;
  p.name = name;
  p.uid = "uid-" + name;
  p.phase = "Running";
  p.labels = {{"lockstep.dev/job", "train"}, {kPodRoleLabel, role}};
  if (rank >= 0) p.labels[kRankLabel] = std::to_string(rank);
  return p;
}

PodView Annotated(PodView p, const std::string& value, const std::string& reason = "") {
  p.annotations[kMigrateAnnotation] = value;
  if (!reason.empty()) p.annotations[kMigrateReasonAnnotation] = reason;
  return p;
}

std::vector<PodView> Pods(int world, int spares) {
  std::vector<PodView> pods;
  for (int r = 0; r < world; ++r) pods.push_back(Pod("train-rank-" + std::to_string(r), "rank", r));
  for (int i = 0; i < spares; ++i) pods.push_back(Pod("train-spare-" + std::to_string(i), "spare"));
  return pods;
}

TEST_CASE("triggers: now and drain ask for a planned migration, early-warning for a pre-emptive one",
          "[migration][kube]") {
  auto sim = Running(3, 1);
  auto pods = Pods(3, 1);
  pods[0] = Annotated(pods[0], "now");
  pods[1] = Annotated(pods[1], "drain");
  pods[2] = Annotated(pods[2], "early-warning");
  auto d = DecideTriggers(pods, sim.state, {});
  REQUIRE(d.requests.size() == 3);
  CHECK(d.unknown.empty());
  CHECK(d.requests[0].pod == "train-rank-0");
  CHECK(d.requests[0].member == "m0");
  CHECK(d.requests[0].request.rank == 0);
  CHECK(d.requests[0].request.kind == "planned");
  CHECK(d.requests[0].request.reason == "pod train-rank-0 annotated lockstep.dev/migrate=now");
  CHECK(d.requests[1].request.rank == 1);
  CHECK(d.requests[1].request.kind == "planned");
  CHECK(d.requests[1].request.reason == "the node of pod train-rank-1 is cordoned or draining");
  CHECK(d.requests[2].request.rank == 2);
  CHECK(d.requests[2].request.kind == "preemptive");
  CHECK(d.requests[2].request.reason == "GPU early warning on the node of pod train-rank-2");
  CHECK(d.remember == std::set<TriggerKey>{{"uid-train-rank-0", "now"},
                                           {"uid-train-rank-1", "drain"},
                                           {"uid-train-rank-2", "early-warning"}});
}

TEST_CASE("triggers: the reason comes from lockstep.dev/migrate-reason when set", "[migration][kube]") {
  auto sim = Running(2, 0);
  auto pods = Pods(2, 0);
  pods[1] = Annotated(pods[1], "early-warning", "GPU 3: 12 pending row remaps");
  auto d = DecideTriggers(pods, sim.state, {});
  REQUIRE(d.requests.size() == 1);
  CHECK(d.requests[0].request.reason == "GPU 3: 12 pending row remaps");
  CHECK(d.requests[0].request.kind == "preemptive");
}

TEST_CASE("triggers: each (pod uid, value) is asked for once, a new value or a re-annotation asks again",
          "[migration][kube]") {
  auto sim = Running(2, 0);
  auto pods = Pods(2, 0);
  pods[1] = Annotated(pods[1], "now");
  auto first = DecideTriggers(pods, sim.state, {});
  REQUIRE(first.requests.size() == 1);
  auto second = DecideTriggers(pods, sim.state, first.remember);
  CHECK(second.requests.empty());
  CHECK(second.remember == first.remember);
  // The operator sets drain on the same pod: a new value, asked for.
  pods[1].annotations[kMigrateAnnotation] = "drain";
  auto third = DecideTriggers(pods, sim.state, second.remember);
  REQUIRE(third.requests.size() == 1);
  CHECK(third.requests[0].value == "drain");
  CHECK(third.remember == std::set<TriggerKey>{{"uid-train-rank-1", "drain"}});  // "now" is gone: forgotten
  // The annotation removed, then set again: asked again.
  pods[1].annotations.clear();
  auto fourth = DecideTriggers(pods, sim.state, third.remember);
  CHECK(fourth.requests.empty());
  CHECK(fourth.remember.empty());
  pods[1] = Annotated(pods[1], "drain");
  CHECK(DecideTriggers(pods, sim.state, fourth.remember).requests.size() == 1);
}

TEST_CASE("triggers: an unknown value is reported once, never acted on", "[migration][kube]") {
  auto sim = Running(2, 0);
  auto pods = Pods(2, 0);
  pods[0] = Annotated(pods[0], "later");
  auto d = DecideTriggers(pods, sim.state, {});
  CHECK(d.requests.empty());
  REQUIRE(d.unknown.size() == 1);
  CHECK(d.unknown[0].pod == "train-rank-0");
  CHECK(d.unknown[0].value == "later");
  auto again = DecideTriggers(pods, sim.state, d.remember);
  CHECK(again.unknown.empty());
  CHECK(again.requests.empty());
  // Case matters: "Now" is not "now".
  pods[0].annotations[kMigrateAnnotation] = "Now";
  auto upper = DecideTriggers(pods, sim.state, again.remember);
  CHECK(upper.requests.empty());
  CHECK(upper.unknown.size() == 1);
}

TEST_CASE("triggers: only the pod of an alive member holding a rank, and not while it goes away", "[migration][kube]") {
  auto sim = Running(2, 1);
  auto pods = Pods(2, 1);
  // A spare's pod, a pod of no member, a rank pod being deleted, a rank pod that failed.
  pods[2] = Annotated(pods[2], "now");
  PodView stranger = Annotated(Pod("train-rank-9", "rank", 9), "now");
  pods.push_back(stranger);
  pods[0] = Annotated(pods[0], "now");
  pods[0].deleting = true;
  pods[1] = Annotated(pods[1], "now");
  pods[1].phase = "Failed";
  auto d = DecideTriggers(pods, sim.state, {});
  CHECK(d.requests.empty());
  CHECK(d.remember.empty());
  // A pod of the same name but another uid (recreated) is not the member's.
  pods[1].phase = "Running";
  pods[1].uid = "uid-new";
  CHECK(DecideTriggers(pods, sim.state, {}).requests.empty());
  pods[1].uid = "uid-train-rank-1";
  CHECK(DecideTriggers(pods, sim.state, {}).requests.size() == 1);
}

TEST_CASE("triggers: nothing before generation 0, nothing once the job ended, a busy rank waits", "[migration][kube]") {
  MigrationSim early(Config(2));
  RegisterPod(early, "m0", Role::kRank, 0, "train-rank-0");
  auto pods = Pods(2, 0);
  pods[0] = Annotated(pods[0], "now");
  auto d = DecideTriggers(pods, early.state, {});
  CHECK(d.requests.empty());
  CHECK(d.remember.empty());  // asked once generation 0 forms

  auto sim = Running(2, 0);
  REQUIRE(sim.Do(MigrationRequested{0, "planned", "by hand"}).status.ok());  // pending: no spare
  d = DecideTriggers(pods, sim.state, {});
  CHECK(d.requests.empty());
  CHECK(d.remember.empty());
  // Another rank is not busy.
  pods[1] = Annotated(pods[1], "drain");
  d = DecideTriggers(pods, sim.state, {});
  REQUIRE(d.requests.size() == 1);
  CHECK(d.requests[0].request.rank == 1);

  sim.state.phase = Phase::kTerminal;
  CHECK(DecideTriggers(pods, sim.state, {}).requests.empty());
  sim.state.phase = Phase::kFinished;
  CHECK(DecideTriggers(pods, sim.state, {}).requests.empty());
}

TEST_CASE("triggers: node-not-ready takes the pod's member, rank or spare, for dead and fences it",
          "[migration][kube]") {
  auto sim = Running(3, 2);
  for (auto& [id, m] : sim.state.members) m.pid = 7;  // the library registers its pid; fencing needs one
  auto pods = Pods(3, 2);
  pods[1] = Annotated(pods[1], "node-not-ready", "node n1 NotReady (NodeStatusUnknown)");
  pods[4] = Annotated(pods[4], "node-not-ready");  // train-spare-1
  auto d = DecideTriggers(pods, sim.state, {});
  CHECK(d.unknown.empty());
  REQUIRE(d.requests.size() == 2);
  REQUIRE(d.requests[0].gone);
  CHECK(d.requests[0].member == "m1");
  CHECK(d.requests[0].request.rank == 1);
  CHECK(d.requests[0].value == "node-not-ready");
  CHECK(d.requests[0].gone->member == "m1");
  CHECK(d.requests[0].gone->fence);
  CHECK(d.requests[0].gone->cause == "node_not_ready");
  CHECK(d.requests[0].gone->how == "pod train-rank-1: node n1 NotReady (NodeStatusUnknown)");
  REQUIRE(d.requests[1].gone);
  CHECK(d.requests[1].member == "s1");
  CHECK(d.requests[1].request.rank == -1);
  CHECK(d.requests[1].gone->how == "pod train-spare-1: its node is NotReady");
  CHECK(d.remember ==
        std::set<TriggerKey>{{"uid-train-rank-1", "node-not-ready"}, {"uid-train-spare-1", "node-not-ready"}});
  // Asked once.
  CHECK(DecideTriggers(pods, sim.state, d.remember).requests.empty());

  // Applied: the rank's member is dead (a failure re-form follows), fenced.
  auto out = sim.Do(*d.requests[0].gone);
  REQUIRE(out.status.ok());
  const Member* m1 = sim.state.Find("m1");
  REQUIRE(m1);
  CHECK(m1->status == MemberStatus::kDead);
  CHECK(m1->gone_cause == "node_not_ready");
  CHECK(m1->fenced);
  CHECK(sim.All<Fence>().size() == 1);
  // Not asked again for a member no longer alive.
  CHECK(DecideTriggers({pods[1]}, sim.state, {}).requests.empty());

  SECTION("also before generation 0 forms, and while a migration of its rank is in flight") {
    MigrationSim early(Config(2));
    RegisterPod(early, "m0", Role::kRank, 0, "train-rank-0");
    auto ep = Pods(2, 0);
    ep[0] = Annotated(ep[0], "node-not-ready");
    CHECK(DecideTriggers(ep, early.state, {}).requests.size() == 1);

    auto busy = Running(2, 0);
    REQUIRE(busy.Do(MigrationRequested{0, "planned", "drain"}).status.ok());
    CHECK(DecideTriggers(ep, busy.state, {}).requests.size() == 1);
  }
  SECTION("not for a pod going away or ended, nor once the job ended") {
    pods[1].deleting = true;
    pods[4].phase = "Failed";
    CHECK(DecideTriggers(pods, Running(3, 2).state, {}).requests.empty());
    auto ended = Running(3, 2);
    auto fresh = Pods(3, 2);
    fresh[1] = Annotated(fresh[1], "node-not-ready");
    CHECK(DecideTriggers(fresh, ended.state, {}).requests.size() == 1);
    ended.state.phase = Phase::kFinished;
    CHECK(DecideTriggers(fresh, ended.state, {}).requests.empty());
    ended.state.phase = Phase::kTerminal;
    CHECK(DecideTriggers(fresh, ended.state, {}).requests.empty());
  }
}

// Rank 1 (m1, pod train-rank-1) moves to spare s0 (pod train-spare-0) by a
// planned migration; returns the time the generation was decided.
double MigrateRank1(MigrationSim& sim) {
  sim.TrainFor(2, 0, 2);
  REQUIRE(sim.Do(MigrationRequested{1, "planned", "node-a drained"}).status.ok());
  REQUIRE(sim.state.phase == Phase::kPausing);
  const int64_t at = sim.state.transition.pause_at_step;
  for (const char* m : {"m0", "m1", "m2"}) sim.ReportErr(m, 0, at, "pause");
  REQUIRE(sim.state.generation() == 1);
  return sim.now;
}

TEST_CASE("pod upkeep: the spare that took a rank is labelled with it, the old pod retired", "[migration][kube]") {
  auto sim = Running(3, 1);
  auto pods = Pods(3, 1);
  CHECK(DecidePodUpkeep(pods, sim.state, sim.now, 30).labels.empty());  // every label right
  double decided = MigrateRank1(sim);
  auto u = DecidePodUpkeep(pods, sim.state, decided, 30);
  REQUIRE(u.labels.size() == 2);
  CHECK(u.labels[0].pod == "train-rank-1");
  CHECK(u.labels[0].pod_uid == "uid-train-rank-1");
  CHECK(u.labels[0].role == "retired");
  CHECK(u.labels[0].rank == -1);
  CHECK(u.labels[1].pod == "train-spare-0");
  CHECK(u.labels[1].role == "rank");
  CHECK(u.labels[1].rank == 1);
  CHECK(u.deletes.empty());  // still running, within the grace
  // Once patched, nothing more to do.
  pods[1].labels = {{"lockstep.dev/job", "train"}, {kPodRoleLabel, "retired"}};
  pods[3].labels[kPodRoleLabel] = "rank";
  pods[3].labels[kRankLabel] = "1";
  CHECK(DecidePodUpkeep(pods, sim.state, decided + 1, 30).labels.empty());
  // A wrong rank label on a holder is corrected.
  pods[2].labels[kRankLabel] = "7";
  auto fix = DecidePodUpkeep(pods, sim.state, decided + 1, 30);
  REQUIRE(fix.labels.size() == 1);
  CHECK(fix.labels[0].pod == "train-rank-2");
  CHECK(fix.labels[0].rank == 2);
}

TEST_CASE("pod upkeep: a migrated-away pod is deleted once it ended, or after the grace", "[migration][kube]") {
  auto sim = Running(3, 1);
  auto pods = Pods(3, 1);
  double decided = MigrateRank1(sim);
  CHECK(DecidePodUpkeep(pods, sim.state, decided + 29, 30).deletes.empty());
  pods[1].phase = "Succeeded";
  auto ended = DecidePodUpkeep(pods, sim.state, decided + 1, 30);
  REQUIRE(ended.deletes.size() == 1);
  CHECK(ended.deletes[0].pod == "train-rank-1");
  CHECK(ended.deletes[0].pod_uid == "uid-train-rank-1");
  CHECK(ended.deletes[0].why == "its member m1 was migrated away and its pod ended");
  pods[1].phase = "Running";
  auto late = DecidePodUpkeep(pods, sim.state, decided + 30, 30);
  REQUIRE(late.deletes.size() == 1);
  CHECK(late.deletes[0].why == "its member m1 was migrated away and has not left");
  // Being deleted already: left alone.
  pods[1].deleting = true;
  CHECK(DecidePodUpkeep(pods, sim.state, decided + 30, 30).deletes.empty());
  // A member that finished, or died (the fencer's), is not deleted here.
  auto other = Running(2, 0);
  other.Do(ProcessGone{"m1", "pod train-rank-1 failed", true});
  REQUIRE(other.state.Find("m1")->status == MemberStatus::kDead);
  auto dead_pods = Pods(2, 0);
  dead_pods[1].phase = "Failed";
  CHECK(DecidePodUpkeep(dead_pods, other.state, other.now + 100, 30).deletes.empty());
}

TEST_CASE("rank moves: planned and failure moves with pods, reason, start and completion", "[migration][kube]") {
  auto sim = Running(3, 2);
  CHECK(RankMoves(sim.state).empty());
  MigrateRank1(sim);
  auto moves = RankMoves(sim.state);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].generation == 1);
  CHECK(moves[0].rank == 1);
  CHECK(moves[0].from_member == "m1");
  CHECK(moves[0].to_member == "s0");
  CHECK(moves[0].from_pod == "train-rank-1");
  CHECK(moves[0].to_pod == "train-spare-0");
  CHECK(moves[0].kind == "planned");
  CHECK(moves[0].reason == "node-a drained");
  CHECK(moves[0].start > 0);
  CHECK(moves[0].complete == 0);  // not complete yet
  sim.now += 1.5;
  sim.BeatAll(sim.state.current()->resume_step);
  moves = RankMoves(sim.state);
  REQUIRE(moves[0].complete == Approx(sim.now));
  CHECK(moves[0].complete - moves[0].start >= 1.5);

  // Rank 2's pod fails: s1 takes it.
  sim.Do(ProcessGone{"m2", "pod train-rank-2 failed", true});
  sim.ReportErr("m0", 1, sim.state.current()->resume_step);
  sim.ReportErr("s0", 1, sim.state.current()->resume_step);
  REQUIRE(sim.state.generation() == 2);
  moves = RankMoves(sim.state);
  REQUIRE(moves.size() == 2);
  CHECK(moves[1].generation == 2);
  CHECK(moves[1].rank == 2);
  CHECK(moves[1].from_pod == "train-rank-2");
  CHECK(moves[1].to_pod == "train-spare-1");
  CHECK(moves[1].kind == "failure");
  CHECK(moves[1].reason == sim.state.current()->cause);
  CHECK(moves[1].reason.find("rank 2 died") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::migration
