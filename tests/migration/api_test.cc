// The API's pure parsing and replies, and the state file's JSON (round trip,
// damaged files, a restart from it).
#include <catch2/catch.hpp>

#include "lockstep/migration/state_json.h"
#include "migration_sim.h"

namespace lockstep::migration {
namespace {

JobConfig Config(int world) {
  JobConfig c;
  c.job = "api";
  c.world_size = world;
  return c;
}

TEST_CASE("register bodies: what is wrong is said", "[migration]") {
  struct Row { std::string body; std::string error; };
  for (const auto& r : std::vector<Row>{
           {"", "register: the body is not valid JSON"},
           {"[1]", "register: the body must be a JSON object"},
           {R"({"role":"rank","host":"h","store_port":1,"pid":2})", "register: \"member\" is missing"},
           {R"({"member":"","role":"rank","host":"h","store_port":1,"pid":2})", "register: \"member\" is empty"},
           {R"({"member":"m","role":"boss","host":"h","store_port":1,"pid":2})",
            "register: \"role\" must be \"rank\" or \"spare\" (got \"boss\")"},
           {R"({"member":"m","role":"rank","rank":"1","host":"h","store_port":1,"pid":2})",
            "register: \"rank\" must be an integer"},
           {R"({"member":"m","role":"rank","host":"h","store_port":70000,"pid":2})",
            "register: \"store_port\" must be between 1 and 65535 (got 70000)"},
           {R"({"member":"m","role":"rank","host":"h","store_port":1})", "register: \"pid\" is missing"},
       }) {
    auto p = ParseRegister(r.body);
    REQUIRE(!p.ok());
    CHECK(p.code() == ErrorCode::kInvalidArgument);
    CHECK(p.error().message == r.error);
    CHECK(HttpStatus(p.error()) == 400);
  }
  auto ok = ParseRegister(R"({"member":"m","role":"rank","rank":3,"host":"h","store_port":1,"pid":2})");
  REQUIRE(ok.ok());
  CHECK(ok->rank == 3);
  CHECK(ok->role == Role::kRank);
}

TEST_CASE("register bodies: the member's pod (Kubernetes) is optional and checked", "[migration]") {
  auto plain = ParseRegister(R"({"member":"m","role":"rank","host":"h","store_port":1,"pid":2})");
  REQUIRE(plain.ok());
  CHECK(plain->pod_name.empty());
  CHECK(plain->pod_uid.empty());
  auto pod = ParseRegister(
      R"({"member":"m","role":"spare","host":"10.1.2.3","store_port":1,"pid":1,"pod_name":"job-spare-0-ab1cd","pod_uid":"0b7c-11"})");
  REQUIRE(pod.ok());
  CHECK(pod->pod_name == "job-spare-0-ab1cd");
  CHECK(pod->pod_uid == "0b7c-11");
  struct Row { std::string body; std::string error; };
  for (const auto& r : std::vector<Row>{
           {R"({"member":"m","role":"rank","host":"h","store_port":1,"pid":2,"pod_name":7})",
            "register: \"pod_name\" must be a string"},
           {R"({"member":"m","role":"rank","host":"h","store_port":1,"pid":2,"pod_name":"Job_0"})",
            "register: \"pod_name\" must be a Kubernetes object name (lowercase letters, digits, '-' and '.', at most "
            "253 characters; got \"Job_0\")"},
           {R"({"member":"m","role":"rank","host":"h","store_port":1,"pid":2,"pod_uid":"u"})",
            "register: \"pod_uid\" is given without \"pod_name\""},
       }) {
    auto p = ParseRegister(r.body);
    REQUIRE(!p.ok());
    CHECK(p.error().message == r.error);
  }
}

TEST_CASE("state JSON round trip keeps the members' pods", "[migration]") {
  JobConfig c = Config(2);
  c.spares_from_start = true;
  MigrationSim sim(c);
  Registered r;
  r.member = "m0";
  r.role = Role::kRank;
  r.rank = 0;
  r.host = "10.0.0.1";
  r.store_port = 4000;
  r.pid = 1;
  r.pod_name = "job-node-0-0-abcde";
  r.pod_uid = "uid-0";
  REQUIRE(sim.Do(r).status.ok());
  nlohmann::json j = StateToJson(sim.state);
  CHECK(j["members"][0]["pod_name"] == "job-node-0-0-abcde");
  CHECK(j["members"][0]["pod_uid"] == "uid-0");
  CHECK(j["config"]["spares_from_start"] == true);
  auto back = StateFromString(j.dump());
  REQUIRE(back.ok());
  CHECK(back->Find("m0")->pod_name == "job-node-0-0-abcde");
  CHECK(back->Find("m0")->pod_uid == "uid-0");
  CHECK(back->config.spares_from_start);
  CHECK(StateToJson(*back) == j);
  // A state file written before pods were kept loads with none.
  j["members"][0].erase("pod_name");
  j["members"][0].erase("pod_uid");
  j["config"].erase("spares_from_start");
  auto old = StateFromString(j.dump());
  REQUIRE(old.ok());
  CHECK(old->Find("m0")->pod_name.empty());
  CHECK_FALSE(old->config.spares_from_start);
}

TEST_CASE("FenceChanged records a deferred, done or skipped fence, and the state file keeps it", "[migration]") {
  MigrationSim sim(Config(2));
  sim.RegisterRanks(2);
  REQUIRE(sim.Do(FenceChanged{"m1", FenceChanged::What::kDeferred, 1234.5, "deferred by the restart grace"})
              .status.ok());
  CHECK_FALSE(sim.state.Find("m1")->fenced);
  nlohmann::json j = StateToJson(sim.state);
  auto back = StateFromString(j.dump());
  REQUIRE(back.ok());
  CHECK(back->Find("m1")->fence_due == 1234.5);
  CHECK(back->Find("m1")->fence_result == "deferred by the restart grace");
  CHECK(StateToJson(*back) == j);
  REQUIRE(sim.Do(FenceChanged{"m1", FenceChanged::What::kSkipped, 0, "skipped: the pod stays"}).status.ok());
  CHECK_FALSE(sim.state.Find("m1")->fenced);
  CHECK(sim.state.Find("m1")->fence_due == 0);
  REQUIRE(sim.Do(FenceChanged{"m1", FenceChanged::What::kDone, 0, "done"}).status.ok());
  CHECK(sim.state.Find("m1")->fenced);
  CHECK(sim.Do(FenceChanged{"nobody", FenceChanged::What::kDone, 0, ""}).status.error().code == ErrorCode::kNotFound);
  // A state file written before fences were deferred loads with none pending.
  j["members"][1].erase("fence_due");
  j["members"][1].erase("fence_result");
  auto old = StateFromString(j.dump());
  REQUIRE(old.ok());
  CHECK(old->Find("m1")->fence_due == 0);
}

TEST_CASE("heartbeat, report and migration bodies", "[migration]") {
  CHECK(ParseHeartbeat(R"({"member":"m","generation":0,"step":1,"state":"idle"})").error().message ==
        "heartbeat: \"state\" must be \"training\", \"waiting\" or \"done\" (got \"idle\")");
  CHECK(ParseHeartbeat(R"({"member":"m","generation":0,"step":-1,"state":"training"})").error().message ==
        "heartbeat: \"step\" must be between 0 and 9007199254740992 (got -1)");
  CHECK(ParseReport(R"({"member":"m","generation":0,"committed_step":1,"reason":"bored"})").error().message ==
        "report: \"reason\" must be \"error\" or \"pause\" (got \"bored\")");
  auto rep = ParseReport(R"({"member":"m","generation":2,"committed_step":7,"reason":"error","error":"reset"})");
  REQUIRE(rep.ok());
  CHECK(rep->committed_step == 7);
  CHECK(rep->error == "reset");
  CHECK(rep->state_intact);  // absent: an older library, whose state is always its own
  auto spare = ParseReport(
      R"({"member":"m","generation":2,"committed_step":7,"reason":"error","state_intact":false})");
  REQUIRE(spare.ok());
  CHECK_FALSE(spare->state_intact);
  CHECK(ParseReport(R"({"member":"m","generation":2,"committed_step":7,"reason":"error","state_intact":"no"})")
            .error()
            .message == "report: \"state_intact\" must be true or false");
  auto hb = ParseHeartbeat(
      R"({"member":"m","generation":0,"step":1,"state":"training","state_intact":false,"in_collective":true})");
  REQUIRE(hb.ok());
  CHECK_FALSE(hb->state_intact);
  CHECK(hb->in_collective);
  auto plain = ParseHeartbeat(R"({"member":"m","generation":0,"step":1,"state":"training"})");
  CHECK(plain->state_intact);
  CHECK_FALSE(plain->in_collective);
  CHECK(ParseHeartbeat(R"({"member":"m","generation":0,"step":1,"state":"training","in_collective":1})")
            .error()
            .message == "heartbeat: \"in_collective\" must be true or false");
  // restored_step: optional (-1 when absent: an older library, or not synced yet), >= 0.
  CHECK(plain->restored_step == -1);
  CHECK(rep->restored_step == -1);
  CHECK(ParseHeartbeat(R"({"member":"m","generation":1,"step":4,"state":"training","restored_step":4})")
            ->restored_step == 4);
  CHECK(ParseReport(R"({"member":"m","generation":1,"committed_step":5,"reason":"error","restored_step":4})")
            ->restored_step == 4);
  CHECK(ParseReport(R"({"member":"m","generation":1,"committed_step":5,"reason":"error","restored_step":-2})")
            .error()
            .message == "report: \"restored_step\" must be between 0 and 9007199254740992 (got -2)");
  CHECK(ParseMigration(R"({"rank":1,"kind":"now"})").error().message ==
        "migrations: \"kind\" must be \"planned\" or \"preemptive\" (got \"now\")");
  CHECK(ParseMigration(R"({"rank":1,"kind":"planned"})")->reason == "requested through the API");
}

TEST_CASE("plan query: member parameter, URL-decoded", "[migration]") {
  CHECK(*MemberFromQuery("member=host-1-abc") == "host-1-abc");
  CHECK(*MemberFromQuery("x=1&member=a%2Db") == "a-b");
  CHECK(MemberFromQuery("x=1").error().message ==
        "plan: the query parameter \"member\" is missing (GET /v1/plan?member=ID)");
  CHECK(!MemberFromQuery("member=").ok());
}

TEST_CASE("plan query: the long-poll parameters are optional and checked", "[migration]") {
  auto plain = ParsePlanQuery("member=m0");
  REQUIRE(plain.ok());
  CHECK(plain->member == "m0");
  CHECK(plain->wait_ms == 0);  // a plain poll: answered at once
  CHECK(plain->known_generation == -1);
  auto lp = ParsePlanQuery("member=a%2Db&wait_ms=1000&generation=3");
  REQUIRE(lp.ok());
  CHECK(lp->member == "a-b");
  CHECK(lp->wait_ms == 1000);
  CHECK(lp->known_generation == 3);
  CHECK(ParsePlanQuery("wait_ms=1000&generation=-1&member=s0")->known_generation == -1);
  CHECK(ParsePlanQuery("wait_ms=10").error().message ==
        "plan: the query parameter \"member\" is missing (GET /v1/plan?member=ID)");
  CHECK(ParsePlanQuery("member=m0&wait_ms=soon").error().message ==
        "plan: the query parameter \"wait_ms\" must be an integer between 0 and 60000 (got \"soon\")");
  CHECK(ParsePlanQuery("member=m0&wait_ms=-5").error().message ==
        "plan: the query parameter \"wait_ms\" must be an integer between 0 and 60000 (got \"-5\")");
  CHECK(!ParsePlanQuery("member=m0&wait_ms=60001").ok());
  CHECK(!ParsePlanQuery("member=m0&wait_ms=").ok());
  CHECK(!ParsePlanQuery("member=m0&wait_ms=99999999999999999999999").ok());
  CHECK(ParsePlanQuery("member=m0&generation=-2").error().message ==
        "plan: the query parameter \"generation\" must be an integer between -1 and 9007199254740992 (got \"-2\")");
}

TEST_CASE("plan news: what ends a long poll for a member that last formed generation G", "[migration]") {
  MigrationSim sim(Config(2));
  sim.Register("s0", Role::kSpare);
  CHECK(sim.Plan("s0")["action"] == "wait");  // generation 0 not formed: nothing to act on
  CHECK_FALSE(PlanIsNews(sim.Plan("s0"), -1));
  sim.RegisterRanks(2);
  // Generation 0 is news for the ranks, which formed none; the spare still waits.
  CHECK(PlanIsNews(sim.Plan("m0"), -1));
  CHECK_FALSE(PlanIsNews(sim.Plan("m0"), 0));  // the generation it already trains in
  CHECK_FALSE(PlanIsNews(sim.Plan("s0"), -1));
  sim.BeatAll(3);
  sim.ReportErr("m0", 0, 3);
  sim.Do(ProcessGone{"m1", "gone"});
  // Generation 1 puts the spare at rank 1: news for it and for the survivor m0 (in g0).
  REQUIRE(sim.Plan("s0")["generation"] == 1);
  CHECK(PlanIsNews(sim.Plan("s0"), -1));
  CHECK(PlanIsNews(sim.Plan("m0"), 0));
  CHECK_FALSE(PlanIsNews(sim.Plan("m0"), 1));
  CHECK(sim.Plan("m1")["action"] == "exit");  // an exit is always news
  CHECK(PlanIsNews(sim.Plan("m1"), 5));
  CHECK_FALSE(PlanIsNews(nlohmann::json::object(), -1));
  CHECK_FALSE(PlanIsNews(nlohmann::json{{"action", "train"}}, -1));
}

MigrationSim Busy() {
  MigrationSim sim(Config(3));
  sim.RegisterRanks(3);
  sim.Register("s0", Role::kSpare);
  sim.Register("s1", Role::kSpare);
  sim.BeatAll(4);
  sim.Do(ProcessGone{"m1", "gone"});
  sim.ReportErr("m0", 0, 4);
  sim.ReportErr("m2", 0, 5);
  sim.Do(MigrationRequested{2, "planned", "drain"});
  return sim;
}

TEST_CASE("state JSON round trip keeps everything Decide needs", "[migration]") {
  auto sim = Busy();
  REQUIRE(sim.state.generation() == 1);
  nlohmann::json j = StateToJson(sim.state);
  auto back = StateFromString(j.dump());
  REQUIRE(back.ok());
  CHECK(StateToJson(*back) == j);
  CHECK(j["phase"] == "running");
  CHECK(j["generation"] == 1);
  CHECK(j["history"][1]["cause"] == "rank 1 died (member m1): process 1001 gone");
  CHECK(j["history"][1]["detected_at"].get<double>() > 0);
  CHECK(j["history"][1]["decided_at"].get<double>() > 0);
  CHECK(j["migrations"][0]["state"] == "pending");
}

TEST_CASE("damaged state files are errors, not crashes", "[migration]") {
  auto sim = Busy();
  nlohmann::json j = StateToJson(sim.state);
  CHECK(StateFromString("{").error().message == "state: not valid JSON");
  CHECK(!StateFromString("{}").ok());
  auto bad = j;
  bad["history"][0]["members"] = {"m0", "ghost", "m2"};
  CHECK(StateFromString(bad.dump()).error().message == "state: generation 0 names unknown member ghost");
  bad = j;
  bad["history"][0]["members"] = {"m0"};
  CHECK(StateFromString(bad.dump()).error().message == "state: generation 0 has 1 members, world size is 3");
  bad = j;
  bad["members"][0]["status"] = 17;
  CHECK(!StateFromString(bad.dump()).ok());
  bad = j;
  bad["migrations"][0]["rank"] = 9;
  CHECK(!StateFromString(bad.dump()).ok());
}

TEST_CASE("restart from the state file: members count as alive as of the restart", "[migration]") {
  auto sim = Busy();
  auto loaded = StateFromString(StateToJson(sim.state).dump());
  REQUIRE(loaded.ok());
  MigrationSim after(Config(3));
  after.state = *loaded;
  after.now = sim.now + 60;  // the coordinator was down for a minute
  after.Do(Restarted{});
  CHECK(after.All<Fence>().empty());
  for (const char* m : {"m0", "s0", "m2"}) CHECK(after.state.Alive(m));
  // The job carries on: generation 1 completes, then the pending migration pauses.
  after.Beat("s1", -1, 0, "waiting");
  after.BeatAll(5);
  CHECK(after.state.current()->status == "complete");
  after.TrainFor(2, 5, 2);  // the step rate is measured, then the pause goes out
  CHECK(after.state.phase == Phase::kPausing);
  CHECK(HeartbeatReply(after.state, "m2")["directive"] == "pause");
}

}  // namespace
}  // namespace lockstep::migration
