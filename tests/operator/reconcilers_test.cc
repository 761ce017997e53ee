// The operator's two controllers wired as in main.cc, against the in-memory
// FakeKubeApi: informers, work queues, workers and reconcilers all real.
#include <catch2/catch.hpp>

#include "../kube/eventually.h"
#include "fake_kube_api.h"
#include "lockstep/kube/informer.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/fabrichealth_reconciler.h"
#include "lockstep/operator/fabricpolicy_reconciler.h"

namespace lockstep::op {
namespace {

using kube::FakeKubeApi;
using kube::testing::Eventually;
namespace gvr = kube::gvr;

Json Node(const std::string& name, bool gpu) {
  Json labels = gpu ? Json{{"nvidia.com/gpu.present", "true"}} : Json{{"type", "cpu"}};
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}}};
}

Json Policy(const std::string& name, Json spec = Json::object()) {
  return {{"apiVersion", "lockstep.dev/v1alpha1"}, {"kind", "FabricPolicy"}, {"metadata", {{"name", name}}},
          {"spec", spec}};
}

// The operator's controllers over one FakeKubeApi.
struct Operator {
  explicit Operator(FakeKubeApi& api) : api(api) {
    settings.namespace_name = "ls";
    kube::InformerOptions owned{.ns = "ls", .label_selector = "app.kubernetes.io/managed-by=lockstep-operator"};
    policy_ctl.For(policies);
    policy_ctl.Owns(daemonsets, gvr::kFabricPolicies);
    policy_ctl.Owns(configmaps, gvr::kFabricPolicies);
    policy_ctl.Watches(nodes, [&](const Json&) { return policies.store().Keys(); });
    health_ctl.For(nodes);
    health_ctl.For(healths);
    health_ctl.Watches(policies, [&](const Json&) { return nodes.store().Keys(); });
    for (auto* i : {&policies, &nodes, &healths, &daemonsets, &configmaps}) i->Start();
    policy_ctl.Start();
    health_ctl.Start();
  }
  ~Operator() {
    policy_ctl.Stop();
    health_ctl.Stop();
    for (auto* i : {&policies, &nodes, &healths, &daemonsets, &configmaps}) i->Stop();
  }
  bool Idle() {
    for (auto* c : {&policy_ctl, &health_ctl}) {
      if (c->queue().Len() != 0 || c->queue().WaitingLen() != 0 || c->queue().ProcessingLen() != 0) return false;
    }
    return true;
  }
  // Nothing left to happen: every informer has handled every write (a bookmark carries
  // the latest resourceVersion to each watch), no key is queued, parked or in a
  // worker, and nothing was written meanwhile.
  bool Settled() {
    std::string rv = api.CurrentResourceVersion();
    api.SendBookmarks();
    for (auto* i : {&policies, &nodes, &healths, &daemonsets, &configmaps}) {
      if (i->ResourceVersion() != rv) return false;
    }
    return Idle() && api.CurrentResourceVersion() == rv;
  }

  FakeKubeApi& api;
  OperatorSettings settings;
  kube::Informer policies{api, gvr::kFabricPolicies};
  kube::Informer nodes{api, gvr::kNodes};
  kube::Informer healths{api, gvr::kFabricHealths};
  kube::Informer daemonsets{api, gvr::kDaemonSets, {.ns = "ls", .label_selector = "app.kubernetes.io/managed-by=lockstep-operator"}};
  kube::Informer configmaps{api, gvr::kConfigMaps, {.ns = "ls", .label_selector = "app.kubernetes.io/managed-by=lockstep-operator"}};
  kube::EventRecorder events{api, SystemClock::Instance()};
  FabricPolicyReconciler policy_r{api, {policies.store(), nodes.store(), daemonsets.store(), configmaps.store()},
                                  events, SystemClock::Instance(), [] { OperatorSettings s; s.namespace_name = "ls"; return s; }()};
  FabricHealthReconciler health_r{api, {policies.store(), nodes.store(), healths.store()}, SystemClock::Instance()};
  kube::Controller policy_ctl{policy_r, SystemClock::Instance(), {.name = "fabricpolicy", .workers = 2}};
  kube::Controller health_ctl{health_r, SystemClock::Instance(), {.name = "fabrichealth", .workers = 2}};
};

