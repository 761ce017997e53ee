// Decide(): the coordinator's decisions as tables on simulated time
// (docs/migration.md, "Decisions").
#include <catch2/catch.hpp>

#include "migration_sim.h"

namespace lockstep::migration {
namespace {

JobConfig Config(int world, int spares = 0, bool launch = false) {
  JobConfig c;
  c.job = "test";
  c.world_size = world;
  c.heartbeat_timeout_s = 1.5;
  c.report_grace_s = 2.0;
  c.join_timeout_s = 20.0;
  c.spares = spares;
  c.can_launch_spares = launch;
  return c;
}

// A formed, complete generation 0 of `world` ranks m0.. with `spares` spares s0...
MigrationSim Formed(int world, int spares, JobConfig c) {
  MigrationSim sim(c);
  sim.RegisterRanks(world);
  for (int i = 0; i < spares; ++i) sim.Register("s" + std::to_string(i), Role::kSpare);
  sim.BeatAll(0);
  REQUIRE(sim.state.current()->status == "complete");
  return sim;
}
MigrationSim Formed(int world, int spares) { return Formed(world, spares, Config(world)); }

TEST_CASE("generation 0 forms when every rank registered, store is rank 0's", "[migration]") {
  MigrationSim sim(Config(3));
  sim.Register("m2", Role::kRank, 2);
  sim.Register("m0", Role::kRank, 0);
  REQUIRE(sim.state.generation() == -1);
  auto plan = sim.Plan("m0");
  CHECK(plan["action"] == "wait");
  CHECK(plan["reason"] == "waiting for ranks to register: 2 of 3");
  sim.Register("m1", Role::kRank);  // no rank: the lowest free one
  REQUIRE(sim.state.generation() == 0);
  plan = sim.Plan("m1");
  CHECK(plan["action"] == "train");
  CHECK(plan["rank"] == 1);
  CHECK(plan["members"] == nlohmann::json{"m0", "m1", "m2"});
  CHECK(plan["src_rank"] == 0);
  CHECK(plan["resume_step"] == 0);
  CHECK(plan["store"]["port"] == sim.state.Find("m0")->store_port);
  CHECK(plan["store"]["prefix"] == "lockstep/g0/");
  CHECK(sim.state.current()->status == "joining");
  sim.BeatAll(0);
  CHECK(sim.state.current()->status == "complete");
  CHECK(sim.Notices("generation_complete").size() == 1);
}

TEST_CASE("register: a rank held by a live member is a conflict, a bad rank is invalid", "[migration]") {
  MigrationSim sim(Config(2));
  REQUIRE(sim.Register("m0", Role::kRank, 0).status.ok());
  auto again = sim.Register("other", Role::kRank, 0);
  REQUIRE(again.status.code() == ErrorCode::kConflict);
  CHECK(again.status.error().message == "rank 0 is held by live member m0");
  auto bad = sim.Register("x", Role::kRank, 7);
  REQUIRE(bad.status.code() == ErrorCode::kInvalidArgument);
  CHECK(bad.status.error().message == "rank 7 is out of range: job test has ranks 0..1");
  CHECK(sim.state.members.size() == 1);
  // Re-registering the same member is idempotent.
  CHECK(sim.Register("m0", Role::kRank, 0).status.ok());
}

TEST_CASE("crash: the spare takes the dead rank's index, source is the survivor furthest ahead", "[migration]") {
  auto sim = Formed(4, 2);
  sim.BeatAll(10);
  // Rank 2's process exits; the coordinator sees its pid gone.
  sim.Do(ProcessGone{"m2", "exited (killed by signal 9)"});
  CHECK(sim.state.phase == Phase::kCollecting);
  CHECK(sim.Last<Fence>().empty());  // a gone process needs no fencing
  // Survivors saw the collective fail; rank 1 committed one step more.
  sim.ReportErr("m0", 0, 10);
  sim.ReportErr("m1", 0, 11);
  REQUIRE(sim.state.generation() == 0);  // m3 has not reported yet
  sim.ReportErr("m3", 0, 10);
  REQUIRE(sim.state.generation() == 1);
  const Generation& g = *sim.state.current();
  CHECK(g.members == std::vector<std::string>{"m0", "m1", "s0", "m3"});
  CHECK(g.src_rank == 1);
  CHECK(g.resume_step == 11);
  CHECK(g.store_port == sim.state.Find("m0")->store_port);
  CHECK(g.store_prefix == "lockstep/g1/");
  CHECK(g.kind == "failure");
  CHECK(g.cause == "rank 2 died (member m2): process 1002 exited (killed by signal 9)");
  CHECK(sim.Plan("m2")["action"] == "exit");
  CHECK(sim.Plan("s0")["action"] == "train");
  CHECK(sim.Plan("s0")["rank"] == 2);
  CHECK(sim.Plan("s1")["action"] == "wait");
  // Complete once every member heartbeats training in generation 1.
  sim.now += 0.5;
  sim.BeatAll(11);
  CHECK(sim.state.current()->status == "complete");
  auto done = sim.Notices("generation_complete");
  REQUIRE(done.size() == 2);
  CHECK(done[1].Field("recovery_s") == "0.500");
  CHECK(sim.state.history[0].status == "failed");
}

TEST_CASE("ChooseSource: highest committed step, lowest rank on a tie", "[migration]") {
  using V = std::vector<std::optional<int64_t>>;
  struct Row { V committed; int src; int64_t step; };
  for (const auto& row : std::vector<Row>{
           {{10, 11, std::nullopt, 10}, 1, 11},
           {{7, 7, 7}, 0, 7},
           {{std::nullopt, 5, 5}, 1, 5},
           {{std::nullopt, std::nullopt, 0}, 2, 0},
       }) {
    auto c = ChooseSource(row.committed);
    REQUIRE(c);
    CHECK(c->src_rank == row.src);
    CHECK(c->resume_step == row.step);
  }
  CHECK(!ChooseSource({std::nullopt, std::nullopt}));
}

TEST_CASE("ChooseSpare: one that asked for the rank, else the first registered", "[migration]") {
  Member a, b, c;
  a.requested_rank = -1;
  b.requested_rank = 3;
  c.requested_rank = 1;
  std::vector<const Member*> pool{&a, &b, &c};
  CHECK(ChooseSpare(pool, 3) == 1);
  CHECK(ChooseSpare(pool, 1) == 2);
  CHECK(ChooseSpare(pool, 0) == 0);
  CHECK(ChooseSpare({}, 0) == -1);
}

TEST_CASE("hang: no heartbeat for the timeout -> dead and fenced, then re-formed", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(5);
  // m1 stops (SIGSTOP): the others keep heartbeating.
  for (int i = 0; i < 7; ++i) {
    sim.now += 0.25;
    sim.Beat("m0", 0, 5);
    sim.Beat("m2", 0, 5);
    sim.Beat("s0", -1, 0, "waiting");
    sim.Do(Tick{});
  }
  REQUIRE(sim.state.Find("m1")->status == MemberStatus::kDead);
  CHECK(sim.state.Find("m1")->gone_cause == "heartbeat_timeout");
  auto fences = sim.All<Fence>();
  REQUIRE(fences.size() == 1);
  CHECK(fences[0].member == "m1");
  CHECK(fences[0].pid == sim.state.Find("m1")->pid);
  CHECK(sim.state.phase == Phase::kCollecting);
  CHECK(sim.Notices("failure_detected")[0].Field("category") == "heartbeat_timeout");
  // The fence closed m1's sockets: the others' collective fails and they report.
  sim.ReportErr("m0", 0, 5);
  sim.ReportErr("m2", 0, 5);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s0", "m2"});
}

TEST_CASE("outside the current generation a member is judged by the join timeout, not the heartbeat timeout",
          "[migration]") {
  // Before generation 0: m0 registered, silent while the others start (imports).
  MigrationSim sim(Config(2, 1));
  sim.Register("m0", Role::kRank, 0);
  sim.Register("s0", Role::kSpare);
  sim.Advance(10);  // > heartbeat timeout 1.5 s, < join timeout 20 s
  CHECK(sim.state.Find("m0")->status == MemberStatus::kAlive);
  CHECK(sim.state.Find("s0")->status == MemberStatus::kAlive);
  CHECK(sim.All<Fence>().empty());
  sim.Register("m1", Role::kRank, 1);
  REQUIRE(sim.state.generation() == 0);
  sim.BeatAll(0);
  REQUIRE(sim.state.current()->status == "complete");
  // Formed: m0 is in the generation and judged by the heartbeat timeout again, the
  // pool spare s0 (silent for 10 s) still by the join timeout.
  for (int i = 0; i < 8; ++i) {
    sim.Advance(0.25);
    sim.Beat("m1", 0, 1);
  }
  CHECK(sim.state.Find("m0")->status == MemberStatus::kDead);
  CHECK(sim.state.Find("m0")->gone_cause == "heartbeat_timeout");
  CHECK(sim.state.Find("s0")->status == MemberStatus::kAlive);
  // s0 took m0's rank in generation 1: from now on the heartbeat timeout applies.
  sim.ReportErr("m1", 0, 1);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.RankOf("s0") == 0);
  for (int i = 0; i < 8; ++i) {
    sim.Advance(0.25);
    sim.Beat("m1", 1, 1, "waiting");
  }
  CHECK(sim.state.Find("s0")->status == MemberStatus::kDead);
  // A pool spare silent past the join timeout is dead.
  MigrationSim pool = Formed(2, 1);
  for (int i = 0; i < 84; ++i) {
    pool.Advance(0.25);
    pool.BeatAll(1);
  }
  CHECK(pool.state.Find("s0")->status == MemberStatus::kDead);
  CHECK(pool.state.Find("s0")->gone_reason.find("outside the current generation") != std::string::npos);
}

TEST_CASE("a failure takes a spare heard from within the heartbeat timeout before a silent one", "[migration]") {
  auto sim = Formed(2, 2);
  for (int i = 0; i < 12; ++i) {  // 3 s: s0 silent, s1 heartbeating
    sim.Advance(0.25);
    sim.BeatAll(1);
    sim.Beat("s1", -1, 0, "waiting");
  }
  REQUIRE(sim.state.Find("s0")->status == MemberStatus::kAlive);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 1);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s1"});
}

