#include <catch2/catch.hpp>

#include <mutex>

#include "eventually.h"
#include "fake_kube_api.h"
#include "lockstep/kube/informer.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::kube {
namespace {

using testing::Eventually;

Json Pod(const std::string& ns, const std::string& name, const std::string& phase = "Running") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "train"}}}}},
          {"spec", {{"nodeName", "n1"}}},
          {"status", {{"phase", phase}}}};
}

// Records handler calls as "add:ns/name", "update:ns/name", "delete:ns/name".
struct Recorder {
  std::mutex mu;
  std::vector<std::string> log;
  EventHandlers Handlers() {
    return {.on_add = [this](const ObjectPtr& o) { Push("add:" + ObjectKey(*o)); },
            .on_update = [this](const ObjectPtr&, const ObjectPtr& o) { Push("update:" + ObjectKey(*o)); },
            .on_delete = [this](const ObjectPtr& o) { Push("delete:" + ObjectKey(*o)); }};
  }
  void Push(std::string s) {
    std::lock_guard l(mu);
    log.push_back(std::move(s));
  }
  bool Has(const std::string& s) {
    std::lock_guard l(mu);
    return std::find(log.begin(), log.end(), s) != log.end();
  }
  size_t Count() {
    std::lock_guard l(mu);
    return log.size();
  }
};

InformerOptions FastOptions() {
  InformerOptions o;
  o.page_size = 2;
  o.backoff = {std::chrono::milliseconds(1), std::chrono::milliseconds(10), 2.0, 0.1};
  return o;
}

TEST_CASE("informer lists in pages, syncs, then follows the watch", "[kube][informer]") {
  FakeKubeApi api;
  for (int i = 0; i < 5; ++i) REQUIRE(api.Create(gvr::kPods, "ns", Pod("ns", "p" + std::to_string(i))).ok());
  Informer inf(api, gvr::kPods, FastOptions());
  Recorder rec;
  inf.AddEventHandlers(rec.Handlers());
  CHECK_FALSE(inf.HasSynced());
  inf.Start();
  REQUIRE(Eventually([&] { return inf.HasSynced(); }));
  CHECK(inf.store().Size() == 5);
  CHECK(api.CallCount(Verb::kList) == 3);  // 2 + 2 + 1
  CHECK(rec.Count() == 5);
  auto p0 = inf.store().Get("ns", "p0");
  REQUIRE(p0 != nullptr);
  CHECK((*p0)["kind"] == "Pod");

  REQUIRE(api.Create(gvr::kPods, "ns", Pod("ns", "new")).ok());
  auto changed = Pod("ns", "p1");
  changed["spec"]["nodeName"] = "n2";
  REQUIRE(api.Update(gvr::kPods, "ns", changed).ok());
  REQUIRE(api.Delete(gvr::kPods, "ns", "p2").ok());
  REQUIRE(Eventually([&] { return rec.Has("delete:ns/p2"); }));
  CHECK(rec.Has("add:ns/new"));
  CHECK(rec.Has("update:ns/p1"));
  CHECK(inf.store().Get("ns", "p2") == nullptr);
  CHECK((*inf.store().Get("ns", "p1"))["spec"]["nodeName"] == "n2");
  CHECK(inf.store().List([](const Json& o) { return o["spec"]["nodeName"] == "n1"; }).size() == 4);
  CHECK(inf.ResourceVersion() == api.CurrentResourceVersion());
  CHECK(p0.use_count() >= 1);  // snapshots stay valid
  inf.Stop();
  CHECK(api.ActiveWatches() == 0);
}

TEST_CASE("informer relists when its watch reports Gone", "[kube][informer]") {
  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kPods, "ns", Pod("ns", "a")).ok());
  Informer inf(api, gvr::kPods, FastOptions());
  Recorder rec;
  inf.AddEventHandlers(rec.Handlers());
  inf.Start();
  REQUIRE(Eventually([&] { return inf.HasSynced() && api.ActiveWatches() == 1; }));
  api.ExpireResourceVersions();  // the live watch ends with 410 Gone
  REQUIRE(Eventually([&] { return inf.ListCount() == 2 && api.ActiveWatches() == 1; }));
  REQUIRE(api.Create(gvr::kPods, "ns", Pod("ns", "b")).ok());
  REQUIRE(Eventually([&] { return rec.Has("add:ns/b"); }));
  CHECK(rec.Count() == 2);  // the relist found nothing new: no duplicate adds
  // A watch that cannot resume from an expired version also relists.
  api.FailNext(1, ErrorCode::kGone, Verb::kWatch);
  api.CloseWatches();
  REQUIRE(Eventually([&] { return inf.ListCount() == 3; }));
  inf.Stop();
}

