// The TrainingJob controller as BuildOperator() wires it, against the
// in-memory FakeKubeApi: synchronous reconciles (stores filled with
// Operator::ListOnce(), FakeClock) and one run with informers and workers.
#include <catch2/catch.hpp>

#include <set>

#include "../kube/eventually.h"
#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/operator_runtime.h"

namespace lockstep::op {
namespace {

using kube::FakeKubeApi;
using kube::Verb;
using kube::testing::Eventually;
namespace gvr = kube::gvr;

Json Job(int replicas = 2, int spares = 1) {
  return {{"apiVersion", "lockstep.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", "demo"}, {"namespace", "ml"}}},
          {"spec",
           {{"replicas", replicas},
            {"spares", spares},
            {"template", {{"spec", {{"containers", Json::array({{{"name", "train"}, {"image", "t:1"}}})}}}}}}}};
}

OperatorOptions Options(bool leader_elect = false) {
  OperatorOptions o;
  o.settings.namespace_name = "ls";
  o.workers = 2;
  o.leader_elect = leader_elect;
  o.election.identity = "test";
  o.training_jobs.coordinator_image = "coord:test";
  o.training_jobs.coordinator_cluster_role = "lockstep-coordinator";
  return o;
}

uint64_t Calls(FakeKubeApi& api, Verb verb, const std::string& resource, const std::string& sub = "") {
  uint64_t n = 0;
  for (const auto& c : api.Calls()) n += c.verb == verb && c.resource == resource && c.subresource == sub;
  return n;
}

void SetPhase(FakeKubeApi& api, const std::string& pod, const std::string& phase) {
  REQUIRE(api.MergePatch(gvr::kPods, "ml", pod, {{"status", {{"phase", phase}}}}, "status").ok());
}

Json Condition(const Json& obj, const std::string& type) {
  for (const Json& c : obj["status"]["conditions"]) {
    if (c["type"] == type) return c;
  }
  return nullptr;
}

struct Synced {
  FakeClock clock;
  FakeKubeApi api{clock};
  metrics::Registry registry;
  std::unique_ptr<Operator> op;
  explicit Synced(const Json& job = Job(), bool leader_elect = false) {
    REQUIRE(api.Create(gvr::kTrainingJobs, "ml", job).ok());
    OperatorOptions o = Options(leader_elect);
    o.registry = &registry;
    auto built = BuildOperator(api, clock, o);
    REQUIRE(built.ok());
    op = std::move(*built);
    Fill();
  }
  void Fill() { REQUIRE(op->ListOnce().ok()); }
  kube::ReconcileResult Reconcile() {
    auto r = op->trainingjob_reconciler().Reconcile("ml/demo");
    Fill();
    return r;
  }
  Json Stored() { return *api.Peek(gvr::kTrainingJobs, "ml", "demo"); }
};

TEST_CASE("trainingjob reconcile: creates the coordinator and rank pods once, then costs zero writes", "[operator]") {
  Synced s;
  REQUIRE_FALSE(s.Reconcile().error);
  CHECK(s.api.Peek(gvr::kServiceAccounts, "ml", "demo-coordinator"));
  auto rb = s.api.Peek(gvr::kRoleBindings, "ml", "demo-coordinator");
  REQUIRE(rb);
  CHECK((*rb)["roleRef"]["name"] == "lockstep-coordinator");
  auto cm = s.api.Peek(gvr::kConfigMaps, "ml", "demo-coordinator");
  REQUIRE(cm);
  CHECK((*cm)["data"].contains("spare-pod.json"));
  CHECK(s.api.Peek(gvr::kServices, "ml", "demo-coordinator"));
  CHECK(s.api.Peek(gvr::kConfigMaps, "ml", "demo-coordinator-state"));
  auto coord = s.api.Peek(gvr::kPods, "ml", "demo-coordinator");
  REQUIRE(coord);
  CHECK((*coord)["spec"]["containers"][0]["image"] == "coord:test");
  CHECK(s.api.Peek(gvr::kPods, "ml", "demo-rank-0"));
  CHECK(s.api.Peek(gvr::kPods, "ml", "demo-rank-1"));
  CHECK_FALSE(s.api.Peek(gvr::kPods, "ml", "demo-rank-2"));
  CHECK(s.Stored()["status"]["phase"] == "Pending");
  CHECK(Calls(s.api, Verb::kPatch, "trainingjobs", "status") == 1);
  auto& pods = s.registry.Counter("lockstep_trainingjob_pods_total", "", {"role", "action"});
  CHECK(pods.Get({"rank", "created"}) == 2);
  CHECK(pods.Get({"coordinator", "created"}) == 1);

  const uint64_t writes = s.api.WriteCount();
  for (int i = 0; i < 3; ++i) {
    auto r = s.Reconcile();
    CHECK_FALSE(r.error);
    CHECK_FALSE(r.requeue_after);
  }
  CHECK(s.api.WriteCount() == writes);
}