TEST_CASE("a member heartbeating but not reporting after the report grace is hung and fenced", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(5);
  sim.ReportErr("m0", 0, 5);  // m0's collective failed
  for (int i = 0; i < 9; ++i) {  // 2.25 s: m1, m2 and s0 keep heartbeating, m2 reports, m1 never does
    sim.now += 0.25;
    sim.KeepAlive(5);
    if (i == 1) sim.ReportErr("m2", 0, 5);
    sim.Do(Tick{});
  }
  const Member& m1 = *sim.state.Find("m1");
  REQUIRE(m1.status == MemberStatus::kDead);
  CHECK(m1.gone_cause == "hung");
  REQUIRE(sim.All<Fence>().size() == 1);
  CHECK(sim.All<Fence>()[0].member == "m1");
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s0", "m2"});
  CHECK(sim.state.current()->cause == "rank 0 (member m0) reported an error: connection reset by peer");
}

TEST_CASE("two failures at once: both dead ranks get spares in one generation", "[migration]") {
  auto sim = Formed(4, 2);
  sim.BeatAll(20);
  sim.Do(ProcessGone{"m0", "gone"});
  sim.Do(ProcessGone{"m3", "gone"});
  sim.ReportErr("m1", 0, 20);
  sim.ReportErr("m2", 0, 21);
  REQUIRE(sim.state.generation() == 1);
  const Generation& g = *sim.state.current();
  CHECK(g.members == std::vector<std::string>{"s0", "m1", "m2", "s1"});
  CHECK(g.src_rank == 2);
  CHECK(g.resume_step == 21);
  // The store is the lowest-ranked survivor's (rank 0 died).
  CHECK(g.store_port == sim.state.Find("m1")->store_port);
}

TEST_CASE("a spare that dies while joining: the next spare takes the rank in g+2", "[migration]") {
  auto sim = Formed(3, 2);
  sim.BeatAll(8);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 8);
  sim.ReportErr("m2", 0, 8);
  REQUIRE(sim.state.generation() == 1);
  REQUIRE(sim.state.current()->members[1] == "s0");
  // m0 and m2 joined generation 1 and sent the state; s0 dies before it heartbeats training.
  sim.Beat("m0", 1, 8);
  sim.Beat("m2", 1, 8);
  sim.Do(ProcessGone{"s0", "exited with status 1"});
  CHECK(sim.state.phase == Phase::kCollecting);
  CHECK(sim.state.history[1].status == "failed");
  // Their broadcast to s0 fails: they report an error for generation 1.
  sim.ReportErr("m0", 1, 8);
  sim.ReportErr("m2", 1, 8);
  REQUIRE(sim.state.generation() == 2);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s1", "m2"});
  CHECK(sim.state.current()->resume_step == 8);
}

TEST_CASE("a member that does not join within the join timeout is dead and fenced", "[migration]") {
  auto sim = Formed(2, 2);
  sim.BeatAll(3);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 3);
  REQUIRE(sim.state.current()->members[1] == "s0");
  // s0 keeps heartbeating "waiting" but never gets to "training" in generation 1.
  for (int i = 0; i < 21 * 4; ++i) {
    sim.now += 0.25;
    sim.Beat("m0", 1, 3);
    sim.Beat("s0", 1, 0, "waiting");
    sim.Beat("s1", -1, 0, "waiting");
    sim.Do(Tick{});
  }
  CHECK(sim.state.Find("s0")->gone_cause == "join_timeout");
  CHECK(sim.All<Fence>().back().member == "s0");
  sim.ReportErr("m0", 1, 3);
  REQUIRE(sim.state.generation() == 2);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s1"});
}

TEST_CASE("failure during a re-form: survivors still joining get until the join deadline", "[migration]") {
  auto sim = Formed(3, 2);
  sim.BeatAll(4);
  sim.Do(ProcessGone{"m2", "gone"});
  sim.ReportErr("m0", 0, 4);
  sim.ReportErr("m1", 0, 4);
  REQUIRE(sim.state.generation() == 1);
  // s0 dies while m0 and m1 are still in the rendezvous of generation 1.
  sim.Do(ProcessGone{"s0", "gone"});
  for (int i = 0; i < 12; ++i) {  // 3 s > report grace: m0/m1 not joined yet, so not hung
    sim.now += 0.25;
    sim.Beat("m0", 1, 4, "waiting");
    sim.Beat("m1", 1, 4, "waiting");
    sim.Beat("s1", -1, 0, "waiting");
    sim.Do(Tick{});
  }
  CHECK(sim.state.Find("m0")->status == MemberStatus::kAlive);
  CHECK(sim.state.Find("m1")->status == MemberStatus::kAlive);
  sim.ReportErr("m0", 1, 4);
  sim.ReportErr("m1", 1, 4);
  REQUIRE(sim.state.generation() == 2);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "m1", "s1"});
}

TEST_CASE("no spare: wait with a reason, resume as soon as one registers", "[migration]") {
  auto sim = Formed(2, 0);
  sim.BeatAll(6);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 6);
  CHECK(sim.state.phase == Phase::kWaitingSpare);
  auto plan = sim.Plan("m0");
  CHECK(plan["action"] == "wait");
  CHECK(plan["reason"] ==
        "waiting for a spare: rank 1 of generation 0 need 1, 0 registered, 0 starting; no spare will be started (no "
        "--spare-command): start one with LOCKSTEP_ROLE=spare");
  CHECK(sim.state.spares_exhausted);
  CHECK(sim.Notices("waiting_for_spare").size() == 1);
  CHECK(sim.All<RequestSpare>().empty());  // no spare command
  sim.now += 1;
  sim.Beat("m0", 0, 6, "waiting");
  sim.Register("late", Role::kSpare);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "late"});
  CHECK(sim.Plan("late")["action"] == "train");
}

TEST_CASE("cold spares (K=0): exactly the missing spares are requested", "[migration]") {
  auto sim = Formed(3, 0, Config(3, 0, true));
  sim.BeatAll(2);
  CHECK(sim.All<RequestSpare>().empty());
  sim.Do(ProcessGone{"m0", "gone"});
  sim.Do(ProcessGone{"m2", "gone"});
  sim.ReportErr("m1", 0, 2);
  CHECK(sim.state.phase == Phase::kWaitingSpare);
  CHECK(sim.All<RequestSpare>().size() == 2);
  CHECK(sim.state.spares_starting == 2);
  sim.Advance(0.1);
  CHECK(sim.All<RequestSpare>().size() == 2);  // not again while they start
  sim.Register("c0", Role::kSpare);
  CHECK(sim.state.phase == Phase::kWaitingSpare);
  sim.Register("c1", Role::kSpare);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.spares_starting == 0);
  CHECK(sim.All<RequestSpare>().size() == 2);  // K=0: no refill
}

