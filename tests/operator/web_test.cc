// The web page: the pure view model (web_view.h) from cached objects shaped
// like the API server's, and WebPage (web_page.h) over a real HttpServer:
// GET only, the embedded assets, the history its informer handlers record.
#include <catch2/catch.hpp>

#include "fake_clock.h"
#include "fake_kube_api.h"
#include "local_http.h"
#include "lockstep/kube/informer.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/web_page.h"
#include "lockstep/operator/web_view.h"

namespace lockstep::op {
namespace {

using kube::Json;

Json RailCond(const std::string& rail, const std::string& status, const std::string& reason, const std::string& at) {
  return {{"type", "Rail-" + rail},
          {"status", status},
          {"reason", reason},
          {"message", rail + " " + reason},
          {"lastTransitionTime", at}};
}

Json Health(const std::string& node, const std::string& phase, std::vector<Json> conditions, int64_t bound_ns) {
  return {{"apiVersion", "lockstep.dev/v1alpha1"},
          {"kind", "FabricHealth"},
          {"metadata", {{"name", node}, {"labels", {{"lockstep.dev/policy", "default"}}}}},
          {"status",
           {{"phase", phase},
            {"policy", "default"},
            {"railsUp", 2},
            {"railsTotal", 2},
            {"flapsLastHour", 1},
            {"auditResult", "Pass"},
            {"clock", {{"state", "LOCKED"}, {"errorBoundNs", bound_ns}, {"offsetNs", -12}, {"peers", 3}}},
            {"nodePublicKey", "c2VjcmV0LXB1YmxpYy1rZXk="},
            {"probeAddresses", {"10.0.0.1:7311"}},
            {"conditions", conditions}}}};
}

Json Pod(const std::string& name, const std::string& role, const std::string& rank, const std::string& node) {
  Json labels = {{"lockstep.dev/job", "llama"}, {"lockstep.dev/role", role}};
  if (!rank.empty()) labels["lockstep.dev/rank"] = rank;
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", labels}}},
          {"spec",
           {{"nodeName", node},
            {"containers", {{{"name", "train"}, {"env", {{{"name", "TOKEN"}, {"value", "hunter2"}}}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

struct Fixture {
  std::vector<Json> healths{
      Health("gpu-b", "Degraded",
             {RailCond("rail0", "True", "RailUp", "2026-11-29T10:00:00Z"),
              RailCond("rail1", "False", "RailDown", "2026-11-29T10:05:00Z"),
              {{"type", "Ready"}, {"status", "False"}, {"reason", "RailDown"}, {"message", "rail1 down"}}},
             1500),
      Health("gpu-a", "Healthy",
             {RailCond("rail0", "True", "RailUp", "2026-11-29T09:00:00Z"),
              RailCond("rail1", "True", "PathsDown", "2026-11-29T10:06:00Z"),
              RailCond("rail2", "Unknown", "Probing", "2026-11-29T10:07:00Z")},
             400)};
  std::vector<Json> policies{
      {{"metadata", {{"name", "default"}}}, {"spec", {{"clockSync", {{"maxErrorBoundNs", 1000}}}}}}};
  std::vector<Json> jobs{
      {{"metadata", {{"name", "llama"}, {"namespace", "ml"}, {"annotations", {{"secret-ish", "do-not-show"}}}}},
       {"spec", {{"replicas", 11}, {"spares", 1}}},
       {"status",
        {{"phase", "Running"},
         {"readyReplicas", 11},
         {"availableSpares", 1},
         {"migrations", 1},
         {"lastMigration",
          {{"rank", 2},
           {"fromPod", "llama-rank-2"},
           {"toPod", "llama-spare-0"},
           {"reason", "PodFailed"},
           {"durationMs", 812}}}}}}};
  std::vector<Json> pods{Pod("llama-rank-10", "rank", "10", "gpu-b"), Pod("llama-rank-2", "rank", "2", "gpu-a"),
                         Pod("llama-spare-1", "spare", "", "gpu-b"),
                         Pod("llama-coordinator", "coordinator", "", "cpu-0"),
                         Pod("llama-old", "retired", "", "gpu-a")};
  std::vector<Json> audits{
      {{"metadata", {{"name", "before-run"}, {"creationTimestamp", "2026-11-29T09:00:00Z"}}},
       {"status",
        {{"phase", "Completed"},
         {"nodes", 2},
         {"passed", 1},
         {"failed", 1},
         {"pending", 0},
         {"failingChecks", {{{"check", "backend.mtu"}, {"nodes", 1}, {"nodeNames", {"gpu-b"}}}}}}}}};
  std::vector<Json> node_audits{
      {{"metadata", {{"name", "before-run.gpu-b"}}},
       {"spec", {{"fleetAudit", "before-run"}, {"nodeName", "gpu-b"}}},
       {"status",
        {{"phase", "Completed"},
         {"verdict", "Fail"},
         {"passed", 2},
         {"failed", 1},
         {"notPresent", 1},
         {"checks",
          {{{"id", "backend.mtu"},
            {"subject", "rail1"},
            {"observed", "1500"},
            {"expected", "9000"},
            {"verdict", "Fail"}},
           {{"id", "backend.up"}, {"subject", "rail1"}, {"verdict", "Pass"}},
           {{"id", "software.kernel"}, {"observed", "6.1"}, {"verdict", "Pass"}},
           {{"id", "memory.ecc_mode"}, {"verdict", "NotPresent"}}}}}}},
      {{"metadata", {{"name", "other.gpu-b"}}}, {"spec", {{"fleetAudit", "other"}, {"nodeName", "gpu-b"}}}}};

  WebViewInputs Inputs() const {
    WebViewInputs in;
    for (const Json& j : healths) in.healths.push_back(&j);
    for (const Json& j : policies) in.policies.push_back(&j);
    for (const Json& j : jobs) in.training_jobs.push_back(&j);
    for (const Json& j : pods) in.job_pods.push_back(&j);
    for (const Json& j : audits) in.fleet_audits.push_back(&j);
    for (const Json& j : node_audits) in.node_audits.push_back(&j);
    in.now = WallTime(std::chrono::seconds(1795917600));  // 2026-11-29T10:00:00Z
    return in;
  }
};

TEST_CASE("web view: the fleet grid has every node and the union of rails, coloured by state", "[web]") {
  Fixture f;
  Json v = BuildWebView(f.Inputs());
  CHECK(v["rails"] == Json({"rail0", "rail1", "rail2"}));
  REQUIRE(v["nodes"].size() == 2);
  const Json& b = v["nodes"][0];
  CHECK(b["name"] == "gpu-b");
  CHECK(b["phase"] == "Degraded");
  CHECK(b["rails"][1] == Json({{"name", "rail1"},
                               {"state", "down"},
                               {"reason", "RailDown"},
                               {"message", "rail1 RailDown"},
                               {"since", "2026-11-29T10:05:00Z"}}));
  CHECK(b["ready"]["reason"] == "RailDown");
  const Json& a = v["nodes"][1];
  CHECK(a["rails"][1]["state"] == "degraded");
  CHECK(a["rails"][2]["state"] == "unknown");
  CHECK(v["summary"]["nodes"] == 2);
  CHECK(v["summary"]["railsUp"] == 4);
  CHECK(v["summary"]["phases"] == Json({{"Degraded", 1}, {"Healthy", 1}}));
}

TEST_CASE("web view: rail states from the condition's status and reason", "[web]") {
  CHECK(RailState("True", "RailUp") == "up");
  CHECK(RailState("True", "PathsDown") == "degraded");
  CHECK(RailState("False", "RailDown") == "down");
  CHECK(RailState("Unknown", "Probing") == "unknown");
  CHECK(RailState("", "") == "unknown");
}

TEST_CASE("web view: clock error bounds against the node's policy", "[web]") {
  Fixture f;
  f.policies[0]["spec"]["clockSync"]["maxErrorBoundNs"] = 2000;
  Json v = BuildWebView(f.Inputs());
  REQUIRE(v["clock"].size() == 2);
  CHECK(v["clock"][0] == Json({{"node", "gpu-b"},
                               {"maxErrorBoundNs", 2000},
                               {"state", "LOCKED"},
                               {"errorBoundNs", 1500},
                               {"offsetNs", -12},
                               {"peers", 3}}));
  f.policies.clear();  // no policy: the CRD's default
  CHECK(BuildWebView(f.Inputs())["clock"][1]["maxErrorBoundNs"] == 1000);
}

TEST_CASE("web view: the flap timeline merges recorded transitions, newest first, bounded", "[web]") {
  Fixture f;
  WebViewInputs in = f.Inputs();
  in.recorded_flaps = {{"2026-11-29T10:01:00Z", "gpu-b", "rail1", "up", "RailUp", "back"},
                       // the same as a current condition's: not twice
                       {"2026-11-29T10:05:00Z", "gpu-b", "rail1", "down", "RailDown", "rail1 RailDown"}};
  Json v = BuildWebView(in);
  std::vector<std::string> times;
  for (const Json& t : v["flaps"]) times.push_back(t["time"].get<std::string>() + " " + t["node"].get<std::string>());
  CHECK(times == std::vector<std::string>{"2026-11-29T10:07:00Z gpu-a", "2026-11-29T10:06:00Z gpu-a",
                                          "2026-11-29T10:05:00Z gpu-b", "2026-11-29T10:01:00Z gpu-b",
                                          "2026-11-29T10:00:00Z gpu-b", "2026-11-29T09:00:00Z gpu-a"});
  in.max_flaps = 2;
  CHECK(BuildWebView(in)["flaps"].size() == 2);
}

TEST_CASE("web view: the audit tree groups each node's checks by area in the audit's order", "[web]") {
  Fixture f;
  Json v = BuildWebView(f.Inputs());
  REQUIRE(v["audits"].size() == 1);
  const Json& a = v["audits"][0];
  CHECK(a["name"] == "before-run");
  CHECK(a["failed"] == 1);
  CHECK(a["failingChecks"][0]["nodeNames"] == Json({"gpu-b"}));
  REQUIRE(a["nodeAudits"].size() == 1);  // other.gpu-b belongs to another audit
  const Json& n = a["nodeAudits"][0];
  CHECK(n["node"] == "gpu-b");
  CHECK(n["verdict"] == "Fail");
  std::vector<std::string> areas;
  for (const Json& ar : n["areas"]) areas.push_back(ar["area"]);
  CHECK(areas == std::vector<std::string>{"software", "memory", "backend"});
  const Json& backend = n["areas"][2];
  CHECK(backend["passed"] == 1);
  CHECK(backend["failed"] == 1);
  CHECK(backend["checks"][0] == Json({{"id", "backend.mtu"},
                                      {"subject", "rail1"},
                                      {"observed", "1500"},
                                      {"expected", "9000"},
                                      {"verdict", "Fail"}}));
  CHECK(n["areas"][1]["notPresent"] == 1);
  // The fleet view carries failed checks only; the rest are counted.
  CHECK(backend["checks"].size() == 1);
  CHECK(backend["omitted"] == 1);
  CHECK(n["areas"][0]["checks"].empty());
  CHECK(n["areas"][0]["omitted"] == 1);
  // The drill-down has every check.
  Json full = NodeAuditView(f.node_audits[0]);
  CHECK(full["name"] == "before-run.gpu-b");
  REQUIRE(full["areas"].size() == 3);
  CHECK(full["areas"][2]["checks"].size() == 2);
  CHECK(full["areas"][2]["omitted"] == 0);
  CHECK(full["areas"][2]["checks"][1]["id"] == "backend.up");
}

TEST_CASE("web view: a job's ranks in rank order with their nodes, spares, coordinator, migrations", "[web]") {
  Fixture f;
  WebViewInputs in = f.Inputs();
  Json earlier = {{"rank", 0}, {"fromPod", "llama-rank-0"}, {"toPod", "llama-spare-0"}, {"reason", "NodeDrain"}};
  in.recorded_migrations = {{"ml", "llama", earlier}, {"ml", "other", earlier}};
  Json v = BuildWebView(in);
  REQUIRE(v["jobs"].size() == 1);
  const Json& j = v["jobs"][0];
  CHECK(j["name"] == "llama");
  CHECK(j["replicas"] == 11);
  REQUIRE(j["ranks"].size() == 2);
  CHECK(j["ranks"][0] == Json({{"pod", "llama-rank-2"}, {"node", "gpu-a"}, {"phase", "Running"}, {"rank", 2}}));
  CHECK(j["ranks"][1]["rank"] == 10);
  CHECK(j["sparePods"][0]["pod"] == "llama-spare-1");
  CHECK(j["coordinator"]["node"] == "cpu-0");
  CHECK(j["retiredPods"][0]["pod"] == "llama-old");
  CHECK_FALSE(j.contains("source"));
  REQUIRE(j["migrationHistory"].size() == 2);
  CHECK(j["migrationHistory"][0]["reason"] == "NodeDrain");
  CHECK(j["migrationHistory"][1]["durationMs"] == 812);
}

TEST_CASE("web view: a Kubeflow job's TrainingJob names the job it protects, a node its latency SLA", "[web]") {
  Fixture f;
  f.jobs[0]["spec"]["trainJobRef"] = {{"name", "llama-tj"}};
  f.healths[0]["status"]["conditions"].push_back(
      {{"type", "LatencyWithinSLA"}, {"status", "False"}, {"reason", "Breached"}, {"message", "rail0 -> gpu-a p99"}});
  Json v = BuildWebView(f.Inputs());
  CHECK(v["jobs"][0]["source"] == Json({{"kind", "TrainJob"}, {"name", "llama-tj"}}));
  CHECK(v["nodes"][0]["latency"] ==
        Json({{"status", "False"}, {"reason", "Breached"}, {"message", "rail0 -> gpu-a p99"}}));
  CHECK_FALSE(v["nodes"][1].contains("latency"));
}

TEST_CASE("web view: only allow-listed fields reach the page", "[web]") {
  Fixture f;
  std::string dumped = BuildWebView(f.Inputs()).dump();
  CHECK(dumped.find("hunter2") == std::string::npos);                  // pod env
  CHECK(dumped.find("do-not-show") == std::string::npos);              // annotations
  CHECK(dumped.find("c2VjcmV0LXB1YmxpYy1rZXk") == std::string::npos);  // the node's key
  CHECK(dumped.find("7311") == std::string::npos);                     // probe addresses
  // A nested object where a scalar is expected is dropped, not copied.
  f.healths[0]["status"]["phase"] = {{"token", "hunter2"}};
  CHECK(BuildWebView(f.Inputs()).dump().find("hunter2") == std::string::npos);
}

TEST_CASE("web view: empty caches give an empty, well-formed view", "[web]") {
  Json v = BuildWebView({});
  CHECK(v["nodes"].empty());
  CHECK(v["rails"].empty());
  CHECK(v["jobs"].empty());
  CHECK(v["summary"]["nodes"] == 0);
  CHECK(v["generatedAt"] == "1970-01-01T00:00:00Z");
}

TEST_CASE("rail transitions between two versions of a FabricHealth", "[web]") {
  Fixture f;
  Json before = f.healths[0];
  CHECK(RailTransitions(nullptr, before).empty());
  CHECK(RailTransitions(&before, before).empty());
  Json after = before;
  after["status"]["conditions"][1] = RailCond("rail1", "True", "RailUp", "2026-11-29T10:09:00Z");
  after["status"]["conditions"].push_back(RailCond("rail9", "True", "RailUp", "2026-11-29T10:09:30Z"));
  auto t = RailTransitions(&before, after);
  REQUIRE(t.size() == 2);
  CHECK(t[0] == RailTransition{"2026-11-29T10:09:00Z", "gpu-b", "rail1", "up", "RailUp", "rail1 RailUp"});
  CHECK(t[1].rail == "rail9");
}

TEST_CASE("migration changes between two versions of a TrainingJob", "[web]") {
  Fixture f;
  Json job = f.jobs[0];
  auto first = MigrationChanges(nullptr, job);
  REQUIRE(first.size() == 1);
  CHECK(first[0].job == "llama");
  CHECK(first[0].record["toPod"] == "llama-spare-0");
  CHECK(MigrationChanges(&job, job).empty());
  Json next = job;
  next["status"]["lastMigration"]["rank"] = 3;
  CHECK(MigrationChanges(&job, next).size() == 1);
  Json none = job;
  none["status"].erase("lastMigration");
  CHECK(MigrationChanges(nullptr, none).empty());
}

struct PageFixture {
  PageFixture() {
    // Status written with plain updates, as the agent and the controller write it.
    api.SetStatusSubresource(kube::gvr::kFabricHealths, false);
    api.SetStatusSubresource(kube::gvr::kTrainingJobs, false);
  }
  kube::FakeKubeApi api;
  kube::Informer healths{api, kube::gvr::kFabricHealths}, policies{api, kube::gvr::kFabricPolicies},
      jobs{api, kube::gvr::kTrainingJobs}, pods{api, kube::gvr::kPods}, audits{api, kube::gvr::kFleetAudits},
      node_audits{api, kube::gvr::kNodeAudits};
  FakeClock clock;
  WebPage page{
      {&healths.store(), &policies.store(), &jobs.store(), &pods.store(), &audits.store(), &node_audits.store()},
      clock};
};

TEST_CASE("web page: GET only, the embedded page and its view", "[web]") {
  PageFixture p;
  HttpServer server;
  p.page.Register(server);
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  LocalReply index = LocalHttp(server.port(), "/");
  CHECK(index.status == 200);
  CHECK(index.body.find("<title>Lockstep</title>") != std::string::npos);
  CHECK(index.body.find("Content-Security-Policy") != std::string::npos);
  CHECK(index.body.find("http://") == std::string::npos);  // nothing fetched from elsewhere
  CHECK(index.body.find("https://") == std::string::npos);
  LocalReply js = LocalHttp(server.port(), "/web.js");
  CHECK(js.status == 200);
  CHECK(js.body.find("innerHTML") == std::string::npos);  // text only
  CHECK(LocalHttp(server.port(), "/web.css").status == 200);
  LocalReply view = LocalHttp(server.port(), "/api/view");
  CHECK(view.status == 200);
  CHECK(Json::parse(view.body)["nodes"].empty());
  CHECK(LocalHttp(server.port(), "/api/view", "{}").status == 405);
  CHECK(LocalHttp(server.port(), "/", "", "DELETE").status == 405);
  CHECK(LocalHttp(server.port(), "/api/other").status == 404);
  Fixture f;
  p.api.SetStatusSubresource(kube::gvr::kNodeAudits, false);
  REQUIRE(p.api.Create(kube::gvr::kNodeAudits, "", f.node_audits[0]).ok());
  REQUIRE(p.node_audits.ListOnce().ok());
  LocalReply na = LocalHttp(server.port(), "/api/nodeaudit?name=before-run.gpu-b");
  CHECK(na.status == 200);
  CHECK(Json::parse(na.body)["areas"][2]["checks"].size() == 2);
  CHECK(LocalHttp(server.port(), "/api/nodeaudit?name=before-run.gpu-x").status == 404);
  CHECK(LocalHttp(server.port(), "/api/nodeaudit?name=../etc").status == 400);
  CHECK(LocalHttp(server.port(), "/api/nodeaudit").status == 400);
  server.Stop();
}

TEST_CASE("web page: the informers' updates feed the flap timeline and migration history", "[web]") {
  PageFixture p;
  p.page.Watch(p.healths, p.jobs);
  Fixture f;
  REQUIRE(p.api.Create(kube::gvr::kFabricHealths, "", f.healths[0]).ok());
  REQUIRE(p.api.Create(kube::gvr::kTrainingJobs, "ml", f.jobs[0]).ok());
  REQUIRE(p.healths.ListOnce().ok());
  REQUIRE(p.jobs.ListOnce().ok());
  // Each relist applies what changed since the last as one update.
  Json h = *p.healths.store().Get("", "gpu-b");
  h["status"]["conditions"][1] = RailCond("rail1", "True", "RailUp", "2026-11-29T10:09:00Z");
  REQUIRE(p.api.Update(kube::gvr::kFabricHealths, "", h).ok());
  Json j = *p.jobs.store().Get("ml", "llama");
  j["status"]["lastMigration"] = {{"rank", 5}, {"reason", "Hang"}};
  REQUIRE(p.api.Update(kube::gvr::kTrainingJobs, "ml", j).ok());
  REQUIRE(p.healths.ListOnce().ok());
  REQUIRE(p.jobs.ListOnce().ok());
  h = *p.healths.store().Get("", "gpu-b");
  h["status"]["conditions"][1] = RailCond("rail1", "False", "RailDown", "2026-11-29T10:10:00Z");
  REQUIRE(p.api.Update(kube::gvr::kFabricHealths, "", h).ok());
  REQUIRE(p.healths.ListOnce().ok());
  Json v = p.page.View();
  // The current conditions' transitions, and rail1's up in between (recorded).
  std::vector<std::string> rail1;
  for (const Json& t : v["flaps"]) {
    if (t["rail"] == "rail1") rail1.push_back(t["time"].get<std::string>() + " " + t["state"].get<std::string>());
  }
  CHECK(rail1 == std::vector<std::string>{"2026-11-29T10:10:00Z down", "2026-11-29T10:09:00Z up"});
  REQUIRE(v["jobs"].size() == 1);
  const Json& history = v["jobs"][0]["migrationHistory"];
  REQUIRE(history.size() == 2);
  CHECK(history[0]["reason"] == "PodFailed");  // seen on add
  CHECK(history[1]["reason"] == "Hang");
}

}  // namespace
}  // namespace lockstep::op
