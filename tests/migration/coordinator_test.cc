// The coordinator runtime over HTTP with fake ports and simulated time: pid
// liveness, fencing, spare launching, the state store, restarts, bad requests.
#include <catch2/catch.hpp>
#include <thread>

#include "fake_clock.h"
#include "fake_coordinator_ports.h"
#include "local_http.h"
#include "lockstep/coordinator/coordinator.h"
#include "lockstep/migration/state_json.h"

namespace lockstep::coordinator {
namespace {

using nlohmann::json;
namespace m = lockstep::migration;

struct Reply {
  long status = 0;
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
};

Reply Call(int port, const std::string& path, const std::string& post = {}, const char* method = nullptr) {
  LocalReply r = LocalHttp(port, path, post, method);
  return {r.status, std::move(r.body)};
}

m::JobConfig Config(int world, int spares = 0, bool launch = false) {
  m::JobConfig c;
  c.job = "rt";
  c.world_size = world;
  c.heartbeat_timeout_s = 1.5;  // the tests' clock steps are sized to this
  c.spares = spares;
  c.can_launch_spares = launch;
  return c;
}

// A coordinator with fakes, serving on a free port. Tick() is called by the test.
struct Rig {
  // `down_s`: simulated time before Begin() (a coordinator that was down).
  // `options.max_held_plan_polls` long polls get server threads of their own.
  explicit Rig(m::JobState initial, bool restored = false, double down_s = 0, CoordinatorOptions options = {})
      : server(HttpServerOptions{.request_timeout = std::chrono::milliseconds(60000),
                                 .threads = 2 + options.max_held_plan_polls}),
        coord(std::move(initial), restored, CoordinatorPorts{&clock, &fencer, &launcher, &probe, &store, &local, &registry},
              options) {
    coord.AddHandlers(server);
    REQUIRE(server.Start("127.0.0.1", 0).ok());
    Advance(down_s);
    coord.Begin();
  }
  ~Rig() {
    coord.Drain();
    server.Stop();
  }

  Reply Post(const std::string& path, const json& body) { return Call(server.port(), path, body.dump()); }
  Reply Get(const std::string& path) { return Call(server.port(), path); }
  Reply Register(const std::string& id, const char* role, int rank, int pid) {
    json b{{"member", id}, {"role", role}, {"host", "127.0.0.1"}, {"store_port", 30000 + pid % 1000}, {"pid", pid}};
    if (rank >= 0) b["rank"] = rank;
    return Post("/v1/register", b);
  }
  Reply Beat(const std::string& id, int64_t g, int64_t step, const char* state = "training") {
    return Post("/v1/heartbeat", {{"member", id}, {"generation", g}, {"step", step}, {"state", state}});
  }
  Reply Report(const std::string& id, int64_t g, int64_t step) {
    return Post("/v1/report", {{"member", id}, {"generation", g}, {"committed_step", step}, {"reason", "error"},
                               {"error", "connection reset"}});
  }
  json Plan(const std::string& id) { return Get("/v1/plan?member=" + id).Json(); }
  void Tick() { coord.Tick(); }
  // Until `n` plan polls are held on the server's threads (generous limit: the
  // machine is shared); woken when one is, no polling.
  bool WaitHeld(int n) { return coord.WaitHeldPlanPolls(n, std::chrono::seconds(20)); }
  void Advance(double s) {
    clock.Advance(std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(s)));
  }