TEST_CASE("hot pool (K=2): refilled to K after a generation used a spare", "[migration]") {
  auto sim = Formed(2, 2, Config(2, 2, true));
  sim.BeatAll(2);
  CHECK(sim.All<RequestSpare>().empty());  // the pool is full
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 2);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.All<RequestSpare>().size() == 1);  // one spare left + one starting = K
  sim.Register("r0", Role::kSpare);
  sim.Advance(0.1);
  CHECK(sim.All<RequestSpare>().size() == 1);
}

TEST_CASE("spares from the start (Kubernetes): the pool is filled before generation 0 and kept at K", "[migration]") {
  JobConfig c = Config(2, 2, true);
  c.spares_from_start = true;
  MigrationSim sim(c);
  sim.Advance(0.1);
  CHECK(sim.All<RequestSpare>().size() == 2);  // K spares while the job assembles
  CHECK(sim.state.spares_starting == 2);
  sim.Advance(0.1);
  CHECK(sim.All<RequestSpare>().size() == 2);  // not again while they start
  // A spare pod that ended without registering is replaced.
  sim.Do(SpareProcessExited{0, "pod Failed", "test-spare-0-x"});
  CHECK(sim.All<RequestSpare>().size() == 3);
  CHECK(sim.state.failed_launches == 1);
  // A spare pod that ended after it registered is not a failed start (matched by pod name).
  Registered r;
  r.member = "s0";
  r.role = Role::kSpare;
  r.host = "10.0.0.9";
  r.store_port = 4000;
  r.pid = 1;
  r.pod_name = "test-spare-1-x";
  r.pod_uid = "uid-1";
  REQUIRE(sim.Do(r).status.ok());
  CHECK(sim.state.failed_launches == 0);
  CHECK(sim.state.Find("s0")->pod_name == "test-spare-1-x");
  CHECK(sim.state.Find("s0")->pod_uid == "uid-1");
  sim.Do(SpareProcessExited{0, "pod deleted", "test-spare-1-x"});
  CHECK(sim.state.failed_launches == 0);
  // Without spares_from_start the same config requests nothing before a spare is used.
  MigrationSim cold(Config(2, 2, true));
  cold.Advance(0.1);
  CHECK(cold.All<RequestSpare>().empty());
}

TEST_CASE("spare launches that never register stop after three in a row", "[migration]") {
  auto sim = Formed(2, 0, Config(2, 0, true));
  sim.BeatAll(1);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 1);
  for (int i = 0; i < 5; ++i) {
    sim.Beat("m0", 0, 1, "waiting");
    sim.Do(SpareProcessExited{5000 + i, "exited with status 127", ""});
  }
  CHECK(sim.All<RequestSpare>().size() == 3);
  CHECK(sim.Notices("spare_launches_stopped").size() == 1);
  CHECK(sim.state.phase == Phase::kWaitingSpare);
  sim.Register("hand", Role::kSpare);  // a spare registered by hand resumes the job
  CHECK(sim.state.generation() == 1);
}

TEST_CASE("PauseStep: ahead of the highest step by 2 + the steps of one heartbeat timeout", "[migration]") {
  struct Row { int64_t max; double rate; double hb; bool pre; int64_t want; };
  for (const auto& r : std::vector<Row>{
           {10, 0, 1.5, false, 12},
           {10, 2, 1.5, false, 15},   // 2 + ceil(3)
           {10, 2, 1.5, true, 13},    // 1 + ceil(1.5)
           {0, 0.5, 1.5, true, 2},
           {100, 10, 1.5, false, 117},
       }) {
    CHECK(PauseStep(r.max, r.rate, r.hb, r.pre) == r.want);
  }
}

TEST_CASE("planned migration: pending without a spare, then pause, re-form, old member exits", "[migration]") {
  auto sim = Formed(3, 0);
  REQUIRE(sim.TrainFor(10, 0, 2) == 20);  // 2 steps/s since completion
  auto req = sim.Do(MigrationRequested{1, "planned", "drain node-a"});
  REQUIRE(req.status.ok());
  CHECK(req.created_id == "mig-1");
  CHECK(sim.state.migrations[0].state == "pending");
  CHECK(HeartbeatReply(sim.state, "m1")["directive"] == "none");
  // A second request for the same rank is refused.
  CHECK(sim.Do(MigrationRequested{1, "planned", "again"}).status.code() == ErrorCode::kConflict);
  CHECK(sim.Do(MigrationRequested{5, "planned", "x"}).status.code() == ErrorCode::kConflict);
  // A spare registers: every rank gets the pause directive.
  sim.Register("s0", Role::kSpare);
  REQUIRE(sim.state.phase == Phase::kPausing);
  const int64_t s = 20 + 2 + 1;  // 2 steps/s * two 0.25 s heartbeat intervals
  auto hb = HeartbeatReply(sim.state, "m0");
  CHECK(hb["directive"] == "pause");
  CHECK(hb["pause_at_step"] == s);
  CHECK(HeartbeatReply(sim.state, "s0")["directive"] == "none");
  CHECK(sim.state.migrations[0].state == "pausing");
  // Every rank stops after committing step s and reports the pause.
  for (const char* m : {"m0", "m1", "m2"}) sim.ReportErr(m, 0, s + 1, "pause");
  REQUIRE(sim.state.generation() == 1);
  const Generation& g = *sim.state.current();
  CHECK(g.members == std::vector<std::string>{"m0", "s0", "m2"});
  CHECK(g.src_rank == 0);  // any rank but the one leaving
  CHECK(g.resume_step == s + 1);
  CHECK(g.kind == "planned");
  CHECK(sim.state.history[0].status == "paused");
  CHECK(sim.Plan("m1")["action"] == "exit");
  CHECK(HeartbeatReply(sim.state, "m1")["directive"] == "exit");
  CHECK(sim.state.Find("m1")->status == MemberStatus::kExited);
  CHECK(sim.All<Fence>().empty());
  CHECK(sim.state.migrations[0].state == "reforming");
  sim.BeatAll(s + 1);
  CHECK(sim.state.migrations[0].state == "done");
  CHECK(sim.state.migrations[0].new_member == "s0");
  REQUIRE(sim.Notices("migration_done").size() == 1);
  CHECK(sim.Notices("migration_done")[0].Field("kind") == "planned");
}

// The library's ranks agree on the pause step in band (python/lockstep_train/job.py
// _agree_pause): when no rank read the directive before passing pause_at_step s, they all
// pause together at a later boundary. Their heartbeats past s + 1 and their pause reports
// at that later step are a pause, not a failure: the next generation resumes there.
TEST_CASE("planned migration: ranks that agreed to pause past pause_at_step resume at the reported step",
          "[migration]") {
  auto sim = Formed(3, 1);
  sim.TrainFor(5, 0, 2);
  REQUIRE(sim.Do(MigrationRequested{1, "planned", "maintenance"}).status.ok());
  REQUIRE(sim.state.phase == Phase::kPausing);
  const int64_t s = sim.state.transition.pause_at_step;
  const int64_t late = s + 1 + 4;  // the first boundary at which a rank had read the directive
  for (int64_t step = s; step <= late; ++step) sim.BeatAll(step);
  REQUIRE(sim.state.phase == Phase::kPausing);
  for (const char* m : {"m0", "m1", "m2"}) sim.ReportErr(m, 0, late, "pause");
  REQUIRE(sim.state.generation() == 1);
  const Generation& g = *sim.state.current();
  CHECK(g.kind == "planned");
  CHECK(g.resume_step == late);
  CHECK(g.members == std::vector<std::string>{"m0", "s0", "m2"});
  CHECK(sim.state.history[0].status == "paused");
  CHECK(sim.Notices("failure_detected").empty());
  CHECK(sim.All<Fence>().empty());
  sim.BeatAll(late);
  CHECK(sim.state.migrations[0].state == "done");
}