TEST_CASE("trainingjob reconcile: Running once kwok-like pods run, readyReplicas and spares counted", "[operator]") {
  Synced s;
  REQUIRE_FALSE(s.Reconcile().error);
  SetPhase(s.api, "demo-rank-0", "Running");
  s.Fill();
  REQUIRE_FALSE(s.Reconcile().error);
  CHECK(s.Stored()["status"]["readyReplicas"] == 1);
  CHECK(s.Stored()["status"]["phase"] == "Pending");
  SetPhase(s.api, "demo-rank-1", "Running");
  // A spare as the coordinator makes it from spare-pod.json.
  Json spare = Json::parse(
      (*s.api.Peek(gvr::kConfigMaps, "ml", "demo-coordinator"))["data"]["spare-pod.json"].get<std::string>());
  spare["metadata"]["name"] = "demo-spare-a";
  REQUIRE(s.api.Create(gvr::kPods, "ml", spare).ok());
  SetPhase(s.api, "demo-spare-a", "Running");
  s.Fill();
  REQUIRE_FALSE(s.Reconcile().error);
  const Json job = s.Stored();
  CHECK(job["status"]["phase"] == "Running");
  CHECK(job["status"]["readyReplicas"] == 2);
  CHECK(job["status"]["availableSpares"] == 1);
  CHECK(Condition(job, "Ready")["status"] == "True");

  SECTION("a rank pod deleted after the start is not recreated") {
    REQUIRE(s.api.Delete(gvr::kPods, "ml", "demo-rank-1").ok());
    s.Fill();
    REQUIRE_FALSE(s.Reconcile().error);
    CHECK_FALSE(s.api.Peek(gvr::kPods, "ml", "demo-rank-1"));
    CHECK(s.Stored()["status"]["phase"] == "Degraded");
  }
  SECTION("a deleted coordinator pod is created again") {
    REQUIRE(s.api.Delete(gvr::kPods, "ml", "demo-coordinator").ok());
    s.Fill();
    REQUIRE_FALSE(s.Reconcile().error);
    CHECK(s.api.Peek(gvr::kPods, "ml", "demo-coordinator"));
  }
  SECTION("a deleted Service is applied again") {
    REQUIRE(s.api.Delete(gvr::kServices, "ml", "demo-coordinator").ok());
    s.Fill();
    REQUIRE_FALSE(s.Reconcile().error);
    CHECK(s.api.Peek(gvr::kServices, "ml", "demo-coordinator"));
  }
  SECTION("the coordinator's state in its ConfigMap is never reverted") {
    REQUIRE(s.api
                .MergePatch(gvr::kConfigMaps, "ml", "demo-coordinator-state",
                            {{"data", {{"state.json", R"({"generation":2})"}}}})
                .ok());
    s.Fill();
    const uint64_t writes = s.api.WriteCount();
    REQUIRE_FALSE(s.Reconcile().error);
    CHECK(s.api.WriteCount() == writes);
    CHECK((*s.api.Peek(gvr::kConfigMaps, "ml", "demo-coordinator-state"))["data"]["state.json"] ==
          R"({"generation":2})");
  }
  SECTION("deleting the job garbage-collects every object it owns") {
    REQUIRE(s.api.Delete(gvr::kTrainingJobs, "ml", "demo").ok());
    CHECK(s.api.Objects(gvr::kPods).empty());
    CHECK(s.api.Objects(gvr::kServices).empty());
    CHECK(s.api.Objects(gvr::kConfigMaps).empty());
    CHECK(s.api.Objects(gvr::kServiceAccounts).empty());
    CHECK(s.api.Objects(gvr::kRoleBindings).empty());
    s.Fill();
    CHECK_FALSE(s.Reconcile().error);
  }
}

