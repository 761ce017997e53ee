// The operator as BuildOperator() wires it (the binary's wiring), against the
// in-memory FakeKubeApi. Two kinds of tests:
//  - synchronous: stores filled with Operator::ListOnce(), Reconcile(key) called
//    directly, time on a FakeClock; assert the writes;
//  - end to end: informers, queues and workers running, Eventually() converged.
#include <catch2/catch.hpp>

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
using std::chrono::milliseconds;
using std::chrono::seconds;
namespace gvr = kube::gvr;

Json Node(const std::string& name, bool gpu) {
  Json labels = gpu ? Json{{"nvidia.com/gpu.present", "true"}} : Json{{"type", "cpu"}};
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}}};
}

Json Policy(const std::string& name, Json spec = Json::object()) {
  return {{"apiVersion", "lockstep.dev/v1alpha1"}, {"kind", "FabricPolicy"}, {"metadata", {{"name", name}}},
          {"spec", spec}};
}

OperatorOptions Options(bool leader_elect = false) {
  OperatorOptions o;
  o.settings.namespace_name = "ls";
  o.workers = 2;
  o.leader_elect = leader_elect;
  o.election.identity = "test";
  return o;
}

std::unique_ptr<Operator> Build(FakeKubeApi& api, Clock& clock, OperatorOptions o = Options()) {
  auto built = BuildOperator(api, clock, std::move(o));
  REQUIRE(built.ok());
  return std::move(*built);
}

// Every key queued for `c`, drained without reconciling.
std::set<std::string> Drain(kube::Controller& c) {
  std::set<std::string> keys;
  while (auto k = c.queue().TryGet()) {
    keys.insert(*k);
    c.queue().Done(*k);
  }
  return keys;
}

uint64_t Calls(FakeKubeApi& api, Verb verb, const std::string& resource, const std::string& sub = "") {
  uint64_t n = 0;
  for (const auto& c : api.Calls()) n += c.verb == verb && c.resource == resource && c.subresource == sub;
  return n;
}

Json Condition(const Json& obj, const std::string& type) {
  for (const Json& c : obj["status"]["conditions"]) {
    if (c["type"] == type) return c;
  }
  return nullptr;
}

// A cluster with two GPU nodes and policy "p", converged synchronously.
struct Synced {
  FakeClock clock;
  FakeKubeApi api{clock};
  std::unique_ptr<Operator> op;
  explicit Synced(OperatorOptions o = Options()) {
    for (auto n : {Node("gpu-0", true), Node("gpu-1", true)}) REQUIRE(api.Create(gvr::kNodes, "", n).ok());
    REQUIRE(api.Create(gvr::kFabricPolicies, "", Policy("p")).ok());
    op = Build(api, clock, std::move(o));
    Fill();
  }
  void Fill() { REQUIRE(op->ListOnce().ok()); }
  kube::ReconcileResult Reconcile() {
    auto r = op->policy_reconciler().Reconcile("p");
    Fill();
    return r;
  }
  Json Ds() { return *api.Peek(gvr::kDaemonSets, "ls", "lockstep-agent-p"); }
};

TEST_CASE("policy reconcile: applies the agent objects once, then costs zero writes", "[operator]") {
  Synced s;
  REQUIRE_FALSE(s.Reconcile().error);
  REQUIRE(s.api.Peek(gvr::kConfigMaps, "ls", "lockstep-agent-p"));
  REQUIRE(s.api.Peek(gvr::kDaemonSets, "ls", "lockstep-agent-p"));
  s.clock.Advance(seconds(2));
  REQUIRE_FALSE(s.Reconcile().error);  // status now sees the DaemonSet
  s.clock.Advance(seconds(2));
  uint64_t writes = s.api.WriteCount();
  for (int i = 0; i < 3; ++i) {
    auto r = s.Reconcile();
    CHECK_FALSE(r.error);
    CHECK_FALSE(r.requeue_after);
  }
  CHECK(s.api.WriteCount() == writes);
}

