// PlanMigrationTriggers (the operator's drain and early-warning triggers) and
// its part in PlanTrainingJob: one test per rule in trainingjob_triggers.h.
#include <catch2/catch.hpp>

#include "lockstep/operator/trainingjob_plan.h"
#include "lockstep/operator/trainingjob_triggers.h"

namespace lockstep::op {
namespace {

constexpr char kNow[] = "2026-01-02T03:04:05Z";

Json SpecJson(int replicas = 3, int spares = 2) {
  return {{"replicas", replicas},
          {"spares", spares},
          {"migration", {{"maxConcurrent", 4}}},
          {"earlyWarning", {{"gpuTempCelsius", 85}, {"eccSingleBitPerHour", 100}, {"xids", {79, 48}}}},
          {"template", {{"spec", {{"containers", Json::array({{{"name", "train"}, {"image", "t:1"}}})}}}}}};
}

api::TrainingJobSpec Spec(const Json& j = SpecJson()) {
  auto s = api::ParseTrainingJobSpec("demo", j);
  REQUIRE(s.ok());
  return *s;
}

Json Pod(const std::string& name, const std::string& role, int rank, const std::string& node,
         const std::string& phase = "Running") {
  Json labels = {{"lockstep.dev/job", "demo"}, {"lockstep.dev/role", role}};
  if (rank >= 0) labels["lockstep.dev/rank"] = std::to_string(rank);
  Json p = {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", labels}, {"resourceVersion", "7"}}},
            {"spec", Json::object()},
            {"status", {{"phase", phase}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}
Json Rank(int rank, const std::string& node) { return Pod("demo-rank-" + std::to_string(rank), "rank", rank, node); }
Json Spare(const std::string& name, const std::string& phase = "Running") {
  return Pod(name, "spare", -1, "s1", phase);
}

Json Node(const std::string& name, bool cordoned) {
  Json n = {{"metadata", {{"name", name}}}, {"spec", Json::object()}};
  if (cordoned) n["spec"]["unschedulable"] = true;
  return n;
}

Json Device(int index, Json fields) {
  fields["index"] = index;
  return fields;
}

Json Health(const std::string& node, Json devices, const std::string& gpu_healthy = "True") {
  Json h = {{"metadata", {{"name", node}}},
            {"status",
             {{"conditions", Json::array({{{"type", "GPUHealthy"},
                                           {"status", gpu_healthy},
                                           {"reason", gpu_healthy == "True" ? "AllGPUsHealthy" : "EarlyWarning"},
                                           {"message", "GPU 1 Xid 31"}}})}}}};
  if (!devices.is_null()) h["status"]["gpu"] = {{"devices", devices}};
  return h;
}

struct World {
  api::TrainingJobSpec spec = Spec();
  std::vector<Json> pods, nodes, healths;
  MigrationTriggerPlan Plan() {
    MigrationTriggerInput in;
    in.spec = &spec;
    for (const Json& p : pods) in.pods.push_back(&p);
    for (const Json& n : nodes) in.nodes[n["metadata"]["name"]] = &n;
    for (const Json& h : healths) in.healths[h["metadata"]["name"]] = &h;
    return PlanMigrationTriggers(in);
  }
};

// Three ranks on n0..n2, two Running spares; nothing wrong yet.
World Healthy() {
  World w;
  for (int i = 0; i < 3; ++i) {
    w.pods.push_back(Rank(i, "n" + std::to_string(i)));
    w.nodes.push_back(Node("n" + std::to_string(i), false));
  }
  w.pods.push_back(Spare("demo-spare-a"));
  w.pods.push_back(Spare("demo-spare-b"));
  return w;
}

std::vector<std::string> Pods(const std::vector<MigrationTrigger>& ts) {
  std::vector<std::string> out;
  for (const auto& t : ts) out.push_back(t.pod + "=" + t.trigger);
  return out;
}

TEST_CASE("migration triggers: nothing wrong, nothing annotated", "[operator]") {
  World w = Healthy();
  w.healths.push_back(Health("n1", Json::array({Device(0, {{"temperatureCelsius", 60}})})));
  auto plan = w.Plan();
  CHECK(plan.annotate.empty());
  CHECK(plan.held.empty());
  CHECK(plan.blocked_reason.empty());
}

TEST_CASE("migration triggers: a cordoned node's rank pod is annotated drain", "[operator]") {
  World w = Healthy();
  w.nodes[1] = Node("n1", true);
  auto plan = w.Plan();
  REQUIRE(plan.annotate.size() == 1);
  const MigrationTrigger& t = plan.annotate[0];
  CHECK(t.pod == "demo-rank-1");
  CHECK(t.rank == 1);
  CHECK(t.trigger == "drain");
  CHECK(t.reason == "node n1 cordoned");
  CHECK(MigrationAnnotationPatch(t) ==
        Json{{"metadata",
              {{"resourceVersion", "7"},
               {"annotations",
                {{"lockstep.dev/migrate", "drain"}, {"lockstep.dev/migrate-reason", "node n1 cordoned"}}}}}});

  SECTION("not with spec.migration.onDrain false") {
    Json j = SpecJson();
    j["migration"]["onDrain"] = false;
    w.spec = Spec(j);
    CHECK(w.Plan().annotate.empty());
  }
  SECTION("unschedulable false is not a cordon") {
    w.nodes[1]["spec"]["unschedulable"] = false;
    CHECK(w.Plan().annotate.empty());
  }
}

TEST_CASE("migration triggers: the job's GPU thresholds against the FabricHealth's readings", "[operator]") {
  World w = Healthy();
  SECTION("temperature at the threshold") {
    w.healths.push_back(
        Health("n2", Json::array({Device(0, {{"temperatureCelsius", 60}}), Device(3, {{"temperatureCelsius", 85}})})));
    auto plan = w.Plan();
    REQUIRE(plan.annotate.size() == 1);
    CHECK(plan.annotate[0].pod == "demo-rank-2");
    CHECK(plan.annotate[0].trigger == "early-warning");
    CHECK(plan.annotate[0].reason == "GPU 3 at 85 C >= 85 C on node n2");
  }
  SECTION("temperature below the threshold") {
    w.healths.push_back(Health("n2", Json::array({Device(0, {{"temperatureCelsius", 84}})})));
    CHECK(w.Plan().annotate.empty());
  }
  SECTION("corrected ECC errors per hour") {
    w.healths.push_back(Health("n0", Json::array({Device(1, {{"eccSingleBitPerHour", 120}})})));
    auto plan = w.Plan();
    REQUIRE(plan.annotate.size() == 1);
    CHECK(plan.annotate[0].pod == "demo-rank-0");
    CHECK(plan.annotate[0].reason == "GPU 1 at 120 corrected ECC errors/hour >= 100 on node n0");
  }
  SECTION("an Xid of the job's list, and one not on it") {
    w.healths.push_back(Health("n0", Json::array({Device(0, {{"xids", {79}}})})));
    w.healths.push_back(Health("n1", Json::array({Device(0, {{"xids", {31}}})})));
    auto plan = w.Plan();
    CHECK(Pods(plan.annotate) == std::vector<std::string>{"demo-rank-0=early-warning"});
    CHECK(plan.annotate[0].reason == "GPU 0 reported Xid 79 on node n0");
  }
  SECTION("readings within the job's thresholds: the agent's GPUHealthy False does not decide") {
    w.healths.push_back(Health("n1", Json::array({Device(0, {{"temperatureCelsius", 70}})}), "False"));
    CHECK(w.Plan().annotate.empty());
  }
  SECTION("no readings: GPUHealthy False decides") {
    w.healths.push_back(Health("n1", nullptr, "False"));
    auto plan = w.Plan();
    REQUIRE(plan.annotate.size() == 1);
    CHECK(plan.annotate[0].pod == "demo-rank-1");
    CHECK(plan.annotate[0].trigger == "early-warning");
    CHECK(plan.annotate[0].reason == "node n1 GPUHealthy False (EarlyWarning): GPU 1 Xid 31");
  }
  SECTION("no readings and GPUHealthy True or Unknown: nothing") {
    w.healths.push_back(Health("n1", nullptr, "True"));
    w.healths.push_back(Health("n2", nullptr, "Unknown"));
    CHECK(w.Plan().annotate.empty());
  }
  SECTION("not with spec.migration.onEarlyWarning false") {
    Json j = SpecJson();
    j["migration"]["onEarlyWarning"] = false;
    w.spec = Spec(j);
    w.healths.push_back(Health("n1", nullptr, "False"));
    CHECK(w.Plan().annotate.empty());
  }
}

TEST_CASE("migration triggers: a pod cordoned and warned is annotated drain", "[operator]") {
  World w = Healthy();
  w.nodes[0] = Node("n0", true);
  w.healths.push_back(Health("n0", nullptr, "False"));
  auto plan = w.Plan();
  CHECK(Pods(plan.annotate) == std::vector<std::string>{"demo-rank-0=drain"});
}

TEST_CASE("migration triggers: a pod with a migrate annotation is never annotated again and is in flight",
          "[operator]") {
  World w = Healthy();
  w.nodes[0] = Node("n0", true);
  w.nodes[1] = Node("n1", true);
  w.pods[0]["metadata"]["annotations"] = {{"lockstep.dev/migrate", "now"}};
  SECTION("its own trigger does not replace the user's") {
    auto plan = w.Plan();
    CHECK(Pods(plan.annotate) == std::vector<std::string>{"demo-rank-1=drain"});
  }
  SECTION("it holds a spare: one spare left for two") {
    w.pods[1]["metadata"]["annotations"] = {{"lockstep.dev/migrate", "drain"}};
    w.nodes[2] = Node("n2", true);
    auto plan = w.Plan();
    CHECK(plan.annotate.empty());
    CHECK(Pods(plan.held) == std::vector<std::string>{"demo-rank-2=drain"});
    CHECK(plan.blocked_reason == "NoSpare");
  }
}

Json NotReady(Json node, const std::string& status = "Unknown") {
  node["status"]["conditions"] = Json::array(
      {{{"type", "MemoryPressure"}, {"status", "False"}},
       {{"type", "Ready"}, {"status", status}, {"reason", status == "Unknown" ? "NodeStatusUnknown" : ""}}});
  return node;
}

TEST_CASE("migration triggers: NodeNotReadyReason reads the Ready condition", "[operator]") {
  Json n = Node("n1", false);
  CHECK(NodeNotReadyReason(n).empty());  // no conditions yet: not judged
  n["status"]["conditions"] = Json::array({{{"type", "Ready"}, {"status", "True"}}});
  CHECK(NodeNotReadyReason(n).empty());
  CHECK(NodeNotReadyReason(NotReady(n)) == "node n1 NotReady (NodeStatusUnknown)");
  CHECK(NodeNotReadyReason(NotReady(n, "False")) == "node n1 NotReady (Ready False)");
}

TEST_CASE("migration triggers: a NotReady node's rank and spare pods are annotated node-not-ready", "[operator]") {
  World w = Healthy();
  w.nodes[1] = NotReady(w.nodes[1]);
  SECTION("the rank, unplanned, with the node's reason") {
    auto plan = w.Plan();
    REQUIRE(plan.annotate.size() == 1);
    CHECK(plan.annotate[0].pod == "demo-rank-1");
    CHECK(plan.annotate[0].rank == 1);
    CHECK(plan.annotate[0].trigger == "node-not-ready");
    CHECK(plan.annotate[0].reason == "node n1 NotReady (NodeStatusUnknown)");
    CHECK(plan.held.empty());
  }
  SECTION("Ready False counts too, Ready True does not") {
    w.nodes[1] = NotReady(Node("n1", false), "False");
    CHECK(Pods(w.Plan().annotate) == std::vector<std::string>{"demo-rank-1=node-not-ready"});
    w.nodes[1] = NotReady(Node("n1", false), "True");
    CHECK(w.Plan().annotate.empty());
  }
  SECTION("over a planned value already there, and not again once set") {
    w.pods[1]["metadata"]["annotations"] = {{"lockstep.dev/migrate", "drain"}};
    CHECK(Pods(w.Plan().annotate) == std::vector<std::string>{"demo-rank-1=node-not-ready"});
    w.pods[1]["metadata"]["annotations"] = {{"lockstep.dev/migrate", "node-not-ready"}};
    CHECK(w.Plan().annotate.empty());
  }
  SECTION("never held back: no spare, maxConcurrent 1 with a drain in flight") {
    Json j = SpecJson(3, 0);
    j["migration"]["maxConcurrent"] = 1;
    w.spec = Spec(j);
    w.pods.resize(3);  // no spares
    w.pods[0]["metadata"]["annotations"] = {{"lockstep.dev/migrate", "now"}};
    w.nodes[2] = NotReady(w.nodes[2]);
    auto plan = w.Plan();
    CHECK(Pods(plan.annotate) == std::vector<std::string>{"demo-rank-1=node-not-ready", "demo-rank-2=node-not-ready"});
    CHECK(plan.held.empty());
  }
  SECTION("it is not in flight: a drain elsewhere still gets a spare") {
    w.pods[1]["metadata"]["annotations"] = {{"lockstep.dev/migrate", "node-not-ready"}};
    w.nodes[2] = Node("n2", true);
    w.pods.resize(4);  // one spare
    CHECK(Pods(w.Plan().annotate) == std::vector<std::string>{"demo-rank-2=drain"});
  }
  SECTION("spares there are annotated and are no spares to move to") {
    w.nodes.push_back(NotReady(Node("s1", false)));  // both spares run on s1
    w.nodes[1] = Node("n1", false);
    w.nodes[0] = Node("n0", true);
    auto plan = w.Plan();
    CHECK(Pods(plan.annotate) ==
          std::vector<std::string>{"demo-spare-a=node-not-ready", "demo-spare-b=node-not-ready"});
    CHECK(plan.annotate[0].rank == -1);
    CHECK(Pods(plan.held) == std::vector<std::string>{"demo-rank-0=drain"});
    CHECK(plan.blocked_reason == "NoSpare");
  }
  SECTION("pods being deleted or ended are left alone") {
    w.pods[1]["metadata"]["deletionTimestamp"] = kNow;
    CHECK(w.Plan().annotate.empty());
    w.pods[1]["metadata"].erase("deletionTimestamp");
    w.pods[1]["status"]["phase"] = "Failed";
    CHECK(w.Plan().annotate.empty());
  }
}

TEST_CASE("migration triggers: no spare running is reported, nothing annotated", "[operator]") {
  World w = Healthy();
  w.pods.pop_back();
  w.pods.back() = Spare("demo-spare-a", "Pending");
  w.nodes[1] = Node("n1", true);
  auto plan = w.Plan();
  CHECK(plan.annotate.empty());
  CHECK(Pods(plan.held) == std::vector<std::string>{"demo-rank-1=drain"});
  CHECK(plan.blocked_reason == "NoSpare");
  CHECK(plan.blocked_message ==
        "no spare to move to (0 of 2 spares running on a usable node, 0 migrations in flight), held: rank 1 (pod "
        "demo-rank-1, drain: "
        "node n1 cordoned); each moves once a spare runs, and a drain of its node waits until then (the job's "
        "PodDisruptionBudget)");

  SECTION("spec.spares 0 says so") {
    w.spec = Spec(SpecJson(3, 0));
    auto p = w.Plan();
    CHECK(p.blocked_reason == "NoSpare");
    CHECK(p.blocked_message.find("(spec.spares is 0)") != std::string::npos);
  }
  SECTION("a spare being deleted is no spare") {
    w.pods.back() = Spare("demo-spare-a");
    w.pods.back()["metadata"]["deletionTimestamp"] = kNow;
    CHECK(w.Plan().annotate.empty());
  }
  SECTION("a spare on a cordoned or warned node is no spare") {
    w.pods.back() = Spare("demo-spare-a");  // on node s1
    CHECK(w.Plan().annotate.size() == 1);
    w.nodes.push_back(Node("s1", true));
    CHECK(w.Plan().annotate.empty());
    w.nodes.back() = Node("s1", false);
    w.healths.push_back(Health("s1", Json::array({Device(2, {{"temperatureCelsius", 99}})})));
    CHECK(w.Plan().annotate.empty());
  }
}

TEST_CASE("migration triggers: one per spare, lowest rank first, then maxConcurrent", "[operator]") {
  World w = Healthy();
  for (auto& n : w.nodes) n["spec"]["unschedulable"] = true;
  SECTION("two spares for three ranks") {
    auto plan = w.Plan();
    CHECK(Pods(plan.annotate) == std::vector<std::string>{"demo-rank-0=drain", "demo-rank-1=drain"});
    CHECK(Pods(plan.held) == std::vector<std::string>{"demo-rank-2=drain"});
    CHECK(plan.blocked_reason == "NoSpare");
  }
  SECTION("maxConcurrent 1 (the default)") {
    Json j = SpecJson();
    j["migration"].erase("maxConcurrent");
    w.spec = Spec(j);
    auto plan = w.Plan();
    CHECK(Pods(plan.annotate) == std::vector<std::string>{"demo-rank-0=drain"});
    CHECK(Pods(plan.held) == std::vector<std::string>{"demo-rank-1=drain", "demo-rank-2=drain"});
    CHECK(plan.blocked_reason == "MaxConcurrent");
    CHECK(plan.blocked_message.find("spec.migration.maxConcurrent 1") != std::string::npos);
  }
}

TEST_CASE("migration triggers: only bound, live rank pods of the job's ranks are candidates", "[operator]") {
  World w = Healthy();
  for (auto& n : w.nodes) n["spec"]["unschedulable"] = true;
  w.pods[0]["metadata"]["deletionTimestamp"] = kNow;         // leaving already
  w.pods[1]["status"]["phase"] = "Failed";                   // the coordinator's (onFailure)
  w.pods[2]["spec"].erase("nodeName");                       // not scheduled
  w.pods.push_back(Rank(3, "n0"));                           // beyond spec.replicas
  w.pods.push_back(Pod("demo-spare-c", "spare", -1, "n1"));  // a spare on a cordoned node
  auto plan = w.Plan();
  CHECK(plan.annotate.empty());
  CHECK(plan.held.empty());
}

// Through PlanTrainingJob: the annotations and the MigrationBlocked condition.
TrainingJobPlan JobPlan(const World& w, const Json& status) {
  Json job = {{"apiVersion", "lockstep.dev/v1alpha1"},
              {"kind", "TrainingJob"},
              {"metadata", {{"name", "demo"}, {"namespace", "ml"}, {"uid", "u"}, {"generation", 2}}},
              {"spec", SpecJson()},
              {"status", status}};
  TrainingJobInput in;
  in.job = &job;
  in.now = kNow;
  for (const Json& p : w.pods) in.pods.push_back(&p);
  for (const Json& n : w.nodes) in.nodes[n["metadata"]["name"]] = &n;
  for (const Json& h : w.healths) in.healths[h["metadata"]["name"]] = &h;
  return PlanTrainingJob(in, {});
}

const Json* Blocked(const Json& status) {
  for (const Json& c : status["conditions"]) {
    if (c["type"] == "MigrationBlocked") return &c;
  }
  return nullptr;
}

TEST_CASE("trainingjob plan: migration triggers and the MigrationBlocked condition", "[operator]") {
  World w = Healthy();
  w.pods.push_back(Pod("demo-coordinator", "coordinator", -1, "n9"));
  const Json running = {{"phase", "Running"}};
  SECTION("never blocked: no condition") {
    w.nodes[1] = Node("n1", true);
    auto plan = JobPlan(w, running);
    CHECK(Pods(plan.annotate) == std::vector<std::string>{"demo-rank-1=drain"});
    CHECK(Blocked(plan.status) == nullptr);
  }
  SECTION("blocked, then a spare runs again") {
    for (auto& n : w.nodes) n["spec"]["unschedulable"] = true;
    auto plan = JobPlan(w, running);
    CHECK(plan.annotate.size() == 2);
    REQUIRE(Blocked(plan.status) != nullptr);
    CHECK((*Blocked(plan.status))["status"] == "True");
    CHECK((*Blocked(plan.status))["reason"] == "NoSpare");
    CHECK((*Blocked(plan.status))["message"].get<std::string>().find("rank 2 (pod demo-rank-2") != std::string::npos);

    for (auto& n : w.nodes) n["spec"]["unschedulable"] = false;
    auto later = JobPlan(w, plan.status);
    CHECK(later.annotate.empty());
    REQUIRE(Blocked(later.status) != nullptr);
    CHECK((*Blocked(later.status))["status"] == "False");
    CHECK((*Blocked(later.status))["reason"] == "NotBlocked");
  }
  SECTION("a Succeeded job triggers nothing") {
    w.nodes[1] = Node("n1", true);
    auto plan = JobPlan(w, {{"phase", "Succeeded"}});
    CHECK(plan.annotate.empty());
    CHECK(Blocked(plan.status) == nullptr);
  }
}

}  // namespace
}  // namespace lockstep::op