TEST_CASE("trainingjob reconcile: the status write leaves the coordinator's keys alone and does not conflict",
          "[operator]") {
  Synced s;
  REQUIRE_FALSE(s.Reconcile().error);
  auto coordinator_writes = [&](int migrations) {
    REQUIRE(s.api
                .MergePatch(gvr::kTrainingJobs, "ml", "demo",
                            {{"status", {{"generation", migrations}, {"migrations", migrations}}}}, "status")
                .ok());
  };
  SetPhase(s.api, "demo-rank-0", "Running");
  coordinator_writes(1);
  s.Fill();
  // The coordinator writes again after the operator's cache was filled: a
  // resourceVersion precondition from that copy would be a 409, and sending
  // the copy's keys would put migrations back to 1.
  coordinator_writes(3);
  auto r = s.Reconcile();
  CHECK_FALSE(r.error);
  const Json st = s.Stored()["status"];
  CHECK(st["readyReplicas"] == 1);
  CHECK(st["generation"] == 3);
  CHECK(st["migrations"] == 3);
}

TEST_CASE("trainingjob reconcile: an API error fails the reconcile, so the queue retries with backoff", "[operator]") {
  Synced s;
  s.api.FailNext(1, ErrorCode::kUnavailable, Verb::kCreate);
  auto r = s.Reconcile();
  REQUIRE(r.error);
  CHECK(r.error->message.find("Pod ml/demo-coordinator") != std::string::npos);
  CHECK_FALSE(s.api.Peek(gvr::kPods, "ml", "demo-coordinator"));
  REQUIRE_FALSE(s.Reconcile().error);
  CHECK(s.api.Peek(gvr::kPods, "ml", "demo-coordinator"));
  CHECK(s.api.Peek(gvr::kPods, "ml", "demo-rank-1"));
}

TEST_CASE("trainingjob reconcile: a pod the API server rejects is named in the status and not retried hot",
          "[operator]") {
  Synced s;
  s.api.SetFaultHook([](const FakeKubeApi::Call& c) -> std::optional<Error> {
    if (c.verb == Verb::kCreate && c.resource == "pods" && c.name.find("-rank-") != std::string::npos) {
      return Error{ErrorCode::kInvalidArgument,
                   "Pod \"demo-rank-0\" is invalid: spec.containers[0].name: Invalid value: \"Bad_Name\""};
    }
    return std::nullopt;
  });
  auto r = s.Reconcile();
  CHECK_FALSE(r.error);
  REQUIRE(r.requeue_after);
  CHECK(*r.requeue_after == TrainingJobReconciler::kInvalidRetry);
  const Json ready = Condition(s.Stored(), "Ready");
  CHECK(ready["reason"] == "InvalidTemplate");
  CHECK(ready["message"].get<std::string>().rfind("spec.template.spec.containers[0].name:", 0) == 0);
  CHECK(s.api.Peek(gvr::kPods, "ml", "demo-coordinator"));  // made before the rank pods
  int warnings = 0;
  for (const Json& e : s.api.Objects(gvr::kEvents)) warnings += e["reason"] == "InvalidTemplate";
  CHECK(warnings == 1);
  // Again: the same status, no second status write or Event.
  const uint64_t patches = Calls(s.api, Verb::kPatch, "trainingjobs", "status");
  CHECK_FALSE(s.Reconcile().error);
  CHECK(Calls(s.api, Verb::kPatch, "trainingjobs", "status") == patches);
  // Fixed (here: the server accepts it now): the rank pods are created.
  s.api.SetFaultHook(nullptr);
  CHECK_FALSE(s.Reconcile().error);
  CHECK(s.api.Peek(gvr::kPods, "ml", "demo-rank-1"));
  CHECK(Condition(s.Stored(), "Ready")["reason"] == "Pending");
}

