// The coordinator's Kubernetes adapters (kube_adapters.h) on the in-memory
// FakeKubeApi: the spare pod's shape, its creation retried through API errors,
// ended spare pods reaped; the pod fencer (grace 0, uid precondition, retries);
// the pod probe; the ConfigMap state store. Worker threads are not started:
// each test drives RunOnce() itself.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <regex>
#include <set>
#include <thread>

#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/coordinator/coordinator.h"
#include "lockstep/coordinator/kube_adapters.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/migration/state_json.h"

namespace lockstep::coordinator {
namespace {

using kube::FakeKubeApi;
using kube::Json;
using kube::Verb;
namespace gvr = kube::gvr;
using namespace std::chrono_literals;

const kube::BackoffPolicy kFast{std::chrono::milliseconds(1), std::chrono::milliseconds(4), 2.0, 0.0};

// What a TrainJob's pod looks like when the operator copies it as a template.
Json Template() {
  return Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
      "name": "train-node-0-1-xk2p4", "generateName": "train-node-0-1-", "uid": "old-uid",
      "resourceVersion": "77",
      "labels": {"app": "train", "jobset.sigs.k8s.io/jobset-name": "train",
                 "batch.kubernetes.io/job-name": "train-node-0", "job-name": "train-node-0",
                 "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"},
      "annotations": {"batch.kubernetes.io/job-completion-index": "1", "note": "kept"},
      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train-node-0", "uid": "j1",
                           "controller": true}]
    },
    "spec": {
      "nodeName": "node-7",
      "restartPolicy": "OnFailure",
      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
      "containers": [{"name": "trainer", "image": "train:1",
                      "resources": {"limits": {"nvidia.com/gpu": "1"}},
                      "env": [{"name": "PET_NODE_RANK", "value": "1"}, {"name": "LOCKSTEP_RANK", "value": "1"},
                              {"name": "KEEP", "value": "yes"},
                              {"name": "LOCKSTEP_COORDINATOR", "value": "http://stale:1"}]}]
    },
    "status": {"phase": "Running"}
  })");
}

KubeSpareOptions Options(std::string suffix = "abcde") {
  KubeSpareOptions o;
  o.job = "train";
  o.ns = "ml";
  o.pod_template = Template();
  o.coordinator_url = "http://10.0.0.2:7000";
  o.suffix = std::move(suffix);
  o.poll_interval = 0ms;
  o.backoff = kFast;
  return o;
}

const Json* Env(const Json& container, const std::string& name) {
  for (const Json& e : container["env"]) {
    if (e["name"] == name) return &e;
  }
  return nullptr;
}

Json Pod(const std::string& name, const std::string& phase = "Running", const std::string& ip = "") {
  Json p = {{"metadata", {{"name", name}, {"namespace", "ml"}}},
            {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "i"}}})}}},
            {"status", {{"phase", phase}}}};
  if (!ip.empty()) p["status"]["podIP"] = ip;
  p["status"]["containerStatuses"] =
      Json::array({{{"name", "c"}, {"restartCount", 0}, {"state", {{"running", {{"startedAt", "x"}}}}}}});
  return p;
}

std::string MakePod(FakeKubeApi& api, const Json& pod) {
  auto made = api.Create(gvr::kPods, "ml", pod);
  REQUIRE(made.ok());
  return kube::Uid(*made);
}

// A member registering from pod `pod` (uid `uid`) at 10.0.0.9.
migration::Outcome RegisterInPod(Coordinator& coord, const std::string& member, migration::Role role, int rank,
                                 const std::string& pod, const std::string& uid) {
  migration::Registered r;
  r.member = member;
  r.role = role;
  r.rank = rank;
  r.host = "10.0.0.9";
  r.store_port = 4000;
  r.pid = 1;
  r.pod_name = pod;
  r.pod_uid = uid;
  return coord.Apply(r);
}

