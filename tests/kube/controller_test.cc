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

}  // namespace
}  // namespace lockstep::kube