TEST_CASE("trainingjob reconcile: a ref to an unwatched kind is reported once, with an Event, and not retried hot",
          "[operator]") {
  Json job = Job();
  job["spec"].erase("template");
  job["spec"]["pytorchJobRef"] = {{"name", "bert"}};
  Synced s(job);
  auto r = s.Reconcile();
  CHECK_FALSE(r.error);
  REQUIRE(r.requeue_after);
  CHECK(*r.requeue_after == TrainingJobReconciler::kKubeflowRetry);
  const Json ready = Condition(s.Stored(), "Ready");
  CHECK(ready["reason"] == "KubeflowJobNotFound");
  CHECK(ready["message"].get<std::string>().find("--kubeflow-pytorchjobs") != std::string::npos);
  CHECK(s.api.Objects(gvr::kPods).empty());
  int warned = 0;
  for (const Json& e : s.api.Objects(gvr::kEvents)) warned += e["reason"] == "KubeflowJobNotFound";
  CHECK(warned == 1);
  const uint64_t writes = s.api.WriteCount();
  CHECK_FALSE(s.Reconcile().error);
  CHECK(s.api.WriteCount() == writes);
}

TEST_CASE("trainingjob leadership: a standby holds the job's key without work until it leads", "[operator][leader]") {
  Synced s(Job(), /*leader_elect=*/true);
  auto& ctl = s.op->trainingjob_controller();
  const uint64_t writes = s.api.WriteCount();
  while (ctl.ProcessOne()) {}
  CHECK(ctl.HeldLen() == 1);
  CHECK(s.api.WriteCount() == writes);
  CHECK(s.api.Objects(gvr::kPods).empty());

  REQUIRE(s.op->elector()->Poll());  // leads: the held key comes back
  CHECK(ctl.HeldLen() == 0);
  REQUIRE(ctl.ProcessOne());
  CHECK(s.api.Peek(gvr::kPods, "ml", "demo-rank-0"));
}

// Rank pods bound to nodes n0, n1 and Running, one Running spare (as the
// coordinator makes it), the nodes and the job Running.
void StartOnNodes(Synced& s, bool spare = true) {
  REQUIRE_FALSE(s.Reconcile().error);
  for (int i = 0; i < 2; ++i) {
    const std::string node = "n" + std::to_string(i), pod = "demo-rank-" + std::to_string(i);
    REQUIRE(
        s.api.Create(gvr::kNodes, "", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}}).ok());
    REQUIRE(s.api.MergePatch(gvr::kPods, "ml", pod, {{"spec", {{"nodeName", node}}}}).ok());
    SetPhase(s.api, pod, "Running");
  }
  if (spare) {
    Json p = Json::parse(
        (*s.api.Peek(gvr::kConfigMaps, "ml", "demo-coordinator"))["data"]["spare-pod.json"].get<std::string>());
    p["metadata"]["name"] = "demo-spare-a";
    REQUIRE(s.api.Create(gvr::kPods, "ml", p).ok());
    SetPhase(s.api, "demo-spare-a", "Running");
  }
  s.Fill();
  REQUIRE_FALSE(s.Reconcile().error);
  REQUIRE(s.Stored()["status"]["phase"] == "Running");
}

void Cordon(FakeKubeApi& api, const std::string& node) {
  REQUIRE(api.MergePatch(gvr::kNodes, "", node, {{"spec", {{"unschedulable", true}}}}).ok());
}