  FakeClock clock;
  FakeFencer fencer;
  FakeLauncher launcher;
  FakeProbe probe;
  MemoryStateStore store;
  LocalHosts local;
  metrics::Registry registry;
  HttpServer server;
  Coordinator coord;
};

TEST_CASE("runtime: a gone pid is a crash, the hot spare takes the rank", "[migration]") {
  Rig rig(*m::NewJob(Config(2)));
  REQUIRE(rig.Register("m0", "rank", 0, 101).status == 200);
  REQUIRE(rig.Register("m1", "rank", 1, 102).status == 200);
  REQUIRE(rig.Register("s0", "spare", -1, 103).status == 200);
  CHECK(rig.Plan("m0")["action"] == "train");
  rig.Beat("m0", 0, 7);
  rig.Beat("m1", 0, 7);
  rig.probe.Kill(102);
  rig.Tick();
  auto st = rig.coord.Snapshot();
  CHECK(st.Find("m1")->gone_cause == "pid_gone");
  CHECK(rig.fencer.fenced().empty());
  REQUIRE(rig.Report("m0", 0, 7).status == 200);
  json plan = rig.Plan("s0");
  CHECK(plan["action"] == "train");
  CHECK(plan["generation"] == 1);
  CHECK(plan["rank"] == 1);
  CHECK(plan["resume_step"] == 7);
  CHECK(rig.Plan("m1")["action"] == "exit");
  // The state file has generation 1; /v1/state shows its history.
  auto saved = m::StateFromString(*rig.store.text());
  REQUIRE(saved.ok());
  CHECK(saved->generation() == 1);
  json state = rig.Get("/v1/state").Json();
  CHECK(state["history"][1]["cause"] == "rank 1 died (member m1): process 102 is gone");
  std::string metrics = rig.Get("/metrics").body;
  CHECK(metrics.find("lockstep_migration_failures_total{cause=\"pid_gone\"} 1") != std::string::npos);
  CHECK(metrics.find("lockstep_migration_generation 1") != std::string::npos);
}

TEST_CASE("runtime: a silent member is fenced through the fencer", "[migration]") {
  Rig rig(*m::NewJob(Config(2)));
  rig.Register("m0", "rank", 0, 101);
  rig.Register("m1", "rank", 1, 102);
  for (int i = 0; i < 8; ++i) {
    rig.Advance(0.25);
    rig.Beat("m0", 0, 3);
    rig.Tick();
  }
  REQUIRE(rig.fencer.fenced() == std::vector<std::string>{"m1"});
  CHECK(rig.coord.Snapshot().phase == m::Phase::kCollecting);
}

TEST_CASE("runtime: cold spares are launched, a launch that never registers is retried", "[migration]") {
  Rig rig(*m::NewJob(Config(2, 0, true)));
  rig.Register("m0", "rank", 0, 101);
  rig.Register("m1", "rank", 1, 102);
  rig.probe.Kill(102);
  rig.Tick();
  rig.Report("m0", 0, 1);
  REQUIRE(rig.launcher.launched().size() == 1);
  rig.launcher.Exit(rig.launcher.launched()[0], "exited with status 127");
  rig.Tick();
  REQUIRE(rig.launcher.launched().size() == 2);
  CHECK(rig.Plan("m0")["reason"] == "waiting for a spare: rank 1 of generation 0 need 1, 0 registered, 1 starting");
  // The second one registers (with its launched pid) and takes rank 1.
  int pid = rig.launcher.launched()[1];
  REQUIRE(rig.Register("c1", "spare", -1, pid).status == 200);
  CHECK(rig.Plan("c1")["rank"] == 1);
  // When it exits later, the reaped pid is a member's: that member is dead.
  rig.launcher.Exit(pid, "killed by signal 9");
  rig.Tick();
  CHECK(rig.coord.Snapshot().Find("c1")->gone_cause == "pid_gone");
  // A member's exit is not a failed launch; its rank needs a spare again: one more launch.
  CHECK(rig.coord.Snapshot().failed_launches == 0);
  CHECK(rig.launcher.launched().size() == 3);
}

TEST_CASE("runtime: restart from the saved state carries on without declaring anyone dead", "[migration]") {
  std::string saved;
  double before = 0;
  {
    Rig rig(*m::NewJob(Config(2)));
    rig.Register("m0", "rank", 0, 101);
    rig.Register("m1", "rank", 1, 102);
    rig.Register("s0", "spare", -1, 103);
    rig.Beat("m0", 0, 4);
    rig.Beat("m1", 0, 4);
    saved = *rig.store.text();
    before = rig.Get("/v1/state").Json()["now"];
  }
  auto loaded = m::StateFromString(saved);
  REQUIRE(loaded.ok());
  Rig rig(*loaded, /*restored=*/true, /*down_s=*/30);
  rig.Advance(1.0);
  rig.Tick();
  auto st = rig.coord.Snapshot();
  CHECK(st.generation() == 0);
  for (const char* id : {"m0", "m1", "s0"}) CHECK(st.Alive(id));
  CHECK(rig.fencer.fenced().empty());
  CHECK(rig.Get("/v1/state").Json()["now"].get<double>() > before);
  CHECK(rig.Beat("m0", 0, 5).Json()["directive"] == "none");
}

TEST_CASE("runtime: bad requests get 400/404/409 with a message and the server keeps serving", "[migration]") {
  Rig rig(*m::NewJob(Config(1)));
  struct Row { std::string path; std::string body; const char* method; long status; std::string error; };
  for (const auto& r : std::vector<Row>{
           {"/v1/register", "{not json", nullptr, 400, "register: the body is not valid JSON"},
           {"/v1/heartbeat", "{\"member\":1}", nullptr, 400, "heartbeat: \"member\" must be a string"},
           {"/v1/report", std::string(1000, '['), nullptr, 400, "report: the body is not valid JSON"},
           {"/v1/heartbeat", R"({"member":"x","generation":0,"step":0,"state":"training"})", nullptr, 404,
            "unknown member x: register first (POST /v1/register)"},
           {"/v1/migrations", R"({"rank":0,"kind":"planned"})", nullptr, 409,
            "generation 0 is not formed yet; retry once it is"},
           {"/v1/register", "", "PUT", 400, "PUT /v1/register is not supported (use POST)"},
           {"/v1/plan?member=x", "", "POST", 400, "POST /v1/plan is not supported (use GET)"},
       }) {
    Reply rep = Call(rig.server.port(), r.path, r.body, r.method);
    CHECK(rep.status == r.status);
    CHECK(rep.Json()["error"] == r.error);
  }
  CHECK(rig.Get("/v1/plan").status == 400);
  CHECK(rig.Get("/v1/plan?member=nobody").status == 404);
  CHECK(rig.Get("/healthz").status == 200);
  CHECK(rig.Register("m0", "rank", 0, 101).status == 200);
  CHECK(rig.Plan("m0")["action"] == "train");
}

TEST_CASE("runtime: a failing state store is logged and training goes on", "[migration]") {
  Rig rig(*m::NewJob(Config(1)));
  rig.store.Fail(true);
  CHECK(rig.Register("m0", "rank", 0, 101).status == 200);
  CHECK(rig.Plan("m0")["action"] == "train");
  rig.store.Fail(false);
  rig.Register("s0", "spare", -1, 102);
  auto saved = m::StateFromString(*rig.store.text());
  REQUIRE(saved.ok());
  CHECK(saved->members.size() == 2);
}

TEST_CASE("runtime: the saver writes the newest snapshot, in order, and a plan waits for its generation's save",
          "[migration]") {
  Rig rig(*m::NewJob(Config(2)));
  rig.coord.StartSaver();
  REQUIRE(rig.Register("m0", "rank", 0, 101).status == 200);
  REQUIRE(rig.coord.WaitSaved(std::chrono::seconds(20)));
  const size_t before = rig.store.history().size();
  rig.store.Hold(true);
  // Generation 0 is decided; its snapshot's save hangs. The reply to the register
  // comes at once, but no plan hands generation 0 out before it is saved.
  REQUIRE(rig.Register("m1", "rank", 1, 102).status == 200);
  REQUIRE(rig.store.AwaitHeld(std::chrono::seconds(20)));
  REQUIRE(rig.coord.Snapshot().generation() == 0);
  json plan = rig.Plan("m0");
  CHECK(plan["action"] == "wait");
  CHECK(plan["reason"] == "generation 0 is being saved");
  // Heartbeats are answered meanwhile; two more changes: the second replaces the first.
  CHECK(rig.Beat("m0", 0, 1).status == 200);
  REQUIRE(rig.Register("s0", "spare", -1, 103).status == 200);
  REQUIRE(rig.Register("s1", "spare", -1, 104).status == 200);
  rig.store.Hold(false);
  REQUIRE(rig.coord.WaitSaved(std::chrono::seconds(20)));
  CHECK(rig.Plan("m0")["action"] == "train");
  CHECK(rig.Plan("m1")["rank"] == 1);
  // Written: generation 0's snapshot, then the newest one (s0 and s1); the one with
  // s0 alone never, and nothing older after a newer one.
  auto history = rig.store.history();
  REQUIRE(history.size() == before + 2);
  auto first = m::StateFromString(history[before]);
  auto last = m::StateFromString(history[before + 1]);
  REQUIRE(first.ok());
  REQUIRE(last.ok());
  CHECK(first->generation() == 0);
  CHECK(first->members.size() == 2);
  CHECK(last->members.size() == 4);
  CHECK(*rig.store.text() == history.back());
}

TEST_CASE("runtime: a failed save is retried by the saver until it is written", "[migration]") {
  Rig rig(*m::NewJob(Config(1)));
  rig.coord.StartSaver();
  rig.store.Fail(true);
  REQUIRE(rig.Register("m0", "rank", 0, 101).status == 200);
  REQUIRE(rig.coord.WaitSaved(std::chrono::seconds(20)));  // tried once and failed
  CHECK(rig.Plan("m0")["action"] == "train");              // training goes on
  rig.store.Fail(false);
  // No further change: the saver tries again by itself (backoff from 200 ms).
  for (int i = 0; i < 200 && !(rig.store.text() && rig.store.text()->find("\"m0\"") != std::string::npos); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(rig.store.text());
  CHECK(m::StateFromString(*rig.store.text())->members.count("m0") == 1);
}

TEST_CASE("runtime: the tick thread notices a gone pid while requests arrive", "[migration]") {
  Rig rig(*m::NewJob(Config(2)));
  rig.coord.Start();
  rig.Register("m0", "rank", 0, 101);
  rig.Register("m1", "rank", 1, 102);
  rig.Register("s0", "spare", -1, 103);
  const int waits = rig.probe.Kill(102);
  // Heartbeats arrive while the tick thread runs; the fake probe wakes the thread at
  // once, and two more waits mean a whole tick began after the kill.
  for (int i = 0; i < 20; ++i) rig.Beat("m0", 0, 1);
  REQUIRE(rig.probe.AwaitWaits(waits + 2));
  REQUIRE_FALSE(rig.coord.Snapshot().Alive("m1"));
  rig.Report("m0", 0, 1);
  REQUIRE(rig.coord.WaitSaved(std::chrono::seconds(20)));  // the saver thread runs: the plan waits for the save
  CHECK(rig.Plan("s0")["rank"] == 1);
  rig.coord.Stop();
  CHECK(m::StateFromString(*rig.store.text())->generation() == 1);
}

// Long polls (GET /v1/plan?wait_ms=N&generation=G). The holds below are long
// (60 s, or half a 120 s heartbeat timeout): a test proceeds once the
// coordinator reports the poll held, never on a sleep.
CoordinatorOptions LongPolls(int held) {
  CoordinatorOptions o;
  o.max_held_plan_polls = held;
  o.max_plan_wait = std::chrono::milliseconds(60000);
  return o;
}

m::JobConfig SlowHeartbeats(int world) {
  m::JobConfig c = Config(world);
  c.heartbeat_timeout_s = 120;  // holds of up to 60 s
  return c;
}

TEST_CASE("runtime: a held plan poll is answered when the member's plan becomes news, other calls go on",
          "[migration]") {
  Rig rig(*m::NewJob(SlowHeartbeats(2)), false, 0, LongPolls(2));
  REQUIRE(rig.Register("m0", "rank", 0, 101).status == 200);
  REQUIRE(rig.Register("s0", "spare", -1, 103).status == 200);
  Reply held;
  std::thread poller([&] { held = rig.Get("/v1/plan?member=s0&wait_ms=60000&generation=-1"); });
  REQUIRE(rig.WaitHeld(1));
  // While it is held, every other call is served; generation 0 forming is no news for a spare.
  REQUIRE(rig.Register("m1", "rank", 1, 102).status == 200);
  CHECK(rig.Plan("m0")["action"] == "train");
  CHECK(rig.Beat("m0", 0, 4).status == 200);
  CHECK(rig.Beat("m1", 0, 4).status == 200);
  CHECK(rig.coord.HeldPlanPolls() == 1);
  // Rank 1 dies; once m0 reported, generation 1 puts the spare at rank 1: the poll returns.
  rig.probe.Kill(102);
  rig.Tick();
  REQUIRE(rig.Report("m0", 0, 4).status == 200);
  poller.join();
  CHECK(held.status == 200);
  json plan = held.Json();
  CHECK(plan["action"] == "train");
  CHECK(plan["generation"] == 1);
  CHECK(plan["rank"] == 1);
  CHECK(plan["resume_step"] == 4);
  CHECK(plan.contains("held_ms"));
  CHECK(rig.coord.HeldPlanPolls() == 0);
  // The survivor, which formed generation 0, gets generation 1 at once.
  json m0 = rig.Get("/v1/plan?member=m0&wait_ms=60000&generation=0").Json();
  CHECK(m0["generation"] == 1);
  CHECK_FALSE(m0.contains("held_ms"));
}

TEST_CASE("runtime: plain polls, polls with news and polls beyond the cap are answered at once", "[migration]") {
  Rig rig(*m::NewJob(SlowHeartbeats(1)), false, 0, LongPolls(1));
  REQUIRE(rig.Register("s0", "spare", -1, 103).status == 200);
  // The plain poll of older clients.
  json plain = rig.Plan("s0");
  CHECK(plain["action"] == "wait");
  CHECK_FALSE(plain.contains("held_ms"));
  // A short hold that sees no news ends with the plan as it is, marked held.
  json short_hold = rig.Get("/v1/plan?member=s0&wait_ms=1&generation=-1").Json();
  CHECK(short_hold["action"] == "wait");
  CHECK(short_hold.contains("held_ms"));
  // The one slot taken, the next long poll is answered at once (the client falls back to polling).
  Reply first;
  std::thread poller([&] { first = rig.Get("/v1/plan?member=s0&wait_ms=60000&generation=-1"); });
  REQUIRE(rig.WaitHeld(1));
  json over = rig.Get("/v1/plan?member=s0&wait_ms=60000&generation=-1").Json();
  CHECK(over["action"] == "wait");
  CHECK_FALSE(over.contains("held_ms"));
  // Drain (shutdown) answers the held one now and holds no more.
  rig.coord.Drain();
  poller.join();
  CHECK(first.status == 200);
  CHECK(first.Json()["action"] == "wait");
  CHECK(first.Json().contains("held_ms"));
  CHECK_FALSE(rig.Get("/v1/plan?member=s0&wait_ms=60000&generation=-1").Json().contains("held_ms"));
  // A rank with a formed generation it has not joined yet: news, at once.
  rig.coord.Start();  // un-drains
  REQUIRE(rig.Register("m0", "rank", 0, 101).status == 200);
  // (Its plan is handed out once the saver wrote the generation: wait for that first.)
  REQUIRE(rig.coord.WaitSaved(std::chrono::seconds(20)));
  json news = rig.Get("/v1/plan?member=m0&wait_ms=60000&generation=-1").Json();
  CHECK(news["action"] == "train");
  CHECK_FALSE(news.contains("held_ms"));
  CHECK(rig.Get("/v1/plan?member=m0&wait_ms=x").status == 400);
  CHECK(rig.Get("/v1/plan?member=nobody&wait_ms=60000").status == 404);
  rig.coord.Stop();
}

TEST_CASE("runtime: without held-poll threads, or past half the heartbeat timeout, nothing is held longer",
          "[migration]") {
  {
    Rig rig(*m::NewJob(SlowHeartbeats(1)));  // max_held_plan_polls = 0: the default
    REQUIRE(rig.Register("s0", "spare", -1, 103).status == 200);
    CHECK_FALSE(rig.Get("/v1/plan?member=s0&wait_ms=60000&generation=-1").Json().contains("held_ms"));
  }
  // Config(): heartbeat timeout 1.5 s, so a hold ends after 0.75 s whatever wait_ms says:
  // a member that only polls stays alive.
  Rig rig(*m::NewJob(Config(1)), false, 0, LongPolls(1));
  REQUIRE(rig.Register("s0", "spare", -1, 103).status == 200);
  Reply r = rig.Get("/v1/plan?member=s0&wait_ms=60000&generation=-1");
  REQUIRE(r.status == 200);  // within LocalHttp's 20 s, not 60 s
  CHECK(r.Json()["held_ms"].get<int64_t>() >= 750);
}

}  // namespace
}  // namespace lockstep::coordinator