// A drain moves rank 2 (generation 1, done); later rank 3 dies. The failure's
// transition must not carry the finished migration along (e2e.train-pods-faults:
// the ids of the pause that formed generation 1 were still attached, so rank 2
// was moved a second time, or its migration set back to pending and run again).
MigrationSim DrainedThenKilled(int extra_spares) {
  auto sim = Formed(4, 1);
  int64_t step = sim.TrainFor(5, 0, 2);
  REQUIRE(sim.Do(MigrationRequested{2, "planned", "node a drained"}).status.ok());
  REQUIRE(sim.state.phase == Phase::kPausing);
  const int64_t s = sim.state.transition.pause_at_step;
  for (const char* m : {"m0", "m1", "m2", "m3"}) sim.ReportErr(m, 0, s + 1, "pause");
  REQUIRE(sim.state.generation() == 1);
  REQUIRE(sim.state.current()->members == std::vector<std::string>{"m0", "m1", "s0", "m3"});
  sim.BeatAll(s + 1);
  REQUIRE(sim.state.migrations.at(0).state == "done");
  for (int i = 1; i <= extra_spares; ++i) sim.Register("s" + std::to_string(i), Role::kSpare);
  step = sim.TrainFor(2, s + 1, 2);
  sim.Do(ProcessGone{"m3", "killed by signal 9"});
  REQUIRE(sim.state.phase == Phase::kCollecting);
  for (const char* m : {"m0", "m1", "s0"}) sim.ReportErr(m, 1, step);
  return sim;
}

TEST_CASE("a failure after a finished migration leaves it done (one spare: not pending again)", "[migration]") {
  auto sim = DrainedThenKilled(1);
  REQUIRE(sim.state.generation() == 2);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "m1", "s0", "s1"});
  CHECK(sim.state.current()->kind == "failure");
  CHECK(sim.state.migrations.size() == 1);
  CHECK(sim.state.migrations[0].state == "done");
  CHECK(sim.state.migrations[0].generation == 1);
  CHECK(sim.state.Find("s0")->status == MemberStatus::kAlive);
  // Completing generation 2 and a spare registering later start no pause.
  sim.BeatAll(30);
  sim.Register("s2", Role::kSpare);
  sim.TrainFor(3, 30, 2);
  CHECK(sim.state.phase == Phase::kRunning);
  CHECK(sim.state.generation() == 2);
  CHECK(sim.Notices("migration_pausing").size() == 1);
  CHECK(sim.Notices("migration_done").size() == 1);
}

TEST_CASE("a failure after a finished migration leaves it done (two spares: the rank is not moved again)",
          "[migration]") {
  auto sim = DrainedThenKilled(2);
  REQUIRE(sim.state.generation() == 2);
  // Only the dead rank 3 gets a spare; rank 2 stays with s0, which took it in generation 1.
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "m1", "s0", "s1"});
  CHECK(sim.state.Find("s0")->status == MemberStatus::kAlive);
  CHECK(sim.state.Find("s2")->status == MemberStatus::kAlive);
  CHECK(sim.state.migrations[0].state == "done");
  CHECK(sim.state.migrations[0].new_member == "s0");
}

TEST_CASE("a failure while a migration's re-form joins: the new member keeps the rank", "[migration]") {
  auto sim = Formed(3, 1);
  sim.TrainFor(5, 0, 2);
  REQUIRE(sim.Do(MigrationRequested{1, "planned", "maintenance"}).status.ok());
  const int64_t s = sim.state.transition.pause_at_step;
  for (const char* m : {"m0", "m1", "m2"}) sim.ReportErr(m, 0, s + 1, "pause");
  REQUIRE(sim.state.generation() == 1);
  REQUIRE(sim.state.migrations[0].state == "reforming");
  sim.Register("s1", Role::kSpare);
  // m0 and s0 joined generation 1, m2 dies before it did.
  sim.Beat("m0", 1, s + 1);
  sim.Beat("s0", 1, s + 1);
  sim.Do(ProcessGone{"m2", "killed by signal 9"});
  REQUIRE(sim.state.phase == Phase::kCollecting);
  sim.ReportErr("m0", 1, s + 1);
  sim.ReportErr("s0", 1, s + 1);
  REQUIRE(sim.state.generation() == 2);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s0", "s1"});
  CHECK(sim.state.migrations[0].state == "reforming");
  CHECK(sim.state.migrations[0].generation == 2);
  CHECK(sim.state.migrations[0].old_member == "m1");
  sim.BeatAll(s + 1);
  CHECK(sim.state.migrations[0].state == "done");
  CHECK(sim.state.migrations[0].new_member == "s0");
  CHECK(sim.Notices("migration_done").size() == 1);
}

TEST_CASE("pre-emptive migration pauses with a smaller margin", "[migration]") {
  auto sim = Formed(2, 1);
  REQUIRE(sim.TrainFor(10, 0, 2) == 20);
  sim.Do(MigrationRequested{0, "preemptive", "ECC errors rising"});
  REQUIRE(sim.state.phase == Phase::kPausing);
  CHECK(sim.state.transition.pause_at_step == 20 + 1 + 1);  // 1 + ceil(2 * 0.5 / 2)
}

TEST_CASE("the pause step follows the recent step rate when the job sped up after its first steps", "[migration]") {
  // 10 s at 1 step/s (FSDP2's slow first steps), then 3 s at 8 steps/s: 2.6 steps/s
  // since completion, 8 over the last second. Every rank must read the directive
  // before it reaches the pause step, so the margin is taken at the recent pace.
  for (const char* kind : {"planned", "preemptive"}) {
    auto sim = Formed(2, 1);
    int64_t step = sim.TrainFor(10, 0, 1);
    step = sim.TrainFor(3, step, 8);
    REQUIRE(step == 34);
    sim.Do(MigrationRequested{0, kind, "drain"});
    REQUIRE(sim.state.phase == Phase::kPausing);
    const int64_t margin = std::string(kind) == "planned" ? 2 + 4   // 2 + ceil(8 * 0.5)
                                                          : 1 + 2;  // 1 + ceil(8 * 0.5 / 2)
    CHECK(sim.state.transition.pause_at_step == step + margin);
  }
  // A job that slowed down keeps the margin of its faster pace since completion.
  auto sim = Formed(2, 1);
  int64_t step = sim.TrainFor(4, 0, 8);
  step = sim.TrainFor(2, step, 1);
  REQUIRE(step == 34);
  sim.Do(MigrationRequested{0, "planned", "drain"});
  REQUIRE(sim.state.phase == Phase::kPausing);
  CHECK(sim.state.transition.pause_at_step == step + 2 + 3);  // 34 steps / 6 s: 2 + ceil(5.67 * 0.5)
}

TEST_CASE("a failure while pausing becomes a failure, the migration waits for the next spare", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(10);
  sim.Do(MigrationRequested{0, "planned", "maintenance"});
  REQUIRE(sim.state.phase == Phase::kPausing);
  sim.Do(ProcessGone{"m2", "gone"});
  CHECK(sim.state.phase == Phase::kCollecting);
  sim.ReportErr("m0", 0, 11);
  sim.ReportErr("m1", 0, 11);
  REQUIRE(sim.state.generation() == 1);
  // The only spare went to the dead rank; rank 0 stays put and its migration is pending again.
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "m1", "s0"});
  CHECK(sim.state.migrations[0].state == "pending");
  CHECK(sim.state.Find("m0")->status == MemberStatus::kAlive);
}

TEST_CASE("stale generation and unknown members are refused", "[migration]") {
  auto sim = Formed(2, 1);
  sim.BeatAll(1);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 1);
  REQUIRE(sim.state.generation() == 1);
  auto stale = sim.ReportErr("m0", 0, 1);
  REQUIRE(stale.status.code() == ErrorCode::kConflict);
  CHECK(stale.status.error().message == "stale generation 0: the current generation is 1");
  CHECK(HttpStatus(stale.status.error()) == 409);
  auto dead = sim.ReportErr("m1", 1, 1);
  REQUIRE(dead.status.code() == ErrorCode::kConflict);
  CHECK(sim.Do(Heartbeat{"nobody", 0, 0, "training"}).status.code() == ErrorCode::kNotFound);
  // A replaced or fenced process may not come back under its old id.
  CHECK(sim.Register("m1", Role::kRank, 1).status.code() == ErrorCode::kConflict);
  // ... and its heartbeats are told to exit.
  CHECK(HeartbeatReply(sim.state, "m1")["directive"] == "exit");
}

TEST_CASE("every rank gone: terminal error, plans say exit", "[migration]") {
  auto sim = Formed(2, 1);
  sim.BeatAll(9);
  sim.Do(ProcessGone{"m0", "gone"});
  sim.Do(ProcessGone{"m1", "gone"});
  REQUIRE(sim.state.phase == Phase::kTerminal);
  CHECK(sim.state.terminal_reason == "no replica holds step 9: every rank of generation 0 is gone");
  REQUIRE(sim.Last<Terminal>().size() == 1);
  CHECK(sim.Plan("s0")["action"] == "exit");
}