TEST_CASE("policy reconcile: a kubectl edit of the agent objects is reverted", "[operator]") {
  Synced s;
  REQUIRE_FALSE(s.Reconcile().error);
  const Json applied = s.Ds();
  const std::string image = applied["spec"]["template"]["spec"]["containers"][0]["image"];

  SECTION("DaemonSet image, applied-hash annotation left alone") {
    Json edited = applied;
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:latest";
    REQUIRE(s.api.Update(gvr::kDaemonSets, "ls", edited).ok());
    s.Fill();
    REQUIRE_FALSE(s.Reconcile().error);
    Json ds = s.Ds();
    CHECK(ds["spec"]["template"]["spec"]["containers"][0]["image"] == image);
  }
  SECTION("DaemonSet capabilities") {
    REQUIRE(s.api.MergePatch(gvr::kDaemonSets, "ls", "lockstep-agent-p",
                             {{"spec", {{"template", {{"spec", {{"hostNetwork", false}}}}}}}})
                .ok());
    s.Fill();
    REQUIRE_FALSE(s.Reconcile().error);
    CHECK(s.Ds()["spec"]["template"]["spec"]["hostNetwork"] == true);
  }
  SECTION("ConfigMap data") {
    Json cm = *s.api.Peek(gvr::kConfigMaps, "ls", "lockstep-agent-p");
    const std::string config = cm["data"]["agent.yaml"];
    REQUIRE(s.api.MergePatch(gvr::kConfigMaps, "ls", "lockstep-agent-p", {{"data", {{"agent.yaml", "probe: {}\n"}}}})
                .ok());
    s.Fill();
    REQUIRE_FALSE(s.Reconcile().error);
    CHECK((*s.api.Peek(gvr::kConfigMaps, "ls", "lockstep-agent-p"))["data"]["agent.yaml"] == config);
  }
  // And converged again: nothing more to write.
  s.clock.Advance(seconds(2));
  s.Reconcile();
  s.clock.Advance(seconds(2));
  uint64_t writes = s.api.WriteCount();
  s.Reconcile();
  CHECK(s.api.WriteCount() == writes);
}

TEST_CASE("policy reconcile: a burst of DaemonSet status changes costs one status write per second", "[operator]") {
  Synced s;
  REQUIRE_FALSE(s.Reconcile().error);
  s.clock.Advance(seconds(5));
  REQUIRE_FALSE(s.Reconcile().error);
  s.clock.Advance(seconds(5));
  const uint64_t before = Calls(s.api, Verb::kPatch, "fabricpolicies", "status");
  // Agents become ready one by one within the same second.
  for (int ready = 1; ready <= 20; ++ready) {
    REQUIRE(s.api.MergePatch(gvr::kDaemonSets, "ls", "lockstep-agent-p",
                             {{"status", {{"desiredNumberScheduled", 2}, {"numberReady", ready % 3},
                                          {"updatedNumberScheduled", 2}}}},
                             "status")
                .ok());
    s.Fill();
    auto r = s.Reconcile();
    CHECK_FALSE(r.error);
    s.clock.Advance(milliseconds(10));
  }
  CHECK(Calls(s.api, Verb::kPatch, "fabricpolicies", "status") - before == 1);
  // The change held back is written when the second is over, with the latest numbers.
  auto r = s.Reconcile();
  REQUIRE(r.requeue_after);
  CHECK(*r.requeue_after <= seconds(1));
  s.clock.Advance(*r.requeue_after);
  r = s.Reconcile();
  CHECK_FALSE(r.requeue_after);
  CHECK(Calls(s.api, Verb::kPatch, "fabricpolicies", "status") - before == 2);
  CHECK((*s.api.Peek(gvr::kFabricPolicies, "", "p"))["status"]["readyNodes"] == 20 % 3);
}