TEST_CASE("spare pod: named <job>-spare-<n>-<suffix>, our labels and env, nothing of the job's controller",
          "[migration][kube]") {
  FakeKubeApi api;
  KubeSpareLauncher launcher(api, Options());
  auto h = launcher.Launch();
  REQUIRE(h.ok());
  CHECK(h->pod == "train-spare-0-abcde");
  CHECK(h->pid == 0);
  CHECK(launcher.Launch()->pod == "train-spare-1-abcde");  // the counter makes names unique in a run
  CHECK(api.CallCount() == 0);                             // Launch() only queues: no API call under the lock
  launcher.RunOnce();
  auto pod = api.Peek(gvr::kPods, "ml", "train-spare-0-abcde");
  REQUIRE(pod.has_value());
  REQUIRE(api.Peek(gvr::kPods, "ml", "train-spare-1-abcde").has_value());
  const Json& meta = (*pod)["metadata"];
  CHECK(meta["labels"] == Json({{"app", "train"}, {"lockstep.dev/job", "train"}, {"lockstep.dev/role", "spare"}}));
  CHECK(meta["annotations"] == Json({{"note", "kept"}}));
  CHECK_FALSE(meta.contains("ownerReferences"));
  CHECK_FALSE(meta.contains("generateName"));
  CHECK(meta["uid"] != "old-uid");
  CHECK_FALSE((*pod)["spec"].contains("nodeName"));
  CHECK((*pod)["spec"]["restartPolicy"] == "Never");
  CHECK((*pod)["spec"]["tolerations"] == Template()["spec"]["tolerations"]);  // scheduled like the job's pods
  const Json& c = (*pod)["spec"]["containers"][0];
  CHECK(c["resources"] == Template()["spec"]["containers"][0]["resources"]);
  REQUIRE(Env(c, "LOCKSTEP_COORDINATOR"));
  CHECK((*Env(c, "LOCKSTEP_COORDINATOR"))["value"] == "http://10.0.0.2:7000");
  CHECK((*Env(c, "LOCKSTEP_ROLE"))["value"] == "spare");
  CHECK((*Env(c, "LOCKSTEP_POD_NAME"))["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name");
  CHECK((*Env(c, "LOCKSTEP_POD_UID"))["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid");
  CHECK((*Env(c, "KEEP"))["value"] == "yes");
  CHECK(Env(c, "LOCKSTEP_RANK") == nullptr);
  CHECK(Env(c, "PET_NODE_RANK") == nullptr);
  int coordinators = 0;
  for (const Json& e : c["env"]) coordinators += e["name"] == "LOCKSTEP_COORDINATOR" ? 1 : 0;
  CHECK(coordinators == 1);
  CHECK(launcher.Reap().empty());

  // A restarted coordinator (another random suffix) never reuses a name.
  KubeSpareLauncher a(api, Options("")), b(api, Options(""));
  CHECK(std::regex_match(a.Launch()->pod, std::regex("train-spare-0-[a-z0-9]{5}")));
  CHECK(a.Launch()->pod != b.Launch()->pod);
}

TEST_CASE("spare pod templates and job names are checked", "[migration][kube]") {
  auto o = Options();
  CHECK(KubeSpareLauncher::Check(o).ok());
  o.job = "Train_1";
  CHECK(KubeSpareLauncher::Check(o).error().message.find("--job \"Train_1\" must be a DNS label") == 0);
  o = Options();
  o.pod_template["kind"] = "Deployment";
  CHECK(KubeSpareLauncher::Check(o).error().message == "the spare pod template must be a Pod (kind is \"Deployment\")");
  o = Options();
  o.pod_template["spec"].erase("containers");
  CHECK(KubeSpareLauncher::Check(o).error().message == "the spare pod template has no spec.containers");
}

TEST_CASE("spare pod creation: API errors are retried, never a failed start, a refused pod is one",
          "[migration][kube]") {
  FakeKubeApi api;
  KubeSpareLauncher launcher(api, Options());
  api.FailNext(3, ErrorCode::kUnavailable, Verb::kCreate, "etcdserver: request timed out");
  REQUIRE(launcher.Launch().ok());
  launcher.RunOnce();
  CHECK(launcher.Pending() == 1);
  CHECK(launcher.Reap().empty());  // not reported as ended: it is still starting
  for (int i = 0; i < 200 && launcher.Pending() > 0; ++i) {
    std::this_thread::sleep_for(1ms);
    launcher.RunOnce();
  }
  CHECK(launcher.Pending() == 0);
  CHECK(api.CallCount(Verb::kCreate) == 4);
  CHECK(api.Peek(gvr::kPods, "ml", "train-spare-0-abcde").has_value());
  CHECK(launcher.Reap().empty());

  // A timeout whose create did land: AlreadyExists with our labels is ours.
  api.FailNext(1, ErrorCode::kUnavailable, Verb::kCreate);
  REQUIRE(launcher.Launch()->pod == "train-spare-1-abcde");
  launcher.RunOnce();
  REQUIRE(api.Create(gvr::kPods, "ml", launcher.SparePod("train-spare-1-abcde")).ok());
  for (int i = 0; i < 200 && launcher.Pending() > 0; ++i) {
    std::this_thread::sleep_for(1ms);
    launcher.RunOnce();
  }
  CHECK(launcher.Reap().empty());

  // Refused (422): reported at once as a spare that did not start.
  api.FailNext(1, ErrorCode::kInvalidArgument, Verb::kCreate, "spec.containers[0].image: Required value");
  REQUIRE(launcher.Launch().ok());
  launcher.RunOnce();
  auto ended = launcher.Reap();
  REQUIRE(ended.size() == 1);
  CHECK(ended[0].spare.pod == "train-spare-2-abcde");
  CHECK(ended[0].how == "not created: spec.containers[0].image: Required value (create pods)");
  CHECK(launcher.Pending() == 0);
}

TEST_CASE("spare pods that fail, succeed or are deleted are reaped once", "[migration][kube]") {
  FakeKubeApi api;
  KubeSpareLauncher launcher(api, Options());
  for (int i = 0; i < 3; ++i) REQUIRE(launcher.Launch().ok());
  launcher.RunOnce(true);
  CHECK(launcher.Reap().empty());
  Json failed = {{"status", {{"phase", "Failed"}, {"reason", "Evicted"}}}};
  REQUIRE(api.MergePatch(gvr::kPods, "ml", "train-spare-0-abcde", failed, "status").ok());
  REQUIRE(api.Delete(gvr::kPods, "ml", "train-spare-2-abcde").ok());
  api.FailNext(1, ErrorCode::kUnavailable, Verb::kList);
  launcher.RunOnce(true);  // the list fails: nothing is known, nothing reported
  CHECK(launcher.Reap().empty());
  launcher.RunOnce(true);
  auto ended = launcher.Reap();
  REQUIRE(ended.size() == 2);
  std::map<std::string, std::string> how;
  for (const auto& e : ended) how[e.spare.pod] = e.how;
  CHECK(how["train-spare-0-abcde"] == "pod Failed (Evicted)");
  CHECK(how["train-spare-2-abcde"] == "pod deleted");
  launcher.RunOnce(true);
  CHECK(launcher.Reap().empty());  // once

  // A new coordinator adopts the spare pods it finds, and reports their end.
  auto next_options = Options("zzzzz");
  next_options.poll_interval = 5ms;
  KubeSpareLauncher next(api, next_options);
  next.Start();
  REQUIRE(api.Delete(gvr::kPods, "ml", "train-spare-1-abcde").ok());
  ended.clear();
  for (int i = 0; i < 500 && ended.empty(); ++i) {
    std::this_thread::sleep_for(2ms);
    ended = next.Reap();
  }
  REQUIRE(ended.size() == 1);
  CHECK(ended[0].spare.pod == "train-spare-1-abcde");
}

TEST_CASE("pod fencer: grace period 0 with the member's uid as precondition, off the caller's thread",
          "[migration][kube]") {
  FakeKubeApi api;
  std::string uid = MakePod(api, Pod("train-node-0-1"));
  KubePodFencer fencer(api, {.ns = "ml", .backoff = kFast});
  REQUIRE(fencer.Fence(MemberRef{"m1", "10.0.0.5", 1, "train-node-0-1", uid}).ok());
  CHECK(api.CallCount() == 1);  // only the create above: Fence() queued the deletion
  CHECK(fencer.Pending() == 1);
  fencer.RunOnce();
  auto deletes = api.Deletes();
  REQUIRE(deletes.size() == 1);
  CHECK(deletes[0].name == "train-node-0-1");
  CHECK(deletes[0].ns == "ml");
  CHECK(deletes[0].uid_precondition == uid);
  CHECK(deletes[0].grace_period_seconds == std::optional<int64_t>(0));
  CHECK_FALSE(api.Peek(gvr::kPods, "ml", "train-node-0-1").has_value());
  CHECK(fencer.Results() == std::vector<std::string>{"deleted pod train-node-0-1"});
}

TEST_CASE("pod fencer: a newer pod of the same name survives, a gone pod is done", "[migration][kube]") {
  FakeKubeApi api;
  std::string old_uid = MakePod(api, Pod("train-node-0-1"));
  REQUIRE(api.Delete(gvr::kPods, "ml", "train-node-0-1").ok());
  std::string new_uid = MakePod(api, Pod("train-node-0-1"));  // recreated by the job's controller
  REQUIRE(new_uid != old_uid);
  KubePodFencer fencer(api, {.ns = "ml", .backoff = kFast});
  REQUIRE(fencer.Fence(MemberRef{"m1", "10.0.0.5", 1, "train-node-0-1", old_uid}).ok());
  REQUIRE(fencer.Fence(MemberRef{"m2", "10.0.0.6", 1, "train-node-0-2", "u2"}).ok());
  fencer.RunOnce();
  CHECK(fencer.Pending() == 0);
  auto pod = api.Peek(gvr::kPods, "ml", "train-node-0-1");
  REQUIRE(pod.has_value());
  CHECK(kube::Uid(*pod) == new_uid);
  CHECK(fencer.Results() ==
        std::vector<std::string>{"pod train-node-0-1 is a newer pod (uid is not " + old_uid + "): left alone",
                                 "pod train-node-0-2 already gone"});
}

TEST_CASE("pod fencer: API errors are retried with backoff until the pod is deleted", "[migration][kube]") {
  FakeKubeApi api;
  std::string uid = MakePod(api, Pod("p"));
  KubePodFencer fencer(api, {.ns = "ml", .backoff = kFast});
  api.FailNext(3, ErrorCode::kUnavailable, Verb::kDelete, "connection refused");
  REQUIRE(fencer.Fence(MemberRef{"m", "h", 1, "p", uid}).ok());
  fencer.RunOnce();
  CHECK(fencer.Pending() == 1);
  CHECK(api.Peek(gvr::kPods, "ml", "p").has_value());
  for (int i = 0; i < 200 && fencer.Pending() > 0; ++i) {
    std::this_thread::sleep_for(1ms);
    fencer.RunOnce();
  }
  CHECK(fencer.Pending() == 0);
  CHECK(api.CallCount(Verb::kDelete) == 4);
  CHECK_FALSE(api.Peek(gvr::kPods, "ml", "p").has_value());

  // The worker thread does the same on its own.
  std::string uid2 = MakePod(api, Pod("q"));
  fencer.Start();
  api.FailNext(2, ErrorCode::kUnavailable, Verb::kDelete);
  REQUIRE(fencer.Fence(MemberRef{"m", "h", 1, "q", uid2}).ok());
  for (int i = 0; i < 1000 && api.Peek(gvr::kPods, "ml", "q").has_value(); ++i) std::this_thread::sleep_for(2ms);
  CHECK_FALSE(api.Peek(gvr::kPods, "ml", "q").has_value());
}

TEST_CASE("pod fencer: without a pod name, the pod whose IP is the member's host", "[migration][kube]") {
  FakeKubeApi api;
  std::string uid = MakePod(api, Pod("a", "Running", "10.0.0.5"));
  MakePod(api, Pod("b", "Running", "10.0.0.6"));
  KubePodFencer fencer(api, {.ns = "ml", .backoff = kFast});
  REQUIRE(fencer.Fence(MemberRef{"m", "10.0.0.5", 1, "", ""}).ok());
  fencer.RunOnce();
  CHECK_FALSE(api.Peek(gvr::kPods, "ml", "a").has_value());
  CHECK(api.Peek(gvr::kPods, "ml", "b").has_value());
  REQUIRE(api.Deletes().size() == 1);
  CHECK(api.Deletes()[0].uid_precondition == uid);
  REQUIRE(fencer.Fence(MemberRef{"m", "10.9.9.9", 1, "", ""}).ok());
  fencer.RunOnce();
  CHECK(fencer.Results().back() == "no single pod with IP 10.9.9.9 (0 found): nothing deleted");
  CHECK_FALSE(fencer.Fence(MemberRef{"m", "", 1, "", ""}).ok());
}

TEST_CASE("pod probe: deleted, replaced, failed, terminated or restarted means dead", "[migration][kube]") {
  FakeKubeApi api;
  std::map<std::string, MemberRef> refs;
  for (const char* n : {"alive", "deleted", "replaced", "failed", "terminated", "restarted", "byip"}) {
    std::string uid = MakePod(api, Pod(n, "Running", std::string("10.0.1.") + std::to_string(refs.size())));
    refs[n] = MemberRef{std::string("m-") + n, "10.0.1." + std::to_string(refs.size()), 1, n, uid};
  }
  refs["byip"].pod_name = refs["byip"].pod_uid = "";
  KubePodProbe probe(api, "ml");
  auto ask = [&] {
    std::map<std::string, std::string> gone;
    for (const auto& [n, r] : refs) {
      if (auto how = probe.Gone(r)) gone[n] = *how;
    }
    return gone;
  };
  CHECK(ask().empty());  // nothing polled yet
  probe.RunOnce();
  CHECK(ask().empty());
  REQUIRE(api.Delete(gvr::kPods, "ml", "deleted").ok());
  REQUIRE(api.Delete(gvr::kPods, "ml", "replaced").ok());
  MakePod(api, Pod("replaced"));
  REQUIRE(api.MergePatch(gvr::kPods, "ml", "failed", Json{{"status", {{"phase", "Failed"}}}}, "status").ok());
  Json term = Pod("terminated")["status"];
  term["containerStatuses"][0]["state"] = {{"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}}}};
  REQUIRE(api.MergePatch(gvr::kPods, "ml", "terminated", Json{{"status", term}}, "status").ok());
  Json restarted = Pod("restarted")["status"];
  restarted["containerStatuses"][0]["restartCount"] = 1;
  REQUIRE(api.MergePatch(gvr::kPods, "ml", "restarted", Json{{"status", restarted}}, "status").ok());
  REQUIRE(api.MergePatch(gvr::kPods, "ml", "byip", Json{{"status", {{"phase", "Succeeded"}}}}, "status").ok());
  probe.RunOnce();
  auto gone = ask();
  CHECK(gone.count("alive") == 0);
  CHECK(gone["deleted"] == "pod deleted was deleted");
  CHECK(gone["replaced"].find("pod replaced was replaced (uid ") == 0);
  CHECK(gone["failed"] == "pod failed is Failed");
  CHECK(gone["terminated"] == "container c of pod terminated terminated (exit code 137, OOMKilled)");
  CHECK(gone["restarted"] == "container c of pod restarted restarted (restart count 1)");
  CHECK(gone["byip"] == "pod byip is Succeeded");
  CHECK(gone.size() == 6);
  CHECK(probe.LocalOnly() == false);
  // The process is gone but the pod stays (it runs the next one) only for the container verdicts.
  for (const auto& [n, r] : refs) CHECK(probe.PodStays(r) == (n == "terminated" || n == "restarted"));
  // A List error: nothing new is concluded, what was concluded stays.
  api.FailNext(1, ErrorCode::kUnavailable, Verb::kList);
  probe.RunOnce();
  CHECK(ask().size() == 6);
}

TEST_CASE("configmap state store: created when absent, updated, conflicts and API errors retried",
          "[migration][kube]") {
  FakeKubeApi api;
  ConfigMapStateStore store(api, {.ns = "ml", .name = "train-state", .job = "train", .retry_delay = 1ms});
  auto none = store.Load();
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  REQUIRE(store.Save("{\"v\":1}").ok());
  auto cm = api.Peek(gvr::kConfigMaps, "ml", "train-state");
  REQUIRE(cm.has_value());
  CHECK((*cm)["data"]["state.json"] == "{\"v\":1}");
  CHECK((*cm)["metadata"]["labels"]["lockstep.dev/job"] == "train");
  CHECK(api.CallCount(Verb::kCreate) == 1);
  REQUIRE(store.Save("{\"v\":2}").ok());
  CHECK(api.CallCount(Verb::kUpdate) == 1);
  CHECK((*api.Peek(gvr::kConfigMaps, "ml", "train-state"))["data"]["state.json"] == "{\"v\":2}");

  // Someone else changed it: the update conflicts, is re-read and written again.
  Json other = *api.Peek(gvr::kConfigMaps, "ml", "train-state");
  other["data"]["note"] = "x";
  REQUIRE(api.Update(gvr::kConfigMaps, "ml", other).ok());
  api.ClearCalls();
  REQUIRE(store.Save("{\"v\":3}").ok());
  CHECK(api.CallCount(Verb::kUpdate) == 2);  // the stale one (409) and the one after the re-read
  auto now = *api.Peek(gvr::kConfigMaps, "ml", "train-state");
  CHECK(now["data"]["state.json"] == "{\"v\":3}");
  CHECK(now["data"]["note"] == "x");

  // Transient errors are retried within the call.
  api.FailNext(2, ErrorCode::kUnavailable, Verb::kUpdate);
  REQUIRE(store.Save("{\"v\":4}").ok());
  api.FailNext(2, ErrorCode::kUnavailable, Verb::kGet);
  ConfigMapStateStore fresh(api, {.ns = "ml", .name = "train-state", .job = "train", .retry_delay = 1ms});
  auto loaded = fresh.Load();
  REQUIRE(loaded.ok());
  CHECK(loaded->value() == "{\"v\":4}");
  // An API server that stays down: an error naming the ConfigMap.
  api.FailNext(100, ErrorCode::kUnavailable, Verb::kUpdate, "connection refused");
  Status s = store.Save("{\"v\":5}");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == "saving the state in configmap ml/train-state: connection refused (update configmaps)");
  api.ClearFaults();
  // Deleted behind its back: created again.
  REQUIRE(api.Delete(gvr::kConfigMaps, "ml", "train-state").ok());
  REQUIRE(store.Save("{\"v\":6}").ok());
  CHECK((*api.Peek(gvr::kConfigMaps, "ml", "train-state"))["data"]["state.json"] == "{\"v\":6}");
}

TEST_CASE("coordinator in Kubernetes mode: spare pods from the start, a dead member's pod deleted, state kept",
          "[migration][kube]") {
  FakeKubeApi api;
  migration::JobConfig config;
  config.job = "train";
  config.world_size = 2;
  config.spares = 2;
  config.can_launch_spares = true;
  config.spares_from_start = true;
  KubeSpareLauncher launcher(api, Options());
  KubePodFencer fencer(api, {.ns = "ml", .backoff = kFast});
  KubePodProbe probe(api, "ml");
  ConfigMapStateStore store(api, {.ns = "ml", .name = "train-state", .job = "train", .retry_delay = 1ms});
  LocalHosts local;
  CoordinatorPorts ports;
  ports.fencer = &fencer;
  ports.launcher = &launcher;
  ports.probe = &probe;
  ports.store = &store;
  ports.local = &local;
  Coordinator coord(*migration::NewJob(config), false, ports);
  coord.Begin();
  coord.Tick();
  launcher.RunOnce();
  auto spares = api.Objects(gvr::kPods);
  REQUIRE(spares.size() == 2);
  CHECK(kube::Name(spares[0]) == "train-spare-0-abcde");
  coord.Tick();
  launcher.RunOnce();
  CHECK(api.Objects(gvr::kPods).size() == 2);  // kept at 2, not more

  std::map<int, std::string> uids;
  for (int rank = 0; rank < 2; ++rank) {
    std::string pod = "train-node-0-" + std::to_string(rank);
    uids[rank] = MakePod(api, Pod(pod, "Running", "10.0.0." + std::to_string(rank + 1)));
    migration::Registered r;
    r.member = "m" + std::to_string(rank);
    r.role = migration::Role::kRank;
    r.rank = rank;
    r.host = "10.0.0." + std::to_string(rank + 1);
    r.store_port = 4000;
    r.pid = 1;
    r.pod_name = pod;
    r.pod_uid = uids[rank];
    REQUIRE(coord.Apply(r).status.ok());
  }
  REQUIRE(coord.Snapshot().generation() == 0);
  // Rank 1's container dies: the probe says so, the member is dead and its pod deleted.
  Json term = Pod("x")["status"];
  term["containerStatuses"][0]["state"] = {{"terminated", {{"exitCode", 1}}}};
  REQUIRE(api.MergePatch(gvr::kPods, "ml", "train-node-0-1", Json{{"status", term}}, "status").ok());
  coord.Tick();  // asks the probe about m0 and m1 (first sight)
  probe.RunOnce();
  coord.Tick();
  auto m1 = *coord.Snapshot().Find("m1");
  CHECK(m1.status == migration::MemberStatus::kDead);
  CHECK(m1.gone_reason == "container c of pod train-node-0-1 terminated (exit code 1)");
  CHECK(m1.fenced);
  CHECK(coord.Snapshot().Find("m0")->status == migration::MemberStatus::kAlive);
  fencer.RunOnce();
  CHECK_FALSE(api.Peek(gvr::kPods, "ml", "train-node-0-1").has_value());
  CHECK(api.Peek(gvr::kPods, "ml", "train-node-0-0").has_value());
  REQUIRE(api.Deletes().size() == 1);
  CHECK(api.Deletes()[0].uid_precondition == uids[1]);
  CHECK(api.Deletes()[0].grace_period_seconds == std::optional<int64_t>(0));
  auto saved = store.Load();
  REQUIRE(saved.ok());
  REQUIRE(saved->has_value());
  auto state = migration::StateFromString(**saved);
  REQUIRE(state.ok());
  CHECK(state->Find("m1")->pod_name == "train-node-0-1");
  CHECK(state->Find("m1")->pod_uid == uids[1]);
  CHECK(state->Find("m1")->status == migration::MemberStatus::kDead);
}

TEST_CASE("coordinator with --keep-restarted-pods: a rank's container restarted in place is not fenced, the "
          "process it runs next joins as a spare",
          "[migration][kube]") {
  // Kubeflow: the Job's pod restarts a dead container in place (restartPolicy OnFailure);
  // deleting the pod would spend one of the Job's backoffLimit failures and bring a pod
  // back at the index ~10 s later anyway.
  FakeKubeApi api;
  migration::JobConfig config;
  config.job = "tj";
  config.world_size = 2;
  config.spares = 1;
  config.can_launch_spares = true;
  config.spares_from_start = true;
  KubePodFencer fencer(api, {.ns = "ml", .backoff = kFast});
  KubePodProbe probe(api, "ml");
  LocalHosts local;
  CoordinatorPorts ports;
  ports.fencer = &fencer;
  ports.probe = &probe;
  ports.local = &local;
  CoordinatorOptions options;
  options.keep_restarted_pods = true;
  Coordinator coord(*migration::NewJob(config), false, ports, options);
  coord.Begin();
  auto reg = [&](const std::string& member, migration::Role role, int rank, const std::string& pod,
                 const std::string& uid) { return RegisterInPod(coord, member, role, rank, pod, uid); };
  std::map<std::string, std::string> uids;
  for (const char* pod : {"tj-node-0-0-aaaaa", "tj-node-0-1-bbbbb", "tj-spare-0-ccccc"}) {
    uids[pod] = MakePod(api, Pod(pod, "Running", "10.0.0.9"));
  }
  REQUIRE(reg("s0", migration::Role::kSpare, -1, "tj-spare-0-ccccc", uids["tj-spare-0-ccccc"]).status.ok());
  REQUIRE(reg("m0", migration::Role::kRank, 0, "tj-node-0-0-aaaaa", uids["tj-node-0-0-aaaaa"]).status.ok());
  REQUIRE(reg("m1", migration::Role::kRank, 1, "tj-node-0-1-bbbbb", uids["tj-node-0-1-bbbbb"]).status.ok());
  REQUIRE(coord.Snapshot().generation() == 0);
  coord.Tick();  // the probe's first sight of every member's pod
  probe.RunOnce();
  coord.Tick();
  // Rank 1's process is SIGKILLed: the kubelet restarts its container in the same pod.
  Json restarted = Pod("x")["status"];
  restarted["containerStatuses"][0]["restartCount"] = 1;
  REQUIRE(api.MergePatch(gvr::kPods, "ml", "tj-node-0-1-bbbbb", Json{{"status", restarted}}, "status").ok());
  probe.RunOnce();
  coord.Tick();
  auto m1 = *coord.Snapshot().Find("m1");
  CHECK(m1.status == migration::MemberStatus::kDead);
  CHECK(m1.gone_reason == "container c of pod tj-node-0-1-bbbbb restarted (restart count 1)");
  CHECK_FALSE(m1.fenced);
  fencer.RunOnce();
  CHECK(api.Deletes().empty());  // the Job's pod is left to run the next process
  CHECK(api.Peek(gvr::kPods, "ml", "tj-node-0-1-bbbbb").has_value());
  // The spare takes rank 1 (the survivor has nothing to report: generation 0 never trained).
  auto st = coord.Snapshot();
  REQUIRE(st.generation() == 1);
  CHECK(st.current()->members == std::vector<std::string>{"m0", "s0"});
  // The restarted container's process asks for rank 1 from the same pod: a spare.
  REQUIRE(reg("m1-again", migration::Role::kRank, 1, "tj-node-0-1-bbbbb", uids["tj-node-0-1-bbbbb"]).status.ok());
  CHECK(coord.Snapshot().Find("m1-again")->role == migration::Role::kSpare);
  CHECK(coord.Snapshot().RankOf("m1-again") == -1);
}

// e2e.kubeflow-migration (PyTorchJob): rank 2's process SIGKILLed, its peers' gloo
// errors reached the coordinator first, and 2 s later, before the kubelet had reported
// the killed container, rank 2 was "heartbeating but no report": hung, fenced at once by
// deleting its pod. The training-operator recreated it (a new pod, not the same one
// restarted in place). With --keep-restarted-pods that fence waits for the pod probe.
TEST_CASE("coordinator with --keep-restarted-pods: a rank taken for hung is fenced only if its container has not "
          "restarted within the restart grace",
          "[migration][kube]") {
  const bool restarts = GENERATE(true, false);
  CAPTURE(restarts);
  FakeKubeApi api;
  FakeClock clock;
  migration::JobConfig config;
  config.job = "pj";
  config.world_size = 2;
  // Only rank 1's fence is under test: nobody else times out meanwhile.
  config.heartbeat_timeout_s = 100;
  config.join_timeout_s = 100;
  config.spares = 1;
  config.can_launch_spares = true;
  config.spares_from_start = true;
  KubePodFencer fencer(api, {.ns = "ml", .backoff = kFast});
  KubePodProbe probe(api, "ml");
  LocalHosts local;
  CoordinatorPorts ports;
  ports.clock = &clock;
  ports.fencer = &fencer;
  ports.probe = &probe;
  ports.local = &local;
  CoordinatorOptions options;
  options.keep_restarted_pods = true;
  options.restart_grace = 10s;
  Coordinator coord(*migration::NewJob(config), false, ports, options);
  coord.Begin();
  auto reg = [&](const std::string& member, migration::Role role, int rank, const std::string& pod,
                 const std::string& uid) { return RegisterInPod(coord, member, role, rank, pod, uid); };
  std::map<std::string, std::string> uids;
  for (const char* pod : {"pj-worker-0", "pj-worker-1", "pj-spare-0-ccccc"}) {
    uids[pod] = MakePod(api, Pod(pod, "Running", "10.0.0.9"));
  }
  REQUIRE(reg("s0", migration::Role::kSpare, -1, "pj-spare-0-ccccc", uids["pj-spare-0-ccccc"]).status.ok());
  REQUIRE(reg("m0", migration::Role::kRank, 0, "pj-worker-0", uids["pj-worker-0"]).status.ok());
  REQUIRE(reg("m1", migration::Role::kRank, 1, "pj-worker-1", uids["pj-worker-1"]).status.ok());
  REQUIRE(coord.Snapshot().generation() == 0);
  auto beat = [&](const std::string& id) {
    REQUIRE(coord.Apply(migration::Heartbeat{id, 0, 40, "training"}).status.ok());
  };
  beat("m0");
  beat("m1");
  beat("s0");
  coord.Tick();  // the probe's first sight of every member's pod (restart count 0)
  probe.RunOnce();
  coord.Tick();
  // Rank 1's process is killed; rank 0's collective fails and it reports, the kubelet has
  // not reported the dead container yet.
  REQUIRE(coord.Apply(migration::Report{"m0", 0, 40, "error", "Connection closed by peer"}).status.ok());
  clock.Advance(2500ms);
  beat("m0");
  beat("s0");
  coord.Tick();
  auto st = coord.Snapshot();
  REQUIRE(st.Find("m1")->status == migration::MemberStatus::kDead);
  CHECK(st.Find("m1")->gone_cause == "hung");
  REQUIRE(st.generation() == 1);  // the spare took rank 1 without waiting for the fence
  CHECK(st.current()->members == std::vector<std::string>{"m0", "s0"});
  fencer.RunOnce();
  CHECK(api.Deletes().empty());  // not yet: the probe may still see the container restart
  // Recorded as pending, not as done (what a restarted coordinator reads).
  CHECK_FALSE(coord.Snapshot().Find("m1")->fenced);
  CHECK(coord.Snapshot().Find("m1")->fence_due == Approx(st.Find("m1")->gone_at + 10));
  if (restarts) {
    // The kubelet reports it 3 s late: restarted in place; the pod stays, never fenced.
    clock.Advance(3s);
    Json restarted = Pod("x")["status"];
    restarted["containerStatuses"][0]["restartCount"] = 1;
    REQUIRE(api.MergePatch(gvr::kPods, "ml", "pj-worker-1", Json{{"status", restarted}}, "status").ok());
    probe.RunOnce();
    coord.Tick();
    clock.Advance(20s);
    coord.Tick();
    fencer.RunOnce();
    CHECK(api.Deletes().empty());
    CHECK(api.Peek(gvr::kPods, "ml", "pj-worker-1").has_value());
    // Skipped: nothing was fenced, and the state says so.
    const auto m1 = *coord.Snapshot().Find("m1");
    CHECK_FALSE(m1.fenced);
    CHECK(m1.fence_due == 0);
    CHECK(m1.fence_result == "skipped: container c of pod pj-worker-1 restarted (restart count 1): the pod stays");
    // The next process in that pod asks for rank 1: a spare.
    REQUIRE(reg("m1-again", migration::Role::kRank, 1, "pj-worker-1", uids["pj-worker-1"]).status.ok());
    CHECK(coord.Snapshot().Find("m1-again")->role == migration::Role::kSpare);
  } else {
    // Really hung (its container runs on): fenced once the grace is over, not before.
    clock.Advance(9s);
    probe.RunOnce();
    coord.Tick();
    fencer.RunOnce();
    CHECK(api.Deletes().empty());
    clock.Advance(2s);
    probe.RunOnce();
    coord.Tick();
    fencer.RunOnce();
    REQUIRE(api.Deletes().size() == 1);
    CHECK(api.Deletes()[0].name == "pj-worker-1");
    CHECK(api.Deletes()[0].uid_precondition == uids["pj-worker-1"]);
    CHECK_FALSE(api.Peek(gvr::kPods, "ml", "pj-worker-1").has_value());
    const auto m1 = *coord.Snapshot().Find("m1");
    CHECK(m1.fenced);
    CHECK(m1.fence_due == 0);
    CHECK(m1.fence_result ==
          "done: heartbeating but no report for generation 0 within 2.500 s; still running after the restart grace");
  }
}

// A fence deferred by the restart grace is in the state file: a coordinator restarted
// before it was due (its pod deleted, a crash, a new leader) still fences a hung rank's
// pod when the grace it had left is over, and still spares a pod whose container
// restarted meanwhile (seen here only as the next process registering from the pod: the
// new probe's first look already finds the raised restart count).
TEST_CASE("coordinator with --keep-restarted-pods: a deferred fence survives a coordinator restart",
          "[migration][kube]") {
  const bool restarts = GENERATE(false, true);
  CAPTURE(restarts);
  FakeKubeApi api;
  FakeClock clock;
  migration::JobConfig config;
  config.job = "pj";
  config.world_size = 2;
  config.heartbeat_timeout_s = 100;
  config.join_timeout_s = 100;
  config.spares = 1;
  config.can_launch_spares = true;
  config.spares_from_start = true;
  KubePodFencer fencer(api, {.ns = "ml", .backoff = kFast});
  ConfigMapStateStore store(api, {.ns = "ml", .name = "pj-state", .job = "pj", .retry_delay = 1ms});
  LocalHosts local;
  CoordinatorOptions options;
  options.keep_restarted_pods = true;
  options.restart_grace = 10s;
  std::map<std::string, std::string> uids;
  for (const char* pod : {"pj-worker-0", "pj-worker-1", "pj-spare-0-ccccc"}) {
    uids[pod] = MakePod(api, Pod(pod, "Running", "10.0.0.9"));
  }
  {
    KubePodProbe probe(api, "ml");
    CoordinatorPorts ports;
    ports.clock = &clock;
    ports.fencer = &fencer;
    ports.probe = &probe;
    ports.store = &store;
    ports.local = &local;
    Coordinator coord(*migration::NewJob(config), false, ports, options);
    coord.Begin();
    REQUIRE(RegisterInPod(coord, "s0", migration::Role::kSpare, -1, "pj-spare-0-ccccc", uids["pj-spare-0-ccccc"])
                .status.ok());
    REQUIRE(RegisterInPod(coord, "m0", migration::Role::kRank, 0, "pj-worker-0", uids["pj-worker-0"]).status.ok());
    REQUIRE(RegisterInPod(coord, "m1", migration::Role::kRank, 1, "pj-worker-1", uids["pj-worker-1"]).status.ok());
    for (const char* id : {"m0", "m1", "s0"}) {
      REQUIRE(coord.Apply(migration::Heartbeat{id, 0, 40, "training"}).status.ok());
    }
    coord.Tick();
    probe.RunOnce();
    coord.Tick();
    // Rank 1 hangs: its peer reports, it does not; 2.5 s later it is hung, its fence deferred.
    REQUIRE(coord.Apply(migration::Report{"m0", 0, 40, "error", "Connection closed by peer"}).status.ok());
    clock.Advance(2500ms);
    REQUIRE(coord.Apply(migration::Heartbeat{"m0", 0, 40, "training"}).status.ok());
    REQUIRE(coord.Apply(migration::Heartbeat{"s0", 0, 40, "waiting"}).status.ok());
    coord.Tick();
    REQUIRE(coord.Snapshot().Find("m1")->gone_cause == "hung");
    REQUIRE(coord.Snapshot().generation() == 1);
    clock.Advance(4s);  // 4 s of the 10 s grace pass, then the coordinator goes down
    coord.Tick();
    coord.Stop();
  }
  fencer.RunOnce();
  CHECK(api.Deletes().empty());
  auto saved = store.Load();
  REQUIRE(saved.ok());
  REQUIRE(saved->has_value());
  auto state = migration::StateFromString(**saved);
  REQUIRE(state.ok());
  const migration::Member& m1 = *state->Find("m1");
  CHECK_FALSE(m1.fenced);
  CHECK(m1.fence_due == Approx(m1.gone_at + 10));
  CHECK(m1.fence_result == "deferred by the restart grace");

  if (restarts) {
    // The container restarted while the coordinator was down.
    Json restarted = Pod("x")["status"];
    restarted["containerStatuses"][0]["restartCount"] = 1;
    REQUIRE(api.MergePatch(gvr::kPods, "ml", "pj-worker-1", Json{{"status", restarted}}, "status").ok());
  }
  clock.Advance(1s);
  KubePodProbe probe(api, "ml");
  CoordinatorPorts ports;
  ports.clock = &clock;
  ports.fencer = &fencer;
  ports.probe = &probe;
  ports.store = &store;
  ports.local = &local;
  Coordinator coord(*state, true, ports, options);
  coord.Begin();
  coord.Tick();
  probe.RunOnce();  // the new probe's first look: restart count 1 (or 0), running
  coord.Tick();
  fencer.RunOnce();
  CHECK(api.Deletes().empty());
  if (restarts) {
    // Its next process registers from the pod (and joins as a spare): the fence is skipped.
    REQUIRE(RegisterInPod(coord, "m1-again", migration::Role::kRank, 1, "pj-worker-1", uids["pj-worker-1"])
                .status.ok());
    coord.Tick();
    clock.Advance(20s);
    coord.Tick();
    fencer.RunOnce();
    CHECK(api.Deletes().empty());
    CHECK(api.Peek(gvr::kPods, "ml", "pj-worker-1").has_value());
    const auto m = *coord.Snapshot().Find("m1");
    CHECK_FALSE(m.fenced);
    CHECK(m.fence_due == 0);
    CHECK(m.fence_result == "skipped: member m1-again registered from the pod: the pod stays");
  } else {
    // 5 s of the grace were left: not fenced after 4 s, fenced after 6.
    clock.Advance(4s);
    probe.RunOnce();
    coord.Tick();
    fencer.RunOnce();
    CHECK(api.Deletes().empty());
    clock.Advance(2s);
    probe.RunOnce();
    coord.Tick();
    fencer.RunOnce();
    REQUIRE(api.Deletes().size() == 1);
    CHECK(api.Deletes()[0].name == "pj-worker-1");
    CHECK(api.Deletes()[0].uid_precondition == uids["pj-worker-1"]);
    const auto m = *coord.Snapshot().Find("m1");
    CHECK(m.fenced);
    CHECK(m.fence_due == 0);
    CHECK(m.fence_result ==
          "done: heartbeating but no report for generation 0 within 2.500 s; still running after the restart grace");
  }
  // Saved as settled: a second restart does not fence again.
  auto again = migration::StateFromString(**store.Load());
  REQUIRE(again.ok());
  CHECK(again->Find("m1")->fence_due == 0);
}

// e2e.train-pods-faults (a kubelet stopped): the API server answered nothing for
// ~30 s, and the coordinator, saving its state ConfigMap under its lock, served no
// heartbeat meanwhile and took every member for dead. The saver thread writes the
// ConfigMap now: a hanging update holds up no heartbeat and no tick.
TEST_CASE("coordinator: heartbeats and ticks are served while the state ConfigMap's update hangs",
          "[migration][kube]") {
  FakeKubeApi api;
  std::mutex hang_mu;
  std::condition_variable hang_cv;
  bool hang = false, hanging = false;
  // Consulted under the fake's lock: only the store uses this fake here.
  api.SetFaultHook([&](const FakeKubeApi::Call& c) -> std::optional<Error> {
    if (c.resource != "configmaps" || c.verb != Verb::kUpdate) return std::nullopt;
    std::unique_lock l(hang_mu);
    if (!hang) return std::nullopt;
    hanging = true;
    hang_cv.notify_all();
    // A client timeout of 3 s: long enough to show, short enough for a test that fails.
    bool released = hang_cv.wait_for(l, 3s, [&] { return !hang; });
    hanging = false;
    hang_cv.notify_all();
    if (released) return std::nullopt;
    return Error{ErrorCode::kUnavailable, "Operation timed out after 3000 milliseconds"};
  });
  ConfigMapStateStore store(api, {.ns = "ml", .name = "train-state", .job = "train", .retry_delay = 1ms});
  FakeClock clock;
  migration::JobConfig config;
  config.job = "train";
  config.world_size = 2;
  config.heartbeat_timeout_s = 1.5;
  CoordinatorPorts ports;
  ports.clock = &clock;
  ports.store = &store;
  Coordinator coord(*migration::NewJob(config), false, ports);
  coord.Begin();  // creates the ConfigMap
  coord.StartSaver();
  auto reg = [](const std::string& id, migration::Role role, int rank) {
    migration::Registered r;
    r.member = id;
    r.role = role;
    r.rank = rank;
    r.host = "10.0.0.1";
    r.store_port = 4000;
    r.pid = 1;
    return r;
  };
  auto beat = [&](const std::string& id, int64_t step) {
    return coord.Apply(migration::Heartbeat{id, 0, step, "training"});
  };
  REQUIRE(coord.Apply(reg("m0", migration::Role::kRank, 0)).status.ok());
  REQUIRE(coord.Apply(reg("m1", migration::Role::kRank, 1)).status.ok());
  beat("m0", 1);
  beat("m1", 1);
  REQUIRE(coord.Snapshot().current()->status == "complete");
  REQUIRE(coord.WaitSaved(10s));

  {
    std::lock_guard l(hang_mu);
    hang = true;
  }
  // A spare registers: a durable change, its save hangs in the ConfigMap's update.
  auto spare = std::async(std::launch::async, [&] { return coord.Apply(reg("s0", migration::Role::kSpare, -1)); });
  {
    std::unique_lock l(hang_mu);
    REQUIRE(hang_cv.wait_for(l, 10s, [&] { return hanging; }));
  }
  CHECK(spare.wait_for(1s) == std::future_status::ready);  // answered before the save ended
  // Four heartbeat timeouts pass while the update hangs: every heartbeat and tick is
  // served at once, nobody is taken for dead.
  double slowest = 0;
  for (int i = 0; i < 4; ++i) {
    clock.Advance(std::chrono::milliseconds(1000));
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(beat("m0", 2 + i).status.ok());
    CHECK(beat("m1", 2 + i).status.ok());
    coord.Apply(migration::PlanPolled{"s0"});
    coord.Tick();
    slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  CHECK(slowest < 1.0);
  {
    std::lock_guard l(hang_mu);
    CHECK(hanging);  // all of it happened while the update hung
    hang = false;
  }
  hang_cv.notify_all();
  auto st = coord.Snapshot();
  for (const char* id : {"m0", "m1", "s0"}) CHECK(st.Alive(id));
  CHECK(st.phase == migration::Phase::kRunning);
  // The update went through once released: the ConfigMap holds the spare.
  REQUIRE(coord.WaitSaved(10s));
  coord.Stop();
  auto saved = store.Load();
  REQUIRE(saved.ok());
  REQUIRE(saved->has_value());
  auto loaded = migration::StateFromString(**saved);
  REQUIRE(loaded.ok());
  CHECK(loaded->members.count("s0") == 1);
  spare.get();
}

}  // namespace
}  // namespace lockstep::coordinator