bool HasHealth(FakeKubeApi& api, const std::string& node) { return api.Get(gvr::kFabricHealths, "", node).ok(); }

TEST_CASE("operator converges: agent objects, one FabricHealth per GPU node, policy status", "[operator]") {
  FakeKubeApi api;
  for (auto n : {Node("gpu-0", true), Node("gpu-1", true), Node("cpu-0", false)}) REQUIRE(api.Create(gvr::kNodes, "", n).ok());
  REQUIRE(api.Create(gvr::kFabricPolicies, "", Policy("default")).ok());
  Operator op(api);

  REQUIRE(Eventually([&] { return HasHealth(api, "gpu-0") && HasHealth(api, "gpu-1"); }));
  REQUIRE(Eventually([&] { return api.Get(gvr::kDaemonSets, "ls", "lockstep-agent-default").ok(); }));
  REQUIRE(api.Get(gvr::kConfigMaps, "ls", "lockstep-agent-default").ok());
  REQUIRE_FALSE(HasHealth(api, "cpu-0"));
  REQUIRE(Eventually([&] {
    auto p = api.Get(gvr::kFabricPolicies, "", "default");
    return p.ok() && kube::GetInt(*p, {"status", "desiredNodes"}, -1) == 2;
  }));
  auto h = api.Get(gvr::kFabricHealths, "", "gpu-0");
  REQUIRE(kube::GetString(*h, {"status", "phase"}) == "Pending");
  REQUIRE(kube::GetString(*h, {"metadata", "labels", "lockstep.dev/policy"}) == "default");

  SECTION("a converged operator writes nothing more") {
    REQUIRE(Eventually([&] { return op.Settled(); }));
    uint64_t writes = api.WriteCount();
    for (const auto& k : op.policies.store().Keys()) op.policy_ctl.queue().Add(k);
    for (const auto& k : op.nodes.store().Keys()) op.health_ctl.queue().Add(k);
    REQUIRE(Eventually([&] { return op.Settled(); }));
    REQUIRE(api.WriteCount() == writes);
  }
  SECTION("a new GPU node gets a FabricHealth and a deleted one loses it") {
    REQUIRE(api.Create(gvr::kNodes, "", Node("gpu-2", true)).ok());
    REQUIRE(Eventually([&] { return HasHealth(api, "gpu-2"); }));
    REQUIRE(api.Delete(gvr::kNodes, "", "gpu-0").ok());
    REQUIRE(Eventually([&] { return !HasHealth(api, "gpu-0"); }));
  }
  SECTION("a node whose labels stop matching loses its FabricHealth") {
    auto n = api.Get(gvr::kNodes, "", "gpu-1");
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
  Operator op(api);
  REQUIRE(Eventually([&] { return HasHealth(api, "gpu-0"); }, std::chrono::seconds(20)));
  REQUIRE(Eventually([&] { return api.Get(gvr::kDaemonSets, "ls", "lockstep-agent-default").ok(); },
                     std::chrono::seconds(20)));
}

TEST_CASE("an invalid policy is reported in its status and applies nothing", "[operator]") {
  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kNodes, "", Node("gpu-0", true)).ok());
  REQUIRE(api.Create(gvr::kFabricPolicies, "", Policy("bad", {{"probe", {{"intervalMs", 0}}}})).ok());
  Operator op(api);
  REQUIRE(Eventually([&] {
    auto p = api.Get(gvr::kFabricPolicies, "", "bad");
    return p.ok() && p->contains("status");
  }));
  auto p = api.Get(gvr::kFabricPolicies, "", "bad");
  bool found = false;
  for (const Json& c : (*p)["status"]["conditions"]) {
    if (c["type"] == "Degraded") {
      found = true;
      REQUIRE(c["reason"] == "InvalidSpec");
      REQUIRE(c["message"].get<std::string>().find("spec.probe.intervalMs") != std::string::npos);
    }
  }
  REQUIRE(found);
  REQUIRE_FALSE(api.Get(gvr::kDaemonSets, "ls", "lockstep-agent-bad").ok());
  REQUIRE_FALSE(HasHealth(api, "gpu-0"));
}

}  // namespace
}  // namespace lockstep::op