TEST_CASE("policy reconcile: a DaemonSet the API server rejects is Degraded, field named, not retried hot",
          "[operator]") {
  Synced s;
  s.api.SetFaultHook([](const FakeKubeApi::Call& c) -> std::optional<Error> {
    if (c.verb != Verb::kApply || c.resource != "daemonsets") return std::nullopt;
    return InvalidArgument(
        "apply daemonsets ls/lockstep-agent-p: HTTP 422 Invalid: DaemonSet.apps \"lockstep-agent-p\" is invalid: "
        "spec.template.spec.containers[0].image: Invalid value: \"Bad Image\": must not contain spaces");
  });
  auto r = s.Reconcile();
  CHECK_FALSE(r.error);  // not the per-key fast retry
  REQUIRE(r.requeue_after);
  CHECK(*r.requeue_after == s.op->options().policy.invalid_retry);
  Json p = *s.api.Peek(gvr::kFabricPolicies, "", "p");
  Json degraded = Condition(p, "Degraded");
  REQUIRE(degraded.is_object());
  CHECK(degraded["status"] == "True");
  const std::string message = degraded["message"];
  CHECK(message.rfind("spec.agent.image", 0) == 0);
  CHECK(message.find("spec.template.spec.containers[0].image") != std::string::npos);
  CHECK(Condition(p, "Ready")["status"] == "False");

  // Through the controller: the key waits the long retry, then tries again.
  auto& ctl = s.op->policy_controller();
  Drain(ctl);
  ctl.queue().Add("p");
  REQUIRE(ctl.ProcessOne());
  s.clock.Advance(seconds(60));
  CHECK_FALSE(ctl.ProcessOne());
  s.clock.Advance(s.op->options().policy.invalid_retry);
  CHECK(ctl.ProcessOne());
}

TEST_CASE("wiring: agent status reports on FabricHealth queue nothing", "[operator]") {
  Synced s;
  auto& health = s.op->health_controller();
  auto& policy = s.op->policy_controller();
  for (const auto& n : {"gpu-0", "gpu-1"}) REQUIRE_FALSE(s.op->health_reconciler().Reconcile(n).error);
  s.Fill();
  for (const auto& n : {"gpu-0", "gpu-1"}) REQUIRE_FALSE(s.op->health_reconciler().Reconcile(n).error);
  s.Fill();
  Drain(health);
  Drain(policy);

  // The agent's periodic report: a status-only write.
  for (int i = 0; i < 5; ++i) {
    REQUIRE(s.api.MergePatch(gvr::kFabricHealths, "", "gpu-0",
                             {{"status", {{"phase", "Healthy"}, {"offsetNs", i}}}}, "status")
                .ok());
    s.Fill();
  }
  CHECK(Drain(health).empty());
  CHECK(Drain(policy).empty());

  // A node heartbeat: also nothing.
  REQUIRE(s.api.MergePatch(gvr::kNodes, "", "gpu-1", {{"status", {{"conditions", Json::array()}}}}, "status").ok());
  s.Fill();
  CHECK(Drain(health).empty());
  CHECK(Drain(policy).empty());

  // A relabelled FabricHealth is the health controller's business.
  REQUIRE(s.api.MergePatch(gvr::kFabricHealths, "", "gpu-0", {{"metadata", {{"labels", {{"x", "y"}}}}}}).ok());
  s.Fill();
  CHECK(Drain(health) == std::set<std::string>{"gpu-0"});
  // Node labels: both controllers.
  REQUIRE(s.api.MergePatch(gvr::kNodes, "", "gpu-1", {{"metadata", {{"labels", {{"zone", "a"}}}}}}).ok());
  s.Fill();
  CHECK(Drain(health) == std::set<std::string>{"gpu-1"});
  CHECK(Drain(policy) == std::set<std::string>{"p"});

  // A second policy can put nodes of the first in conflict: both are reconciled.
  REQUIRE(s.api.Create(gvr::kFabricPolicies, "", Policy("q")).ok());
  s.Fill();
  CHECK(Drain(policy) == std::set<std::string>{"p", "q"});
  // Its status writes do not re-queue the others.
  REQUIRE(s.api.MergePatch(gvr::kFabricPolicies, "", "q", {{"status", {{"desiredNodes", 2}}}}, "status").ok());
  s.Fill();
  CHECK(Drain(policy) == std::set<std::string>{"q"});
}