TEST_CASE("the source dies before the state reached anyone: no replica holds the resume step", "[migration]") {
  auto sim = Formed(2, 2);
  sim.BeatAll(9);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 9);
  REQUIRE(sim.state.generation() == 1);  // m0 (step 9) is the source, s0 joins
  sim.Do(ProcessGone{"m0", "gone"});
  // s0 never reached generation 1 (no heartbeat in it) and, a spare, holds no state:
  // the job fails at once, without waiting for its report.
  REQUIRE(sim.state.phase == Phase::kTerminal);
  CHECK(sim.state.terminal_reason ==
        "no replica holds step 9: none of the 1 live ranks of generation 1 holds a verified state (their transfers "
        "did not complete)");
}


TEST_CASE("a collective error with nobody dead re-forms the same members", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(30);
  sim.ReportErr("m1", 0, 30);
  sim.ReportErr("m0", 0, 31);
  sim.ReportErr("m2", 0, 30);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "m1", "m2"});
  CHECK(sim.state.current()->src_rank == 0);
  CHECK(sim.state.current()->resume_step == 31);
  CHECK(sim.Plan("s0")["action"] == "wait");
  CHECK(!sim.state.refill_active);  // no spare was used
}

TEST_CASE("the rank being migrated dies while pausing: its spare takes it, the migration is done", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(10);
  sim.Do(MigrationRequested{1, "preemptive", "GPU XID 79"});
  REQUIRE(sim.state.phase == Phase::kPausing);
  sim.Do(ProcessGone{"m1", "gone"});  // it failed before the pause step
  sim.ReportErr("m0", 0, 11);
  sim.ReportErr("m2", 0, 11);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s0", "m2"});
  CHECK(sim.state.current()->kind == "failure");
  CHECK(sim.state.migrations[0].state == "reforming");
  sim.BeatAll(11);
  CHECK(sim.state.migrations[0].state == "done");
  CHECK(sim.state.migrations[0].new_member == "s0");
}

TEST_CASE("a rank that never reaches the pause step is hung after the others paused", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(10);
  sim.Do(MigrationRequested{2, "planned", "drain"});
  const int64_t s = sim.state.transition.pause_at_step;
  sim.ReportErr("m0", 0, s + 1, "pause");
  sim.ReportErr("m2", 0, s + 1, "pause");
  // m1 keeps heartbeating but never reports.
  for (int i = 0; i < 9; ++i) {
    sim.now += 0.25;
    sim.KeepAlive(s);
    sim.Do(Tick{});
  }
  CHECK(sim.state.Find("m1")->gone_cause == "hung");
  REQUIRE(sim.All<Fence>().size() == 1);
  // m1 died: the failure rule applies; m0 and m2 had reported, so the next generation is decided
  // with the one spare at rank 1 and rank 2's migration pending again.
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s0", "m2"});
  CHECK(sim.state.migrations[0].state == "pending");
}

TEST_CASE("two migrations with two spares pause together at one step", "[migration]") {
  auto sim = Formed(4, 1);
  sim.BeatAll(5);
  sim.Do(MigrationRequested{0, "planned", "a"});
  REQUIRE(sim.state.phase == Phase::kPausing);  // one spare: rank 0 only
  sim.Do(MigrationRequested{3, "planned", "b"});
  CHECK(sim.state.migrations[1].state == "pending");
  const int64_t s = sim.state.transition.pause_at_step;
  for (const char* m : {"m0", "m1", "m2", "m3"}) sim.ReportErr(m, 0, s + 1, "pause");
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"s0", "m1", "m2", "m3"});
  CHECK(sim.state.current()->src_rank == 1);  // not the rank that leaves
  CHECK(sim.state.current()->store_port == sim.state.Find("m1")->store_port);
  sim.BeatAll(s + 1);
  CHECK(sim.state.migrations[0].state == "done");
  // Rank 3's migration pauses once a spare registers.
  sim.Register("s1", Role::kSpare);
  CHECK(sim.state.phase == Phase::kPausing);
  CHECK(sim.state.migrations[1].state == "pausing");
}

TEST_CASE("a process registering for a rank that died is preferred as that rank's spare", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(2);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.Register("m1-restarted", Role::kRank, 1);  // e.g. restarted by its launcher: not 409, the rank is free
  sim.ReportErr("m0", 0, 2);
  sim.ReportErr("m2", 0, 2);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "m1-restarted", "m2"});
}

TEST_CASE("a process asking for a rank a spare took over joins as a spare, refills the pool and exits at the end",
          "[migration]") {
  // Kubeflow: rank 1's container restarted in place (or its Job recreated the pod at
  // its index) after spare s0 took rank 1 over; the process asks for rank 1 again.
  JobConfig c = Config(3, 1, true);
  c.spares_from_start = true;
  auto sim = Formed(3, 1, c);
  sim.BeatAll(5);
  sim.Do(ProcessGone{"m1", "container train of pod tj-node-0-1-abcde restarted (restart count 1)"});
  sim.ReportErr("m0", 0, 5);
  sim.ReportErr("m2", 0, 5);
  REQUIRE(sim.state.generation() == 1);
  REQUIRE(sim.state.current()->members == std::vector<std::string>{"m0", "s0", "m2"});
  const size_t requested = sim.All<RequestSpare>().size();
  auto back = sim.Register("m1-again", Role::kRank, 1);
  REQUIRE(back.status.ok());  // not 409: a refusal would crash-loop the pod
  const Member* m = sim.state.Find("m1-again");
  REQUIRE(m);
  CHECK(m->role == Role::kSpare);
  CHECK(m->requested_rank == -1);
  CHECK_FALSE(m->hb_intact);  // a restarted process holds no state
  auto reply = RegisterReply(sim.state, "m1-again");
  CHECK(reply["role"] == "spare");
  CHECK_FALSE(reply.contains("rank"));
  CHECK(RegisterReply(sim.state, "m0")["role"] == "rank");
  CHECK(RegisterReply(sim.state, "m0")["rank"] == 0);
  REQUIRE(sim.Notices("registered_as_spare").size() == 1);
  CHECK(sim.Notices("registered_as_spare")[0].Field("holder") == "s0");
  CHECK(sim.Notices("registered_as_spare")[0].Field("rank") == "1");
  // Still exactly one holder of rank 1, and the generation is unchanged.
  CHECK(sim.state.generation() == 1);
  CHECK(sim.state.RankOf("m1-again") == -1);
  CHECK(sim.Plan("m1-again")["action"] == "wait");
  CHECK(sim.Plan("m1-again")["reason"] == "spare in the pool");
  // It fills the pool: no spare beyond the one already requested for s0's place.
  CHECK(sim.state.spares_starting <= 1);
  sim.Advance(0.1);
  CHECK(sim.All<RequestSpare>().size() == requested);
  // The next failure takes it (it is the pool), and it never becomes a source.
  sim.BeatAll(9);
  sim.Do(ProcessGone{"m2", "gone"});
  sim.ReportErr("m0", 1, 9);
  sim.ReportErr("s0", 1, 9);
  REQUIRE(sim.state.generation() == 2);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s0", "m1-again"});
  CHECK(sim.state.current()->src_rank != 2);
  // Before the job ends, another one comes back as a spare; at the end it is told to exit.
  REQUIRE(sim.Register("m2-again", Role::kRank, 2).status.ok());
  CHECK(sim.state.Find("m2-again")->role == Role::kSpare);
  sim.BeatAll(20);
  for (const char* id : {"m0", "s0", "m1-again"}) sim.Beat(id, 2, 20, "done");
  REQUIRE(sim.state.phase == Phase::kFinished);
  CHECK(sim.Plan("m2-again")["action"] == "exit");
  CHECK(sim.Plan("m2-again")["reason"] == "the job finished");
  // One that comes back only after the job finished (a slow restart): a spare told to exit.
  for (const char* id : {"m0", "s0", "m1-again"}) sim.Do(ProcessGone{id, "exited with status 0"});
  REQUIRE(sim.Register("m0-late", Role::kRank, 0).status.ok());
  CHECK(sim.state.Find("m0-late")->role == Role::kSpare);
  CHECK(RegisterReply(sim.state, "m0-late")["role"] == "spare");
  CHECK(sim.Plan("m0-late")["action"] == "exit");
}