TEST_CASE("informer relist diff: vanished objects become deletes, changed ones updates", "[kube][informer]") {
  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kPods, "ns", Pod("ns", "keep")).ok());
  REQUIRE(api.Create(gvr::kPods, "ns", Pod("ns", "vanish")).ok());
  REQUIRE(api.Create(gvr::kPods, "ns", Pod("ns", "change")).ok());
  Informer inf(api, gvr::kPods, FastOptions());
  Recorder rec;
  inf.AddEventHandlers(rec.Handlers());
  // Every watch fails until we allow it, so changes are only seen by relisting.
  std::atomic<bool> block_watch{true};
  api.SetFaultHook([&](const FakeKubeApi::Call& c) -> std::optional<Error> {
    if (c.verb == Verb::kWatch && block_watch) return Error{ErrorCode::kGone, "expired"};
    return std::nullopt;
  });
  inf.Start();
  REQUIRE(Eventually([&] { return inf.HasSynced(); }));
  uint64_t lists = inf.ListCount();
  REQUIRE(rec.Count() == 3);
  // While the watch keeps failing with Gone, the informer keeps relisting.
  REQUIRE(api.Delete(gvr::kPods, "ns", "vanish").ok());
  auto c = *api.Peek(gvr::kPods, "ns", "change");
  c["spec"]["nodeName"] = "n9";
  REQUIRE(api.Update(gvr::kPods, "ns", c).ok());
  REQUIRE(Eventually([&] { return inf.ListCount() > lists + 1; }));
  block_watch = false;
  REQUIRE(Eventually([&] { return rec.Has("delete:ns/vanish") && rec.Has("update:ns/change"); }));
  CHECK_FALSE(rec.Has("update:ns/keep"));  // unchanged objects produce no update
  CHECK(inf.store().Size() == 2);
  inf.Stop();
}

TEST_CASE("informer follows bookmarks and retries failed lists", "[kube][informer]") {
  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kConfigMaps, "ns", {{"metadata", {{"name", "c"}}}}).ok());
  api.FailNext(2, ErrorCode::kUnavailable, Verb::kList);
  Informer inf(api, gvr::kConfigMaps, FastOptions());
  inf.Start();
  REQUIRE(Eventually([&] { return inf.HasSynced(); }));
  CHECK(api.CallCount(Verb::kList) == 3);
  REQUIRE(api.WaitForWatches(1));
  // Writes to another resource advance the global resourceVersion; a bookmark
  // carries it to this informer without any event for its own objects.
  REQUIRE(api.Create(gvr::kPods, "ns", Pod("ns", "x")).ok());
  api.SendBookmarks();
  REQUIRE(Eventually([&] { return inf.ResourceVersion() == api.CurrentResourceVersion(); }));
  // A normally closed watch resumes from the bookmark, without relisting.
  api.CloseWatches();
  REQUIRE(Eventually([&] { return api.CallCount(Verb::kWatch) >= 2 && api.ActiveWatches() == 1; }));
  CHECK(inf.ListCount() == 1);
  inf.Stop();
}

TEST_CASE("informer honours namespace and label selector, and keys cluster-scoped objects by name", "[kube][informer]") {
  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kPods, "a", Pod("a", "p")).ok());
  REQUIRE(api.Create(gvr::kPods, "b", Pod("b", "p")).ok());
  auto other = Pod("a", "q");
  other["metadata"]["labels"]["app"] = "other";
  REQUIRE(api.Create(gvr::kPods, "a", other).ok());
  REQUIRE(api.Create(gvr::kNodes, "", {{"metadata", {{"name", "n1"}}}}).ok());
  InformerOptions o = FastOptions();
  o.ns = "a";
  o.label_selector = "app=train";
  Informer pods(api, gvr::kPods, o);
  Informer nodes(api, gvr::kNodes, FastOptions());
  pods.Start();
  nodes.Start();
  REQUIRE(Eventually([&] { return pods.HasSynced() && nodes.HasSynced(); }));
  CHECK(pods.store().Keys() == std::vector<std::string>{"a/p"});
  CHECK(nodes.store().Keys() == std::vector<std::string>{"n1"});
  CHECK(nodes.store().Get("", "n1") != nullptr);
  pods.Stop();
  nodes.Stop();
}

}  // namespace
}  // namespace lockstep::kube