TEST_CASE("leadership: a standby holds keys without work, the leader's writes stop at the renew deadline",
          "[operator][leader]") {
  Synced s(Options(/*leader_elect=*/true));
  auto& ctl = s.op->policy_controller();
  auto& health = s.op->health_controller();
  const uint64_t writes = s.api.WriteCount();
  while (ctl.ProcessOne() || health.ProcessOne()) {
  }
  CHECK(ctl.HeldLen() == 1);
  CHECK(health.HeldLen() == 2);
  s.clock.Advance(seconds(30));
  CHECK_FALSE(ctl.ProcessOne());
  CHECK_FALSE(health.ProcessOne());
  CHECK(s.api.WriteCount() == writes);

  // Becoming leader puts the held keys back.
  REQUIRE(s.op->elector()->Poll());
  CHECK(ctl.HeldLen() == 0);
  REQUIRE(ctl.ProcessOne());
  CHECK(s.api.Peek(gvr::kDaemonSets, "ls", "lockstep-agent-p"));

  // A reconcile after the renew deadline (no renewal in between) writes nothing.
  s.Fill();
  REQUIRE(s.api.MergePatch(gvr::kDaemonSets, "ls", "lockstep-agent-p",
                           {{"spec", {{"template", {{"spec", {{"hostNetwork", false}}}}}}}})
              .ok());
  s.Fill();
  s.clock.Advance(s.op->options().election.renew_deadline);
  const uint64_t before = s.api.WriteCount();
  auto r = s.op->policy_reconciler().Reconcile("p");
  CHECK(r.error);
  CHECK(s.api.WriteCount() == before);
  CHECK(s.op->fenced_api().Refused() >= 1);
}

// --- End to end: the wired operator running on its own threads. ---

bool HasHealth(FakeKubeApi& api, const std::string& node) { return api.Get(gvr::kFabricHealths, "", node).ok(); }

struct Running {
  explicit Running(FakeKubeApi& api) : api(api), op(Build(api, SystemClock::Instance())) { op->Start(); }
  // Nothing left to happen: every informer has handled every write (a bookmark
  // carries the latest resourceVersion to each watch), no key is queued, parked
  // or in a worker, and nothing was written meanwhile.
  bool Settled() {
    std::string rv = api.CurrentResourceVersion();
    api.SendBookmarks();
    for (auto* i : {&op->policies(), &op->nodes(), &op->healths(), &op->daemonsets(), &op->configmaps()}) {
      if (i->ResourceVersion() != rv) return false;
    }
    for (auto* c : {&op->policy_controller(), &op->health_controller()}) {
      if (c->queue().Len() != 0 || c->queue().WaitingLen() != 0 || c->queue().ProcessingLen() != 0) return false;
    }
    return api.CurrentResourceVersion() == rv;
  }
  FakeKubeApi& api;
  std::unique_ptr<Operator> op;
};