TEST_CASE("before generation 0 a second process asking for a held rank is still refused", "[migration]") {
  MigrationSim sim(Config(2));
  REQUIRE(sim.Register("m0", Role::kRank, 0).status.ok());
  CHECK(sim.Register("twin", Role::kRank, 0).status.code() == ErrorCode::kConflict);  // two launches of one rank
  CHECK(sim.Notices("registered_as_spare").empty());
}

TEST_CASE("a heartbeat naming a generation that does not exist is only a sign of life", "[migration]") {
  MigrationSim sim(Config(2));
  sim.Register("m0", Role::kRank, 0);
  auto o = sim.Beat("m0", 0, 0, "waiting");  // before generation 0 formed
  CHECK(o.status.ok());
  CHECK(sim.state.Find("m0")->hb_generation == -1);
  CHECK(HeartbeatReply(sim.state, "m0")["generation"] == -1);
}

TEST_CASE("done: members that ran every step exit without a failure, the job is finished", "[migration]") {
  auto sim = Formed(3, 1, Config(3, 1, true));
  sim.BeatAll(99);
  sim.Beat("m0", 0, 100, "done");
  sim.Do(ProcessGone{"m0", "exited with status 0"});
  // m2 exits before its own "done" arrived: it had passed the final barrier too.
  sim.Do(ProcessGone{"m2", "exited with status 0"});
  CHECK(sim.state.phase == Phase::kRunning);
  sim.Beat("m1", 0, 100, "done");
  CHECK(sim.state.phase == Phase::kFinished);
  CHECK(sim.All<Fence>().empty());
  CHECK(sim.All<RequestSpare>().empty());
  CHECK(sim.Notices("failure_detected").empty());
  CHECK(sim.Notices("job_finished").size() == 1);
  CHECK(sim.state.Find("m0")->gone_cause == "finished");
  CHECK(sim.Plan("s0")["action"] == "exit");
  CHECK(sim.Plan("s0")["reason"] == "the job finished");
  CHECK(HeartbeatReply(sim.state, "s0")["directive"] == "exit");
  // Nothing happens after that: no timeouts, no re-forms.
  sim.Advance(60);
  CHECK(sim.state.phase == Phase::kFinished);
  CHECK(sim.All<Fence>().empty());
  CHECK(sim.Do(MigrationRequested{0, "planned", "x"}).status.code() == ErrorCode::kConflict);
}

TEST_CASE("the job finishing before a planned migration's pause step: finished, not failed", "[migration]") {
  // The pause step lies beyond the job's last step (100): the ranks run to the
  // end, say done and exit. The job is finished, the migration failed with
  // "the job finished first", and the waiting spare is told the job finished.
  auto sim = Formed(3, 1, Config(3, 1, true));
  REQUIRE(sim.TrainFor(10, 80, 2) == 100);
  sim.Do(MigrationRequested{1, "planned", "drain node-a"});
  REQUIRE(sim.state.phase == Phase::kPausing);
  REQUIRE(sim.state.transition.pause_at_step > 100);
  sim.Beat("m0", 0, 100, "done");
  sim.Do(ProcessGone{"m0", "exited with status 0"});
  sim.Beat("m1", 0, 100, "done");
  sim.Do(ProcessGone{"m1", "exited with status 0"});
  sim.Beat("m2", 0, 100, "done");
  CHECK(sim.state.phase == Phase::kFinished);
  CHECK(sim.Notices("failure_detected").empty());
  CHECK(sim.Notices("job_finished").size() == 1);
  CHECK(sim.All<Fence>().empty());
  CHECK(sim.state.Find("m0")->gone_cause == "finished");
  CHECK(sim.state.migrations[0].state == "failed");
  CHECK(sim.state.migrations[0].error == "the job finished first");
  CHECK(sim.Plan("s0")["action"] == "exit");
  CHECK(sim.Plan("s0")["reason"] == "the job finished");
  sim.Do(ProcessGone{"m2", "exited with status 0"});
  sim.Advance(60);
  CHECK(sim.state.phase == Phase::kFinished);
  CHECK(sim.Notices("failure_detected").empty());
}

TEST_CASE("a restart while collecting reports gives members a fresh grace", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(4);
  sim.Do(ProcessGone{"m2", "gone"});
  sim.ReportErr("m0", 0, 4);
  // The coordinator is down for 30 s, then restarts from its file: m1 is not hung yet.
  sim.now += 30;
  sim.Do(Restarted{});
  CHECK(sim.state.Alive("m1"));
  sim.TrainFor(1.5, 4, 0);
  CHECK(sim.state.Alive("m1"));
  sim.ReportErr("m1", 0, 4);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "m1", "s0"});
}

TEST_CASE("a member that reported is not expired by heartbeat while it frees its group", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(4);
  sim.Do(ProcessGone{"m2", "gone"});
  sim.ReportErr("m0", 0, 4);
  // m1 reports too, then sends nothing for 3 s (twice the heartbeat timeout): its
  // heartbeat thread starves while gloo's destructor holds the GIL.
  sim.ReportErr("m1", 0, 4);
  REQUIRE(sim.state.generation() == 1);
  for (int i = 0; i < 12; ++i) {
    sim.Advance(0.25);
    sim.Beat("m0", 1, 4, "waiting");
    sim.Beat("s0", 1, 4, "waiting");
  }
  CHECK(sim.state.Find("m1")->status == MemberStatus::kAlive);
  CHECK(sim.Last<Fence>().empty());
  sim.Beat("m1", 1, 4);
  sim.BeatAll(4);
  CHECK(sim.state.current()->status == "complete");
  CHECK(sim.state.generation() == 1);
  // Once it heartbeats in the new generation, the timeout applies to it again.
  for (int i = 0; i < 8; ++i) {
    sim.Advance(0.25);
    sim.Beat("m0", 1, 5);
    sim.Beat("s0", 1, 5);
  }
  CHECK(sim.state.Find("m1")->status == MemberStatus::kDead);
  CHECK(sim.state.Find("m1")->gone_cause == "heartbeat_timeout");
}

TEST_CASE("a survivor that dies while waiting for a spare needs one too", "[migration]") {
  auto sim = Formed(3, 0);
  sim.BeatAll(4);
  sim.Do(ProcessGone{"m2", "gone"});
  sim.ReportErr("m0", 0, 4);
  sim.ReportErr("m1", 0, 4);
  REQUIRE(sim.state.phase == Phase::kWaitingSpare);
  sim.Do(ProcessGone{"m0", "gone"});
  CHECK(sim.state.waiting_reason ==
        "waiting for a spare: ranks 0,2 of generation 0 need 2, 0 registered, 0 starting; no spare will be started "
        "(no --spare-command): start one with LOCKSTEP_ROLE=spare");
  sim.Register("a", Role::kSpare);
  CHECK(sim.state.phase == Phase::kWaitingSpare);
  sim.Register("b", Role::kSpare);
  REQUIRE(sim.state.generation() == 1);
  CHECK(sim.state.current()->members == std::vector<std::string>{"a", "m1", "b"});
  CHECK(sim.state.current()->src_rank == 1);
  CHECK(sim.state.current()->store_port == sim.state.Find("m1")->store_port);
}

TEST_CASE("OnFailure: form, wait for a spare, or give up", "[migration]") {
  using K = FailureDecision::Kind;
  using V = std::vector<std::optional<int64_t>>;
  const auto no = std::nullopt;
  struct Row {
    const char* what;
    V committed;
    std::vector<int> leaving;
    size_t spares;
    int64_t resume;
    K kind;
    int src;
    int64_t step;
    std::string reason;
  };
  for (const auto& r : std::vector<Row>{
           {"one dead, a spare", {10, no, 11}, {}, 1, 5, K::kForm, 2, 11, ""},
           {"two dead, one spare", {no, 10, no}, {}, 1, 5, K::kWaitForSpare, 1, 10,
            "waiting for a spare: ranks 0,2 of generation 3 need 2, 1 registered, 0 starting"},
           {"nobody dead (a transient error)", {4, 4}, {}, 0, 4, K::kForm, 0, 4, ""},
           {"the leaving rank is not the source", {7, 7, 7}, {0}, 1, 7, K::kForm, 1, 7, ""},
           {"the leaving rank is the only one left", {no, 7}, {1}, 1, 7, K::kForm, 1, 7, ""},
           {"every rank gone", {no, no}, {}, 2, 5, K::kTerminal, -1, 0,
            "no replica holds step 9: every rank of generation 3 is gone"},
           {"the source died before the state reached anyone", {no, 0}, {}, 1, 5, K::kTerminal, -1, 0,
            "no replica holds step 5: the survivors of generation 3 are at step 0 at most"},
       }) {
    INFO(r.what);
    FailureInput in;
    in.generation = 3;
    in.resume_step = r.resume;
    in.max_known = 9;
    in.committed = r.committed;
    in.leaving = r.leaving;
    in.spares = r.spares;
    auto d = OnFailure(in);
    CHECK(d.kind == r.kind);
    CHECK(d.reason == r.reason);
    if (r.kind != K::kTerminal) {
      CHECK(d.source.src_rank == r.src);
      CHECK(d.source.resume_step == r.step);
    }
  }
}

