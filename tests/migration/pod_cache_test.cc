// PodCache (pod_cache.h) on the in-memory FakeKubeApi: the job's pods listed
// from the watch, not from the API server; other lists passed on; pods created
// through the view listed at once; wake-ups on pod events. And the pod probe
// reading through it: the job's pods from the cache, a member's pod without
// the job's label by a Get.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "fake_kube_api.h"
#include "lockstep/coordinator/kube_adapters.h"
#include "lockstep/coordinator/pod_cache.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::coordinator {
namespace {

using kube::FakeKubeApi;
using kube::Json;
using kube::Verb;
namespace gvr = kube::gvr;
using namespace std::chrono_literals;

Json Pod(const std::string& name, const std::string& job, const std::string& role = "rank") {
  Json p = {
      {"metadata", {{"name", name}, {"namespace", "ml"}}},
      {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "i"}}})}}},
      {"status",
       {{"phase", "Running"},
        {"containerStatuses", Json::array({{{"name", "c"}, {"restartCount", 0}, {"state", {{"running", {}}}}}})}}}};
  if (!job.empty()) p["metadata"]["labels"] = {{"lockstep.dev/job", job}, {"lockstep.dev/role", role}};
  return p;
}

std::string MakePod(FakeKubeApi& api, const Json& pod) {
  auto made = api.Create(gvr::kPods, "ml", pod);
  REQUIRE(made.ok());
  return kube::Uid(*made);
}

std::set<std::string> Names(const Result<Json>& list) {
  REQUIRE(list.ok());
  std::set<std::string> out;
  for (const Json& p : (*list)["items"]) out.insert(kube::Name(p));
  return out;
}

bool Eventually(const std::function<bool()>& f) {
  for (int i = 0; i < 400; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return f();
}

const kube::ListOptions kTrain{.label_selector = "lockstep.dev/job=train"};

TEST_CASE("pod cache: equality label selectors only", "[migration][kube]") {
  using M = std::map<std::string, std::string>;
  CHECK(EqualitySelector("a=b") == M{{"a", "b"}});
  CHECK(EqualitySelector("lockstep.dev/job=train,lockstep.dev/role==spare") ==
        M{{"lockstep.dev/job", "train"}, {"lockstep.dev/role", "spare"}});
  CHECK(EqualitySelector(" a = b ") == M{{"a", "b"}});
  CHECK_FALSE(EqualitySelector(""));
  CHECK_FALSE(EqualitySelector("a!=b"));
  CHECK_FALSE(EqualitySelector("a in (b)"));
  CHECK_FALSE(EqualitySelector("a"));
  CHECK_FALSE(EqualitySelector("a=b,c"));
}

TEST_CASE("pod cache: the job's pods are listed from the watch, other lists go to the API", "[migration][kube]") {
  FakeKubeApi api;
  MakePod(api, Pod("train-rank-0", "train"));
  MakePod(api, Pod("train-spare-0", "train", "spare"));
  MakePod(api, Pod("other-rank-0", "other"));
  MakePod(api, Pod("plain", ""));
  PodCache cache(api, "ml", "train");
  std::atomic<int> changes{0};
  cache.OnChange([&] { ++changes; });
  // Before the first list: no answer rather than an empty one (an empty list would mean "all deleted").
  CHECK(cache.view().List(gvr::kPods, "ml", kTrain).code() == ErrorCode::kUnavailable);
  cache.Start();
  REQUIRE(cache.WaitSynced(5s));
  const uint64_t lists = api.CallCount(Verb::kList);
  CHECK(Names(cache.view().List(gvr::kPods, "ml", kTrain)) == std::set<std::string>{"train-rank-0", "train-spare-0"});
  CHECK(Names(cache.view().List(gvr::kPods, "ml",
                                {.label_selector = "lockstep.dev/job=train,lockstep.dev/role=spare"})) ==
        std::set<std::string>{"train-spare-0"});
  CHECK(api.CallCount(Verb::kList) == lists);  // none of them reached the API
  // Another job, no selector, another namespace: the API answers.
  CHECK(Names(cache.view().List(gvr::kPods, "ml", {.label_selector = "lockstep.dev/job=other"})) ==
        std::set<std::string>{"other-rank-0"});
  CHECK(Names(cache.view().List(gvr::kPods, "ml", {})).size() == 4);
  CHECK(api.CallCount(Verb::kList) == lists + 2);

  // A pod deleted elsewhere leaves the cache and wakes the workers.
  const int before = changes.load();
  REQUIRE(api.Delete(gvr::kPods, "ml", "train-rank-0").ok());
  CHECK(Eventually([&] { return Names(cache.view().List(gvr::kPods, "ml", kTrain)).count("train-rank-0") == 0; }));
  CHECK(changes.load() > before);
  // A pod created through the view is listed at once (read your own writes).
  auto made = cache.view().Create(gvr::kPods, "ml", Pod("train-spare-1", "train", "spare"));
  REQUIRE(made.ok());
  CHECK(Names(cache.view().List(gvr::kPods, "ml", kTrain)).count("train-spare-1") == 1);
  // Other calls pass through.
  CHECK(cache.view().Get(gvr::kPods, "ml", "plain").ok());
  cache.Stop();
}

TEST_CASE("pod probe over the cache: the job's pods from the watch, a pod without the job label by a Get",
          "[migration][kube]") {
  FakeKubeApi api;
  const std::string u0 = MakePod(api, Pod("train-rank-0", "train"));
  const std::string u1 = MakePod(api, Pod("train-rank-1", "train"));
  const std::string up = MakePod(api, Pod("kubeflow-pod", ""));
  PodCache cache(api, "ml", "train");
  cache.Start();
  REQUIRE(cache.WaitSynced(5s));
  KubePodProbe probe(cache.view(), "ml", 1000ms, "lockstep.dev/job=train");
  const MemberRef m0{"m0", "10.0.0.1", 1, "train-rank-0", u0}, m1{"m1", "10.0.0.2", 1, "train-rank-1", u1},
      mp{"mp", "10.0.0.3", 1, "kubeflow-pod", up};
  for (const auto& m : {m0, m1, mp}) CHECK_FALSE(probe.Gone(m));
  api.ClearCalls();
  probe.RunOnce();
  for (const auto& m : {m0, m1, mp}) CHECK_FALSE(probe.Gone(m));
  // No list of the namespace: only the unlabelled pod is read, by name.
  CHECK(api.CallCount(Verb::kList) == 0);
  CHECK(api.CallCount(Verb::kGet) == 1);
  REQUIRE(api.Delete(gvr::kPods, "ml", "train-rank-1").ok());
  REQUIRE(api.Delete(gvr::kPods, "ml", "kubeflow-pod").ok());
  REQUIRE(Eventually([&] { return Names(cache.view().List(gvr::kPods, "ml", kTrain)).size() == 1; }));
  probe.RunOnce();
  CHECK_FALSE(probe.Gone(m0));
  CHECK(probe.Gone(m1) == std::optional<std::string>("pod train-rank-1 was deleted"));
  CHECK(probe.Gone(mp) == std::optional<std::string>("pod kubeflow-pod was deleted"));
  CHECK(api.CallCount(Verb::kList) == 0);
  cache.Stop();
}

}  // namespace
}  // namespace lockstep::coordinator