Json Annotations(FakeKubeApi& api, const std::string& pod) {
  auto p = api.Peek(gvr::kPods, "ml", pod);
  REQUIRE(p);
  return (*p)["metadata"].value("annotations", Json::object());
}

TEST_CASE("trainingjob reconcile: the ranks' PodDisruptionBudget, maxUnavailable 0", "[operator]") {
  Synced s;
  REQUIRE_FALSE(s.Reconcile().error);
  auto pdb = s.api.Peek(gvr::kPodDisruptionBudgets, "ml", "demo-ranks");
  REQUIRE(pdb);
  CHECK((*pdb)["spec"]["maxUnavailable"] == 0);
  CHECK((*pdb)["spec"]["selector"]["matchLabels"]["lockstep.dev/role"] == "rank");
  CHECK((*pdb)["metadata"]["ownerReferences"][0]["kind"] == "TrainingJob");
  SECTION("deleted behind the operator's back, applied again") {
    REQUIRE(s.api.Delete(gvr::kPodDisruptionBudgets, "ml", "demo-ranks").ok());
    s.Fill();
    REQUIRE_FALSE(s.Reconcile().error);
    CHECK(s.api.Peek(gvr::kPodDisruptionBudgets, "ml", "demo-ranks"));
  }
}

TEST_CASE("trainingjob reconcile: a cordoned node's rank pod is annotated drain once, counted, with an Event",
          "[operator]") {
  Synced s;
  StartOnNodes(s);
  Cordon(s.api, "n1");
  s.Fill();
  REQUIRE_FALSE(s.Reconcile().error);
  const Json a = Annotations(s.api, "demo-rank-1");
  CHECK(a.value("lockstep.dev/migrate", "") == "drain");
  CHECK(a.value("lockstep.dev/migrate-reason", "") == "node n1 cordoned");
  CHECK_FALSE(Annotations(s.api, "demo-rank-0").contains("lockstep.dev/migrate"));
  auto& triggers = s.registry.Counter("lockstep_trainingjob_migration_triggers_total", "", {"trigger"});
  CHECK(triggers.Get({"drain"}) == 1);
  bool event = false;
  for (const Json& e : s.api.Objects(gvr::kEvents)) event = event || e.value("reason", "") == "MigrationTriggered";
  CHECK(event);

  // Annotated once: the next reconciles write nothing.
  const uint64_t writes = s.api.WriteCount();
  REQUIRE_FALSE(s.Reconcile().error);
  REQUIRE_FALSE(s.Reconcile().error);
  CHECK(s.api.WriteCount() == writes);
  CHECK(triggers.Get({"drain"}) == 1);
}

TEST_CASE("trainingjob reconcile: a FabricHealth with GPUHealthy False annotates early-warning", "[operator]") {
  Synced s;
  StartOnNodes(s);
  REQUIRE(s.api
              .Create(gvr::kFabricHealths, "",
                      {{"apiVersion", "lockstep.dev/v1alpha1"},
                       {"kind", "FabricHealth"},
                       {"metadata", {{"name", "n0"}}},
                       {"status",
                        {{"conditions", Json::array({{{"type", "GPUHealthy"},
                                                      {"status", "False"},
                                                      {"reason", "EarlyWarning"},
                                                      {"message", "GPU 0: Xid 79"}}})}}}})
              .ok());
  s.Fill();
  REQUIRE_FALSE(s.Reconcile().error);
  const Json a = Annotations(s.api, "demo-rank-0");
  CHECK(a.value("lockstep.dev/migrate", "") == "early-warning");
  CHECK(a.value("lockstep.dev/migrate-reason", "") == "node n0 GPUHealthy False (EarlyWarning): GPU 0: Xid 79");
  auto& triggers = s.registry.Counter("lockstep_trainingjob_migration_triggers_total", "", {"trigger"});
  CHECK(triggers.Get({"early-warning"}) == 1);
}