TEST_CASE("OnFailure: a restored step below the plan's resume step is what the survivors must hold", "[migration]") {
  // The buddy mirror (pure FSDP): generation 3 was planned at step 6 (the survivors'
  // committed step), every rank went back to the mirror of step 4 and replays from it.
  using K = FailureDecision::Kind;
  using V = std::vector<std::optional<int64_t>>;
  const auto no = std::nullopt;
  struct Row {
    const char* what;
    V committed;
    std::optional<int64_t> restored;
    K kind;
    int64_t step;
    std::string reason;
  };
  for (const auto& r : std::vector<Row>{
           {"failed in the re-mirror right after the restore", {4, no, 4, 4}, 4, K::kForm, 4, ""},
           {"failed while replaying, one step after the restore", {5, no, 5, 5}, 4, K::kForm, 5, ""},
           {"failed after the replay caught up", {7, no, 7, 7}, 4, K::kForm, 7, ""},
           {"below even the restored step", {3, no, 3, 3}, 4, K::kTerminal, 0,
            "no replica holds step 4: the survivors of generation 3 are at step 3 at most"},
           {"nobody said what it restored (an older library)", {4, no, 4, 4}, no, K::kTerminal, 0,
            "no replica holds step 6: the survivors of generation 3 are at step 4 at most"},
           {"restored above the plan (a source ahead of its report) changes nothing", {5, no, 5, 5}, 7,
            K::kTerminal, 0, "no replica holds step 6: the survivors of generation 3 are at step 5 at most"},
       }) {
    INFO(r.what);
    FailureInput in;
    in.generation = 3;
    in.resume_step = 6;
    in.restored_step = r.restored;
    in.max_known = 6;
    in.committed = r.committed;
    in.spares = 1;
    auto d = OnFailure(in);
    CHECK(d.kind == r.kind);
    CHECK(d.reason == r.reason);
    CHECK(d.dead == std::vector<int>{1});
    if (r.kind == K::kForm) {
      CHECK(d.source.src_rank == 0);
      CHECK(d.source.resume_step == r.step);
    }
  }
}

TEST_CASE("a failure while the ranks replay from the buddy mirror forms the next generation at the restored step",
          "[migration]") {
  // Generation 1 is planned at step 6; its members restore the mirror of step 4 and say
  // so (restored_step); the first spare then dies in the re-mirror, before a step.
  auto sim = Formed(4, 2);
  sim.BeatAll(6);
  sim.Do(ProcessGone{"m1", "exited (killed by signal 9)"});
  for (const char* id : {"m0", "m2", "m3"}) sim.ReportErr(id, 0, 6);
  REQUIRE(sim.state.generation() == 1);
  REQUIRE(sim.state.current()->members == std::vector<std::string>{"m0", "s0", "m2", "m3"});
  CHECK(sim.state.current()->resume_step == 6);
  CHECK(sim.state.current()->restored_step == -1);
  SECTION("the heartbeats after the restore say it") {
    for (const char* id : {"m0", "s0", "m2", "m3"}) {
      Heartbeat hb{id, 1, 4, "training"};
      hb.restored_step = 4;
      REQUIRE(sim.Do(hb).status.ok());
    }
    CHECK(sim.state.current()->status == "complete");
    CHECK(sim.state.current()->restored_step == 4);
    sim.Do(ProcessGone{"s0", "exited (killed by signal 9)"});
    for (const char* id : {"m0", "m2", "m3"}) sim.ReportErr(id, 1, 4);
  }
  SECTION("only the reports say it (the failure came before any such heartbeat)") {
    for (const char* id : {"m0", "s0", "m2", "m3"}) sim.Beat(id, 1, 6, "waiting");  // plan received
    sim.Do(ProcessGone{"s0", "exited (killed by signal 9)"});
    for (const char* id : {"m0", "m2", "m3"}) {
      Report rep{id, 1, 4, "error", "connection reset by peer"};
      rep.restored_step = 4;
      REQUIRE(sim.Do(rep).status.ok());
    }
  }
  REQUIRE(sim.state.phase == Phase::kRunning);
  REQUIRE(sim.state.generation() == 2);
  CHECK(sim.state.history[1].restored_step == 4);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s1", "m2", "m3"});
  CHECK(sim.state.current()->src_rank == 0);
  CHECK(sim.state.current()->resume_step == 4);
  CHECK(sim.Plan("s1")["resume_step"] == 4);
  // A failure while generation 2 replays (step 5, below both 6 and the plan's 4 + 2) is
  // again judged against what its members restored.
  for (const char* id : {"m0", "s1", "m2", "m3"}) {
    Heartbeat hb{id, 2, 4, "training"};
    hb.restored_step = 4;
    sim.Do(hb);
  }
  sim.BeatAll(5);
  sim.Do(ProcessGone{"m3", "exited (killed by signal 9)"});
  for (const char* id : {"m0", "s1", "m2"}) sim.ReportErr(id, 2, 5);
  CHECK(sim.state.phase == Phase::kWaitingSpare);  // no spare left, but not terminal
  sim.Register("s2", Role::kSpare);
  REQUIRE(sim.state.generation() == 3);
  CHECK(sim.state.current()->resume_step == 5);
}

TEST_CASE("without a restored step a failure below the plan's step still ends the job", "[migration]") {
  // The same, from a library that does not say what it restored: the survivors at step
  // 4 are below generation 1's step 6, which nobody holds.
  auto sim = Formed(4, 2);
  sim.BeatAll(6);
  sim.Do(ProcessGone{"m1", "exited (killed by signal 9)"});
  for (const char* id : {"m0", "m2", "m3"}) sim.ReportErr(id, 0, 6);
  REQUIRE(sim.state.generation() == 1);
  for (const char* id : {"m0", "s0", "m2", "m3"}) sim.Beat(id, 1, 4);
  // A restored step named for another generation, or by a member outside it, does not count.
  Heartbeat stale{"s1", 1, 4, "waiting"};
  stale.restored_step = 4;
  sim.Do(stale);
  CHECK(sim.state.current()->restored_step == -1);
  sim.Do(ProcessGone{"s0", "exited (killed by signal 9)"});
  for (const char* id : {"m0", "m2", "m3"}) sim.ReportErr(id, 1, 4);
  REQUIRE(sim.state.phase == Phase::kTerminal);
  CHECK(sim.state.terminal_reason == "no replica holds step 6: the survivors of generation 1 are at step 4 at most");
}

TEST_CASE("the pause step follows the observed step rate and heartbeat interval", "[migration]") {
  // 20 steps/s, heartbeats every 0.25 s: two intervals are 10 steps.
  auto sim = Formed(2, 1);
  REQUIRE(sim.TrainFor(2, 0, 20) == 40);
  sim.Do(MigrationRequested{1, "planned", "fast steps"});
  REQUIRE(sim.state.phase == Phase::kPausing);
  CHECK(sim.state.transition.pause_at_step == 40 + 2 + 10);
}

TEST_CASE("a migration right after a re-form waits until the step rate is measured", "[migration]") {
  auto sim = Formed(2, 2);
  sim.TrainFor(1, 0, 4);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 4);
  sim.BeatAll(4);  // generation 1 complete now
  REQUIRE(sim.state.current()->status == "complete");
  sim.Do(MigrationRequested{0, "planned", "x"});
  CHECK(sim.state.phase == Phase::kRunning);  // the rate since completion is not known yet
  sim.TrainFor(1, 4, 4);
  CHECK(sim.state.phase == Phase::kPausing);
}

// --- faults during a recovery (issue 20) ---