TEST_CASE("operator converges: agent objects, one FabricHealth per GPU node, policy status", "[operator]") {
  FakeKubeApi api;
  for (auto n : {Node("gpu-0", true), Node("gpu-1", true), Node("cpu-0", false)}) REQUIRE(api.Create(gvr::kNodes, "", n).ok());
  REQUIRE(api.Create(gvr::kFabricPolicies, "", Policy("default")).ok());
  Running run(api);

  REQUIRE(Eventually([&] { return HasHealth(api, "gpu-0") && HasHealth(api, "gpu-1"); }));
  REQUIRE(Eventually([&] { return api.Get(gvr::kDaemonSets, "ls", "lockstep-agent-default").ok(); }));
  REQUIRE(api.Get(gvr::kConfigMaps, "ls", "lockstep-agent-default").ok());
  REQUIRE_FALSE(HasHealth(api, "cpu-0"));
  REQUIRE(Eventually([&] {
    auto p = api.Get(gvr::kFabricPolicies, "", "default");
    return p.ok() && kube::GetInt(*p, {"status", "desiredNodes"}, -1) == 2;
  }));
  // A new FabricHealth's status is written by the reconcile its own watch event queues.
  REQUIRE(Eventually([&] {
    auto h = api.Get(gvr::kFabricHealths, "", "gpu-0");
    return h.ok() && kube::GetString(*h, {"status", "phase"}) == "Pending";
  }));
  auto h = api.Get(gvr::kFabricHealths, "", "gpu-0");
  REQUIRE(kube::GetString(*h, {"metadata", "labels", "lockstep.dev/policy"}) == "default");

  SECTION("a converged operator writes nothing more") {
    REQUIRE(Eventually([&] { return run.Settled(); }));
    uint64_t writes = api.WriteCount();
    for (const auto& k : run.op->policies().store().Keys()) run.op->policy_controller().queue().Add(k);
    for (const auto& k : run.op->nodes().store().Keys()) run.op->health_controller().queue().Add(k);
    REQUIRE(Eventually([&] { return run.Settled(); }));
    REQUIRE(api.WriteCount() == writes);
  }
  SECTION("a new GPU node gets a FabricHealth and a deleted one loses it") {
    REQUIRE(api.Create(gvr::kNodes, "", Node("gpu-2", true)).ok());
    REQUIRE(Eventually([&] { return HasHealth(api, "gpu-2"); }));
    REQUIRE(api.Delete(gvr::kNodes, "", "gpu-0").ok());
    REQUIRE(Eventually([&] { return !HasHealth(api, "gpu-0"); }));
  }
  SECTION("a node whose labels stop matching loses its FabricHealth") {
    REQUIRE(api.MergePatch(gvr::kNodes, "", "gpu-1", {{"metadata", {{"labels", {{"nvidia.com/gpu.present", nullptr}}}}}}).ok());
    REQUIRE(Eventually([&] { return !HasHealth(api, "gpu-1"); }));
  }
}

TEST_CASE("API errors are retried until the operator converges", "[operator]") {
  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kNodes, "", Node("gpu-0", true)).ok());
  REQUIRE(api.Create(gvr::kFabricPolicies, "", Policy("default")).ok());
  api.FailNext(6, ErrorCode::kUnavailable, kube::Verb::kCreate);
  api.FailNext(3, ErrorCode::kUnavailable, kube::Verb::kApply);
  Running run(api);
  REQUIRE(Eventually([&] { return HasHealth(api, "gpu-0"); }, std::chrono::seconds(20)));
  REQUIRE(Eventually([&] { return api.Get(gvr::kDaemonSets, "ls", "lockstep-agent-default").ok(); },
                     std::chrono::seconds(20)));
}

TEST_CASE("an invalid policy is reported in its status and applies nothing", "[operator]") {
  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kNodes, "", Node("gpu-0", true)).ok());
  REQUIRE(api.Create(gvr::kFabricPolicies, "", Policy("bad", {{"probe", {{"intervalMs", 0}}}})).ok());
  Running run(api);
  REQUIRE(Eventually([&] {
    auto p = api.Get(gvr::kFabricPolicies, "", "bad");
    return p.ok() && p->contains("status");
  }));
  auto p = api.Get(gvr::kFabricPolicies, "", "bad");
  Json degraded = Condition(*p, "Degraded");
  REQUIRE(degraded.is_object());
  REQUIRE(degraded["reason"] == "InvalidSpec");
  REQUIRE(degraded["message"].get<std::string>().find("spec.probe.intervalMs") != std::string::npos);
  REQUIRE_FALSE(api.Get(gvr::kDaemonSets, "ls", "lockstep-agent-bad").ok());
  REQUIRE_FALSE(HasHealth(api, "gpu-0"));
}

TEST_CASE("BuildOperator rejects bad options with the option named", "[operator]") {
  FakeKubeApi api;
  OperatorOptions o = Options(true);
  o.election.identity = "";
  auto r = BuildOperator(api, SystemClock::Instance(), o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("identity") != std::string::npos);
  o = Options(true);
  o.election.renew_deadline = o.election.lease_duration;
  CHECK_FALSE(BuildOperator(api, SystemClock::Instance(), o).ok());
  o = Options();
  o.workers = 0;
  CHECK_FALSE(BuildOperator(api, SystemClock::Instance(), o).ok());
}

}  // namespace
}  // namespace lockstep::op