TEST_CASE("trainingjob reconcile: no spare, no annotation: MigrationBlocked says why, then clears", "[operator]") {
  Synced s;
  StartOnNodes(s, /*spare=*/false);
  Cordon(s.api, "n0");
  s.Fill();
  REQUIRE_FALSE(s.Reconcile().error);
  CHECK_FALSE(Annotations(s.api, "demo-rank-0").contains("lockstep.dev/migrate"));
  Json c = Condition(s.Stored(), "MigrationBlocked");
  REQUIRE(c.is_object());
  CHECK(c["status"] == "True");
  CHECK(c["reason"] == "NoSpare");
  CHECK(c["message"].get<std::string>().find("rank 0 (pod demo-rank-0, drain: node n0 cordoned)") != std::string::npos);

  // The spare runs: the rank is annotated and the condition clears.
  Json p = Json::parse(
      (*s.api.Peek(gvr::kConfigMaps, "ml", "demo-coordinator"))["data"]["spare-pod.json"].get<std::string>());
  p["metadata"]["name"] = "demo-spare-a";
  REQUIRE(s.api.Create(gvr::kPods, "ml", p).ok());
  SetPhase(s.api, "demo-spare-a", "Running");
  s.Fill();
  REQUIRE_FALSE(s.Reconcile().error);
  CHECK(Annotations(s.api, "demo-rank-0").value("lockstep.dev/migrate", "") == "drain");
  CHECK(Condition(s.Stored(), "MigrationBlocked")["status"] == "False");
}

TEST_CASE("trainingjob reconcile: a pod changed since the cache saw it is not annotated blind", "[operator]") {
  Synced s;
  StartOnNodes(s);
  Cordon(s.api, "n1");
  s.Fill();
  // The user annotates the pod after the operator's cache saw it.
  REQUIRE(s.api
              .MergePatch(gvr::kPods, "ml", "demo-rank-1",
                          {{"metadata", {{"annotations", {{"lockstep.dev/migrate", "now"}}}}}})
              .ok());
  auto result = s.op->trainingjob_reconciler().Reconcile("ml/demo");
  REQUIRE(result.error);  // conflict: retried with the fresh pod
  CHECK(Annotations(s.api, "demo-rank-1").value("lockstep.dev/migrate", "") == "now");
  s.Fill();
  REQUIRE_FALSE(s.Reconcile().error);
  CHECK(Annotations(s.api, "demo-rank-1").value("lockstep.dev/migrate", "") == "now");
}

std::set<std::string> Drain(kube::Controller& c) {
  std::set<std::string> keys;
  while (auto k = c.queue().TryGet()) {
    keys.insert(*k);
    c.queue().Done(*k);
  }
  return keys;
}

