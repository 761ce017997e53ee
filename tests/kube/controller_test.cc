#include <catch2/catch.hpp>

#include <map>
#include <mutex>

#include "eventually.h"
#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/kube/controller.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Eventually;

// Scripted reconciler: returns queued results per key, default success.
struct ScriptedReconciler : Reconciler {
  std::mutex mu;
  std::map<std::string, std::vector<ReconcileResult>> script;
  std::vector<std::string> calls;
  ReconcileResult Reconcile(const std::string& key) override {
    std::lock_guard l(mu);
    calls.push_back(key);
    auto& s = script[key];
    if (s.empty()) return ReconcileResult::Done();
    ReconcileResult r = s.front();
    s.erase(s.begin());
    return r;
  }
  size_t Count(const std::string& key) {
    std::lock_guard l(mu);
    return std::count(calls.begin(), calls.end(), key);
  }
};

TEST_CASE("controller: results drive the queue and metrics", "[kube][controller]") {
  FakeClock clock;
  ScriptedReconciler r;
  metrics::Registry reg;
  Controller c(r, clock, {.name = "test", .registry = &reg});
  r.script["a"] = {ReconcileResult::Fail(Conflict("stale")), ReconcileResult::After(seconds(30))};
  c.queue().Add("a");
  CHECK(reg.Gauge("lockstep_workqueue_depth", "", {"controller"}).Get({"test"}) == 1);

  REQUIRE(c.ProcessOne());  // error -> rate limited (5 ms)
  CHECK_FALSE(c.ProcessOne());
  clock.Advance(milliseconds(5));
  REQUIRE(c.ProcessOne());  // requeue_after 30 s
  clock.Advance(seconds(29));
  CHECK_FALSE(c.ProcessOne());
  CHECK(c.queue().NumRequeues("a") == 0);  // forgotten on success
  clock.Advance(seconds(1));
  REQUIRE(c.ProcessOne());  // success
  CHECK_FALSE(c.ProcessOne());
  CHECK(c.queue().WaitingLen() == 0);

  auto& total = reg.Counter("lockstep_reconcile_total", "", {"controller", "result"});
  CHECK(total.Get({"test", "error"}) == 1);
  CHECK(total.Get({"test", "requeue_after"}) == 1);
  CHECK(total.Get({"test", "success"}) == 1);
  CHECK(reg.Counter("lockstep_reconcile_errors_total", "", {"controller"}).Get({"test"}) == 1);
  CHECK(reg.Histogram("lockstep_reconcile_duration_seconds", "", {"controller"}, {}).Get({"test"}) == 3);
  CHECK(reg.Gauge("lockstep_workqueue_depth", "", {"controller"}).Get({"test"}) == 0);
}

TEST_CASE("controller: a throwing reconciler counts as an error", "[kube][controller]") {
  struct Thrower : Reconciler {
    ReconcileResult Reconcile(const std::string&) override { throw std::runtime_error("bug"); }
  } r;
  FakeClock clock;
  metrics::Registry reg;
  Controller c(r, clock, {.name = "t", .registry = &reg});
  c.queue().Add("k");
  REQUIRE(c.ProcessOne());
  CHECK(reg.Counter("lockstep_reconcile_errors_total", "", {"controller"}).Get({"t"}) == 1);
  CHECK(c.queue().NumRequeues("k") == 1);
}

TEST_CASE("controller: owner keys", "[kube][controller]") {
  Json ds = {{"metadata",
              {{"name", "agent"},
               {"namespace", "lockstep"},
               {"ownerReferences",
                {{{"apiVersion", "lockstep.dev/v1alpha1"}, {"kind", "FabricPolicy"}, {"name", "default"},
                  {"controller", true}}}}}}};
  CHECK(ControllerOwnerKey(ds, gvr::kFabricPolicies) == "default");
  CHECK_FALSE(ControllerOwnerKey(ds, gvr::kTrainingJobs));
  Json pod = {{"metadata",
               {{"name", "w-0"},
                {"namespace", "ml"},
                {"ownerReferences",
                 {{{"apiVersion", "lockstep.dev/v1alpha1"}, {"kind", "TrainingJob"}, {"name", "llm"},
                   {"controller", true}}}}}}};
  CHECK(ControllerOwnerKey(pod, gvr::kTrainingJobs) == "ml/llm");
}

