// The fake's own contract: others rely on it in operator unit tests.
#include <catch2/catch.hpp>

#include "fake_kube_api.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::kube {
namespace {

Json Policy(const std::string& name) {
  return {{"metadata", {{"name", name}}}, {"spec", {{"probe", {{"intervalMs", 100}}}}}};
}

TEST_CASE("fake: create, get, conflicts and generation", "[kube][fake]") {
  FakeKubeApi api;
  auto created = api.Create(gvr::kFabricPolicies, "", Policy("default"));
  REQUIRE(created.ok());
  CHECK(Generation(*created) == 1);
  CHECK_FALSE(Uid(*created).empty());
  CHECK((*created)["kind"] == "FabricPolicy");
  CHECK(api.Create(gvr::kFabricPolicies, "", Policy("default")).code() == ErrorCode::kAlreadyExists);
  CHECK(api.Get(gvr::kFabricPolicies, "", "nope").code() == ErrorCode::kNotFound);

  Json stale = *created;
  Json next = *created;
  next["spec"]["probe"]["intervalMs"] = 200;
  auto updated = api.Update(gvr::kFabricPolicies, "", next);
  REQUIRE(updated.ok());
  CHECK(Generation(*updated) == 2);
  stale["spec"]["probe"]["intervalMs"] = 300;
  auto conflict = api.Update(gvr::kFabricPolicies, "", stale);
  REQUIRE_FALSE(conflict.ok());
  CHECK(conflict.code() == ErrorCode::kConflict);

  // A no-op write keeps the resourceVersion.
  auto same = api.Update(gvr::kFabricPolicies, "", *updated);
  REQUIRE(same.ok());
  CHECK(ResourceVersion(*same) == ResourceVersion(*updated));
}

TEST_CASE("fake: status subresource", "[kube][fake]") {
  FakeKubeApi api;
  auto p = *api.Create(gvr::kFabricPolicies, "", Policy("default"));
  Json with_status = p;
  with_status["status"] = {{"observedGeneration", 1}};
  with_status["spec"]["probe"]["intervalMs"] = 5;
  auto main = api.Update(gvr::kFabricPolicies, "", with_status);
  REQUIRE(main.ok());
  CHECK_FALSE(main->contains("status"));  // ignored on the main resource
  Json st = *main;
  st["status"] = {{"observedGeneration", 2}};
  st["spec"]["probe"]["intervalMs"] = 999;
  auto status = api.Update(gvr::kFabricPolicies, "", st, "status");
  REQUIRE(status.ok());
  CHECK((*status)["status"]["observedGeneration"] == 2);
  CHECK((*status)["spec"]["probe"]["intervalMs"] == 5);  // spec ignored on status
  CHECK(Generation(*status) == 2);
  auto patched = api.MergePatch(gvr::kFabricPolicies, "", "default", {{"status", {{"ready", true}}}}, "status");
  REQUIRE(patched.ok());
  CHECK((*patched)["status"]["observedGeneration"] == 2);
  CHECK((*patched)["status"]["ready"] == true);
  CHECK(api.Update(gvr::kConfigMaps, "ns", {{"metadata", {{"name", "x"}}}}, "status").code() ==
        ErrorCode::kNotFound);
}

TEST_CASE("fake: finalizers, uid preconditions and garbage collection", "[kube][fake]") {
  FakeKubeApi api;
  Json p = Policy("default");
  p["metadata"]["finalizers"] = {"lockstep.dev/cleanup"};
  auto owner = *api.Create(gvr::kFabricPolicies, "", p);
  Json ds = {{"metadata",
              {{"name", "agent"},
               {"namespace", "lockstep"},
               {"ownerReferences", {{{"kind", "FabricPolicy"}, {"name", "default"}, {"uid", Uid(owner)}}}}}}};
  REQUIRE(api.Create(gvr::kDaemonSets, "lockstep", ds).ok());

  CHECK(api.Delete(gvr::kFabricPolicies, "", "default", "wrong-uid").code() == ErrorCode::kConflict);
  REQUIRE(api.Delete(gvr::kFabricPolicies, "", "default").ok());
  auto deleting = api.Peek(gvr::kFabricPolicies, "", "default");
  REQUIRE(deleting);
  CHECK(deleting->contains("metadata"));
  CHECK(FindPath(*deleting, {"metadata", "deletionTimestamp"}) != nullptr);
  CHECK(api.Peek(gvr::kDaemonSets, "lockstep", "agent"));  // owner still exists

  auto done = api.MergePatch(gvr::kFabricPolicies, "", "default", {{"metadata", {{"finalizers", nullptr}}}});
  REQUIRE(done.ok());
  CHECK_FALSE(api.Peek(gvr::kFabricPolicies, "", "default"));
  CHECK_FALSE(api.Peek(gvr::kDaemonSets, "lockstep", "agent"));  // collected
}

TEST_CASE("fake: apply creates, updates and removes fields the manager dropped", "[kube][fake]") {
  FakeKubeApi api;
  ApplyOptions opts{.field_manager = "lockstep-operator"};
  Json cfg = {{"metadata", {{"labels", {{"a", "1"}, {"b", "2"}}}}}, {"data", {{"x", "1"}, {"y", "2"}}}};
  auto first = api.Apply(gvr::kConfigMaps, "ns", "cm", cfg, opts);
  REQUIRE(first.ok());
  CHECK((*first)["metadata"]["namespace"] == "ns");
  Json cfg2 = {{"metadata", {{"labels", {{"a", "1"}}}}}, {"data", {{"x", "3"}}}};
  auto second = api.Apply(gvr::kConfigMaps, "ns", "cm", cfg2, opts);
  REQUIRE(second.ok());
  CHECK((*second)["data"] == Json{{"x", "3"}});
  CHECK((*second)["metadata"]["labels"] == Json{{"a", "1"}});
  auto again = api.Apply(gvr::kConfigMaps, "ns", "cm", cfg2, opts);
  CHECK(ResourceVersion(*again) == ResourceVersion(*second));  // idempotent
  auto calls = api.Calls();
  CHECK(calls.back().field_manager == "lockstep-operator");
  CHECK(api.CallCount(Verb::kApply) == 3);
}

TEST_CASE("fake: list selectors and paging", "[kube][fake]") {
  FakeKubeApi api;
  for (int i = 0; i < 5; ++i) {
    Json pod = {{"metadata", {{"name", "p" + std::to_string(i)}, {"labels", {{"even", i % 2 ? "no" : "yes"}}}}},
                {"spec", {{"nodeName", "n" + std::to_string(i % 2)}}}};
    REQUIRE(api.Create(gvr::kPods, "ns", pod).ok());
  }
  REQUIRE(api.Create(gvr::kPods, "other", {{"metadata", {{"name", "q"}}}}).ok());
  CHECK((*api.List(gvr::kPods, "", {}))["items"].size() == 6);
  CHECK((*api.List(gvr::kPods, "ns", {.label_selector = "even=yes"}))["items"].size() == 3);
  CHECK((*api.List(gvr::kPods, "ns", {.field_selector = "spec.nodeName=n1"}))["items"].size() == 2);
  CHECK((*api.List(gvr::kPods, "", {.field_selector = "metadata.namespace!=ns"}))["items"].size() == 1);
  auto page1 = api.List(gvr::kPods, "ns", {.limit = 2});
  REQUIRE(page1.ok());
  CHECK((*page1)["items"].size() == 2);
  std::string cont = (*page1)["metadata"]["continue"];
  auto page2 = api.List(gvr::kPods, "ns", {.limit = 10, .continue_token = cont});
  REQUIRE(page2.ok());
  CHECK((*page2)["items"].size() == 3);
  CHECK_FALSE((*page2)["metadata"].contains("continue"));
  CHECK((*page2)["metadata"]["resourceVersion"] == (*page1)["metadata"]["resourceVersion"]);
  REQUIRE(api.Create(gvr::kPods, "ns", {{"metadata", {{"name", "later"}}}}).ok());
  api.ExpireResourceVersions();  // the token's version is now compacted
  CHECK(api.List(gvr::kPods, "ns", {.limit = 2, .continue_token = cont}).code() == ErrorCode::kGone);
}

TEST_CASE("fake: watch replays from a resourceVersion and reports Gone", "[kube][fake]") {
  FakeKubeApi api;
  auto a = *api.Create(gvr::kConfigMaps, "ns", {{"metadata", {{"name", "a"}}}});
  REQUIRE(api.Create(gvr::kConfigMaps, "ns", {{"metadata", {{"name", "b"}}}}).ok());
  REQUIRE(api.Delete(gvr::kConfigMaps, "ns", "a").ok());
  std::atomic<bool> stop{false};
  std::vector<std::string> seen;
  auto collect = [&](const WatchEvent& ev) {
    seen.push_back(ev.type + ":" + Name(ev.object));
    return seen.size() < 2;
  };
  WatchOptions from_a;
  from_a.resource_version = ResourceVersion(a);
  REQUIRE(api.Watch(gvr::kConfigMaps, "ns", from_a, collect, stop).ok());
  CHECK(seen == std::vector<std::string>{"ADDED:b", "DELETED:a"});

  api.FailNext(1, ErrorCode::kUnavailable, Verb::kWatch);
  CHECK(api.Watch(gvr::kConfigMaps, "ns", from_a, collect, stop).code() == ErrorCode::kUnavailable);
  api.ExpireResourceVersions();
  CHECK(api.Watch(gvr::kConfigMaps, "ns", from_a, collect, stop).code() == ErrorCode::kGone);
  std::atomic<bool> stopped{true};
  CHECK(api.Watch(gvr::kConfigMaps, "ns", {}, collect, stopped).ok());
  CHECK(api.ActiveWatches() == 0);
}

}  // namespace
}  // namespace lockstep::kube