TEST_CASE("trainingjob wiring: a cordon or a GPU change queues only the jobs with a pod on that node", "[operator]") {
  Synced s;
  StartOnNodes(s);
  REQUIRE(s.api.Create(gvr::kNodes, "", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n2"}}}}).ok());
  REQUIRE(
      s.api
          .Create(gvr::kFabricHealths, "",
                  {{"apiVersion", "lockstep.dev/v1alpha1"}, {"kind", "FabricHealth"}, {"metadata", {{"name", "n0"}}}})
          .ok());
  s.Fill();
  auto& jobs = s.op->trainingjob_controller();
  Drain(jobs);

  // A node heartbeat, a cordon of a node without the job's pods: nothing.
  REQUIRE(s.api.MergePatch(gvr::kNodes, "", "n0", {{"status", {{"conditions", Json::array()}}}}, "status").ok());
  Cordon(s.api, "n2");
  s.Fill();
  CHECK(Drain(jobs).empty());
  // The cordon of a node with a rank pod.
  Cordon(s.api, "n1");
  s.Fill();
  CHECK(Drain(jobs) == std::set<std::string>{"ml/demo"});

  // An agent report that changes no GPU reading: nothing; GPUHealthy turning False: the job.
  REQUIRE(s.api.MergePatch(gvr::kFabricHealths, "", "n0", {{"status", {{"phase", "Healthy"}}}}, "status").ok());
  s.Fill();
  CHECK(Drain(jobs).empty());
  REQUIRE(s.api
              .MergePatch(gvr::kFabricHealths, "", "n0",
                          {{"status",
                            {{"conditions", Json::array({{{"type", "GPUHealthy"},
                                                          {"status", "False"},
                                                          {"reason", "EarlyWarning"},
                                                          {"message", "GPU 0: Xid 79"}}})}}}},
                          "status")
              .ok());
  s.Fill();
  CHECK(Drain(jobs) == std::set<std::string>{"ml/demo"});

  // A pod gone from a node takes the node out of the index.
  REQUIRE(s.api.Delete(gvr::kPods, "ml", "demo-rank-1").ok());
  s.Fill();
  Drain(jobs);
  REQUIRE(s.api.MergePatch(gvr::kNodes, "", "n1", {{"spec", {{"unschedulable", false}}}}).ok());
  s.Fill();
  CHECK(Drain(jobs).empty());
}

TEST_CASE("trainingjob controller: informers and workers converge a job and follow its pods", "[operator]") {
  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kTrainingJobs, "ml", Job(2, 1)).ok());
  auto built = BuildOperator(api, SystemClock::Instance(), Options());
  REQUIRE(built.ok());
  Operator& op = **built;
  op.Start();
  REQUIRE(Eventually([&] {
    return api.Peek(gvr::kPods, "ml", "demo-rank-0") && api.Peek(gvr::kPods, "ml", "demo-rank-1") &&
           api.Peek(gvr::kPods, "ml", "demo-coordinator");
  }));
  // Pod phase changes reach the job through the pod informer.
  for (const char* p : {"demo-rank-0", "demo-rank-1", "demo-coordinator"}) SetPhase(api, p, "Running");
  REQUIRE(Eventually([&] {
    auto j = api.Peek(gvr::kTrainingJobs, "ml", "demo");
    return j && kube::GetString(*j, {"status", "phase"}) == "Running" &&
           kube::GetInt(*j, {"status", "readyReplicas"}) == 2;
  }));
  // A child deleted behind the operator's back is put back (the Owns watch).
  REQUIRE(api.Delete(gvr::kConfigMaps, "ml", "demo-coordinator").ok());
  REQUIRE(Eventually([&] { return api.Peek(gvr::kConfigMaps, "ml", "demo-coordinator").has_value(); }));
  // A cordon reaches the job through the node -> jobs index: the rank pod on
  // the node is annotated drain (a spare runs to take it).
  REQUIRE(api.Create(gvr::kNodes, "", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}).ok());
  REQUIRE(api.MergePatch(gvr::kPods, "ml", "demo-rank-1", {{"spec", {{"nodeName", "n1"}}}}).ok());
  Json spare =
      Json::parse((*api.Peek(gvr::kConfigMaps, "ml", "demo-coordinator"))["data"]["spare-pod.json"].get<std::string>());
  spare["metadata"]["name"] = "demo-spare-a";
  REQUIRE(api.Create(gvr::kPods, "ml", spare).ok());
  SetPhase(api, "demo-spare-a", "Running");
  REQUIRE(Eventually([&] {
    auto j = api.Peek(gvr::kTrainingJobs, "ml", "demo");
    return j && kube::GetInt(*j, {"status", "availableSpares"}) == 1;
  }));
  REQUIRE(api.MergePatch(gvr::kNodes, "", "n1", {{"spec", {{"unschedulable", true}}}}).ok());
  REQUIRE(Eventually([&] {
    auto p = api.Peek(gvr::kPods, "ml", "demo-rank-1");
    return p && kube::GetString(*p, {"metadata", "annotations", "lockstep.dev/migrate"}) == "drain";
  }));
  op.Stop();
}

}  // namespace
}  // namespace lockstep::op