TEST_CASE("controller: waits for informer sync, then reconciles watched keys", "[kube][controller]") {
  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kFabricPolicies, "", {{"metadata", {{"name", "default"}}}}).ok());
  Json ds = {{"metadata",
              {{"name", "agent"},
               {"namespace", "lockstep"},
               {"ownerReferences",
                {{{"apiVersion", "lockstep.dev/v1alpha1"}, {"kind", "FabricPolicy"}, {"name", "default"},
                  {"uid", "x"}, {"controller", true}}}}}}};
  REQUIRE(api.Create(gvr::kDaemonSets, "lockstep", ds).ok());

  InformerOptions fast;
  fast.backoff = {milliseconds(1), milliseconds(10), 2.0, 0.1};
  Informer policies(api, gvr::kFabricPolicies, fast);
  Informer daemonsets(api, gvr::kDaemonSets, fast);
  ScriptedReconciler r;
  metrics::Registry reg;
  Controller c(r, SystemClock::Instance(), {.name = "fabricpolicy", .workers = 2, .registry = &reg});
  c.For(policies);
  c.Owns(daemonsets, gvr::kFabricPolicies);
  // Lists fail at first: nothing is reconciled before every cache has synced.
  api.FailNext(1'000'000, ErrorCode::kUnavailable, Verb::kList);
  policies.Start();
  daemonsets.Start();
  c.Start();
  REQUIRE(Eventually([&] { return api.CallCount(Verb::kList) >= 4; }));
  CHECK_FALSE(c.Synced());
  CHECK(r.Count("default") == 0);
  api.ClearFaults();
  REQUIRE(Eventually([&] { return c.Synced() && r.Count("default") >= 1; }));

  // A change to an owned object reconciles its owner.
  size_t before = r.Count("default");
  REQUIRE(api.MergePatch(gvr::kDaemonSets, "lockstep", "agent", {{"spec", {{"x", 1}}}}).ok());
  REQUIRE(Eventually([&] { return r.Count("default") > before; }));
  c.Stop();
  policies.Stop();
  daemonsets.Stop();
  CHECK(reg.Counter("lockstep_reconcile_total", "", {"controller", "result"}).Get({"fabricpolicy", "success"}) >= 2);
}

TEST_CASE("controller: an update filter keeps updates it rejects out of the queue", "[kube][controller]") {
  Json node = {{"metadata", {{"name", "n1"}, {"labels", {{"gpu", "true"}}}}}, {"status", {{"heartbeat", 1}}}};
  Json heartbeat = node;
  heartbeat["status"]["heartbeat"] = 2;
  Json relabelled = node;
  relabelled["metadata"]["labels"]["gpu"] = "false";
  Json deleting = node;
  deleting["metadata"]["deletionTimestamp"] = "2026-11-23T00:00:00Z";
  CHECK_FALSE(LabelsOrDeletionChanged(node, heartbeat));
  CHECK(LabelsOrDeletionChanged(node, relabelled));
  CHECK(LabelsOrDeletionChanged(node, deleting));
  CHECK(LabelsOrDeletionChanged(Json::object(), node));
  Json policy = {{"metadata", {{"name", "p"}, {"generation", 1}}}, {"status", {{"readyNodes", 1}}}};
  Json status_only = policy;
  status_only["status"]["readyNodes"] = 2;
  Json respecced = policy;
  respecced["metadata"]["generation"] = 2;
  CHECK_FALSE(GenerationOrDeletionChanged(policy, status_only));
  CHECK(GenerationOrDeletionChanged(policy, respecced));
  Json policy_deleting = policy;
  policy_deleting["metadata"]["deletionTimestamp"] = "2026-11-23T00:00:00Z";
  CHECK(GenerationOrDeletionChanged(policy, policy_deleting));

  FakeKubeApi api;
  REQUIRE(api.Create(gvr::kNodes, "", node).ok());
  InformerOptions fast;
  fast.backoff = {milliseconds(1), milliseconds(10), 2.0, 0.1};
  Informer nodes(api, gvr::kNodes, fast);
  ScriptedReconciler r;
  Controller c(r, SystemClock::Instance(), {.name = "nodes"});
  c.For(nodes, LabelsOrDeletionChanged);
  nodes.Start();
  REQUIRE(Eventually([&] { return nodes.HasSynced() && c.queue().Len() == 1; }));
  REQUIRE(c.ProcessOne());
  // A heartbeat reaches the cache but not the queue.
  REQUIRE(api.MergePatch(gvr::kNodes, "", "n1", {{"status", {{"heartbeat", 2}}}}, "status").ok());
  REQUIRE(Eventually([&] {
    ObjectPtr o = nodes.store().Get("", "n1");
    return o && GetInt(*o, {"status", "heartbeat"}) == 2;
  }));
  CHECK(c.queue().Len() == 0);
  // A label change is queued.
  REQUIRE(api.MergePatch(gvr::kNodes, "", "n1", {{"metadata", {{"labels", {{"rack", "r7"}}}}}}).ok());
  REQUIRE(Eventually([&] { return c.queue().Len() == 1; }));
  REQUIRE(c.ProcessOne());
  CHECK(r.Count("n1") == 2);
  CHECK(c.queue().Len() == 0);
  nodes.Stop();
}

}  // namespace
}  // namespace lockstep::kube