TEST_CASE("a member without a verified state is never the source, none left: the job fails loudly", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(40);
  sim.Do(ProcessGone{"m0", "exited (killed by signal 9)"});
  for (const char* m : {"m1", "m2"}) sim.ReportErr(m, 0, 40);
  REQUIRE(sim.state.generation() == 1);  // s0 takes rank 0, m1 is the source
  CHECK(sim.state.current()->members == std::vector<std::string>{"s0", "m1", "m2"});
  CHECK(sim.state.current()->src_rank == 1);
  // The source dies mid-transfer. The spare (rank 0) reports step 40 but without a
  // verified state (its transfer never completed); m2 kept its own state at 40.
  sim.Do(ProcessGone{"m1", "exited (killed by signal 9)"});
  Report spare{"s0", 1, 40, "error", "connection reset", false};
  REQUIRE(sim.Do(spare).status.ok());
  sim.ReportErr("m2", 1, 40);
  sim.Register("s1", Role::kSpare);
  REQUIRE(sim.state.generation() == 2);
  CHECK(sim.state.current()->src_rank == 2);  // not rank 0 (s0), though it is alive "at step 40"
  CHECK(sim.state.current()->resume_step == 40);
  // Now the only intact member dies in its turn: the two left hold no verified state.
  sim.Do(ProcessGone{"m2", "exited (killed by signal 9)"});
  REQUIRE(sim.Do(Report{"s0", 2, 40, "error", "connection reset", false}).status.ok());
  REQUIRE(sim.Do(Report{"s1", 2, 0, "error", "connection reset", false}).status.ok());
  CHECK(sim.state.phase == Phase::kTerminal);
  CHECK(sim.state.terminal_reason ==
        "no replica holds step 40: none of the 2 live ranks of generation 2 holds a verified state (their transfers "
        "did not complete)");
  CHECK(sim.Plan("s0")["action"] == "exit");
}

TEST_CASE("a heartbeat without a verified state keeps a member out of the source choice", "[migration]") {
  auto sim = Formed(2, 1);
  sim.BeatAll(5);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 5);
  REQUIRE(sim.state.generation() == 1);
  // s0 heartbeats training (not intact) and m0 dies before any report: no source.
  Heartbeat hb{"s0", 1, 5, "waiting", false, false};
  sim.Do(hb);
  CHECK_FALSE(sim.state.Find("s0")->hb_intact);
  sim.Do(ProcessGone{"m0", "gone"});
  sim.Do(Report{"s0", 1, 5, "error", "reset", false});
  CHECK(sim.state.phase == Phase::kTerminal);
  CHECK(sim.state.terminal_reason.rfind("no replica holds step 5", 0) == 0);
}

TEST_CASE("a failed generation: plans say wait, heartbeats say abort until the member reported", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(7);
  CHECK(HeartbeatReply(sim.state, "m0")["directive"] == "none");
  sim.Do(ProcessGone{"m2", "exited (killed by signal 9)"});
  REQUIRE(sim.state.phase == Phase::kCollecting);
  // A member still at the store (or in a collective) learns at once that g ended.
  CHECK(sim.Plan("m0")["action"] == "wait");
  CHECK(sim.Plan("m0")["generation"] == 0);
  auto hb = HeartbeatReply(sim.state, "m0");
  CHECK(hb["directive"] == "abort");
  CHECK(hb["reason"] == "generation 0 ended (rank 2 died (member m2): process 1002 exited (killed by signal 9))");
  CHECK(HeartbeatReply(sim.state, "s0")["directive"] == "none");  // a spare is not in g
  sim.ReportErr("m0", 0, 7);
  CHECK(HeartbeatReply(sim.state, "m0")["directive"] == "none");  // it reported
  CHECK(HeartbeatReply(sim.state, "m1")["directive"] == "abort");
}

TEST_CASE("a member blocked in a collective is not hung: it gets the join timeout to report", "[migration]") {
  auto sim = Formed(3, 1);
  sim.BeatAll(7);
  sim.Do(ProcessGone{"m2", "exited (killed by signal 9)"});
  sim.ReportErr("m0", 0, 7);
  // m1 waits in a collective behind a peer (it heartbeats so); grace is 2 s.
  Heartbeat blocked{"m1", 0, 7, "training", true, true};
  for (int i = 0; i < 8; ++i) {  // 4 s: twice the grace
    sim.now += 0.5;
    sim.Do(blocked);
    sim.Beat("s0", -1, 0, "waiting");
  }
  CHECK(sim.state.Find("m1")->status == MemberStatus::kAlive);
  CHECK(sim.All<Fence>().empty());
  sim.ReportErr("m1", 0, 7);
  CHECK(sim.state.generation() == 1);
  // Without the flag the same wait is a hang: fenced after the grace.
  auto sim2 = Formed(3, 1);
  sim2.BeatAll(7);
  sim2.Do(ProcessGone{"m2", "exited (killed by signal 9)"});
  sim2.ReportErr("m0", 0, 7);
  for (int i = 0; i < 8; ++i) {
    sim2.now += 0.5;
    sim2.Beat("m1", 0, 7);
    sim2.Beat("s0", -1, 0, "waiting");
  }
  CHECK(sim2.state.Find("m1")->status == MemberStatus::kDead);
  CHECK(sim2.state.Find("m1")->gone_cause == "hung");
  // And a blocked member that never reports is fenced at the join timeout.
  auto sim3 = Formed(3, 1);
  sim3.BeatAll(7);
  sim3.Do(ProcessGone{"m2", "gone"});
  sim3.ReportErr("m0", 0, 7);
  for (int i = 0; i < 44; ++i) {  // 22 s
    sim3.now += 0.5;
    sim3.Do(blocked);
    sim3.Beat("s0", -1, 0, "waiting");
  }
  CHECK(sim3.state.Find("m1")->status == MemberStatus::kDead);
  CHECK(sim3.state.Find("m1")->gone_cause == "hung");
}

TEST_CASE("a generation that fails before a member reached it is not waited on for that member", "[migration]") {
  auto sim = Formed(3, 2);
  sim.BeatAll(6);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 6);
  sim.ReportErr("m2", 0, 6);
  REQUIRE(sim.state.generation() == 1);
  // The spare for rank 1 dies while m0 and m2 are still between groups (no heartbeat
  // of generation 1 yet): the coordinator decides generation 2 at once.
  sim.now += 0.2;
  sim.Do(ProcessGone{"s0", "gone"});
  CHECK(sim.state.generation() == 2);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s1", "m2"});
  CHECK(sim.state.current()->resume_step == 6);
  CHECK(sim.All<Fence>().empty());
  // A member that did heartbeat generation 2 is waited on (it may be in a collective).
  sim.now += 0.2;
  sim.Beat("m0", 2, 6, "waiting");
  sim.Do(ProcessGone{"s1", "gone"});
  CHECK(sim.state.phase == Phase::kCollecting);
  sim.ReportErr("m0", 2, 6);
  CHECK(sim.state.phase == Phase::kWaitingSpare);
}

TEST_CASE("a survivor that never reached the failed generation holds the step it last reported", "[migration]") {
  // Steps faster than heartbeats (seen on a 16-core machine): the last heartbeats of
  // generation 0 said step 2, the reports said 6. Generation 1 fails before m0 and m2
  // heartbeat in it: they still hold step 6, so generation 2 resumes there (it used to
  // take their heartbeats' step 2 and give up: "the survivors ... are at step 2 at most").
  auto sim = Formed(3, 2);
  sim.BeatAll(2);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 6);
  sim.ReportErr("m2", 0, 6);
  REQUIRE(sim.state.generation() == 1);
  REQUIRE(sim.state.current()->resume_step == 6);
  sim.now += 0.05;
  sim.Do(ProcessGone{"s0", "gone"});
  CHECK(sim.state.phase != Phase::kTerminal);
  REQUIRE(sim.state.generation() == 2);
  CHECK(sim.state.current()->members == std::vector<std::string>{"m0", "s1", "m2"});
  CHECK(sim.state.current()->resume_step == 6);
}

TEST_CASE("waiting for spares that will come is not 'exhausted'", "[migration]") {
  auto sim = Formed(2, 0, Config(2, 1, /*launch=*/true));
  sim.BeatAll(3);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 3);
  REQUIRE(sim.state.phase == Phase::kWaitingSpare);
  CHECK_FALSE(sim.state.spares_exhausted);
  CHECK(sim.All<RequestSpare>().size() == 1);
  // Three launches that never register: launches stop, and the wait says so.
  for (int i = 0; i < 3; ++i) {
    sim.Do(SpareProcessExited{9000 + i, "exited with status 1", ""});
    sim.Advance(0.1);
  }
  CHECK(sim.state.spares_exhausted);
  CHECK(sim.state.waiting_reason.find("spare launches stopped after 3 failed in a row") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::migration