namespace lockstep::kube {
namespace {

TEST_CASE("controller: a closed gate holds keys without work until it opens", "[kube][controller]") {
  FakeClock clock;
  ScriptedReconciler r;
  bool leader = false;
  Controller c(r, clock, {.name = "standby", .gate = [&] { return leader; }});
  for (int i = 0; i < 100; ++i) c.queue().Add("k" + std::to_string(i));
  int handled = 0;
  while (c.ProcessOne()) ++handled;
  CHECK(handled == 100);
  CHECK(c.HeldLen() == 100);
  // A standby does nothing more however long it waits: no key comes back.
  for (int i = 0; i < 10; ++i) {
    clock.Advance(std::chrono::seconds(60));
    CHECK_FALSE(c.ProcessOne());
  }
  CHECK(c.queue().WaitingLen() == 0);
  CHECK(r.calls.empty());
  // A key added again while held is held once.
  c.queue().Add("k0");
  REQUIRE(c.ProcessOne());
  CHECK(c.HeldLen() == 100);

  leader = true;
  c.GateOpened();
  CHECK(c.HeldLen() == 0);
  while (c.ProcessOne()) {
  }
  CHECK(r.calls.size() == 100);
}

TEST_CASE("controller: a key whose reconcile failed as the gate closed is held, not backed off", "[kube][controller]") {
  // Leadership lost mid-reconcile (the fenced writes were refused): before, the
  // key went to exponential backoff (up to 1000 s) and, after many such
  // failures, a regained leader waited minutes to reconcile it.
  struct LosingLease : Reconciler {
    bool leader = true;
    int calls = 0;
    ReconcileResult Reconcile(const std::string&) override {
      if (++calls == 11) leader = false;  // the lease is lost while this one runs
      return calls <= 11 ? ReconcileResult::Fail(Conflict("refused: not the leader")) : ReconcileResult::Done();
    }
  } r;
  FakeClock clock;
  Controller c(r, clock, {.name = "flappy", .gate = [&] { return r.leader; }});
  c.queue().Add("j");
  REQUIRE(c.ProcessOne());
  for (int i = 1; i < 10; ++i) {  // ten failures while leading: backed off, 5 ms * 2^9 by now
    CHECK_FALSE(c.ProcessOne());
    clock.Advance(seconds(2000));
    REQUIRE(c.ProcessOne());
  }
  CHECK(c.queue().NumRequeues("j") == 10);
  clock.Advance(seconds(2000));
  REQUIRE(c.ProcessOne());  // the 11th fails as the gate closes: held, its backoff forgotten
  CHECK(r.calls == 11);
  CHECK(c.HeldLen() == 1);
  CHECK(c.queue().NumRequeues("j") == 0);
  CHECK(c.queue().WaitingLen() == 0);
  r.leader = true;
  c.GateOpened();
  REQUIRE(c.ProcessOne());  // at once, no clock advance
  CHECK(r.calls == 12);
  CHECK(c.HeldLen() == 0);
}

TEST_CASE("controller: SpecOrMetadataChanged ignores status-only updates", "[kube][controller]") {
  Json a = {{"metadata", {{"name", "n"}, {"resourceVersion", "1"}, {"labels", {{"a", "1"}}}}},
            {"spec", {{"x", 1}}},
            {"status", {{"phase", "Healthy"}}}};
  Json status_only = a;
  status_only["status"]["phase"] = "Degraded";
  status_only["metadata"]["resourceVersion"] = "2";
  status_only["metadata"]["managedFields"] = Json::array({{{"manager", "agent"}}});
  CHECK_FALSE(SpecOrMetadataChanged(a, status_only));
  Json relabelled = status_only;
  relabelled["metadata"]["labels"]["a"] = "2";
  CHECK(SpecOrMetadataChanged(a, relabelled));
  Json spec = a;
  spec["spec"]["x"] = 2;
  CHECK(SpecOrMetadataChanged(a, spec));
}

}  // namespace
}  // namespace lockstep::kube
