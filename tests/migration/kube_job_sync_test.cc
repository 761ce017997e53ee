// KubeJobSync (kube_job_sync.h) on the FakeKubeApi with a real Coordinator:
// pod annotations become migrations once, the spare that took a rank is
// labelled with it, the old pod retired and deleted once it left, the
// TrainingJob's status patched (with backoff on errors) and an Event recorded.
// Also the ConfigMap contract with the operator (it creates the state
// ConfigMap empty). Worker threads are not started: each test calls RunOnce().
#include <catch2/catch.hpp>

#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/coordinator/coordinator.h"
#include "lockstep/coordinator/kube_adapters.h"
#include "lockstep/coordinator/kube_job_sync.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/migration/api.h"

namespace lockstep::coordinator {
namespace {

using kube::FakeKubeApi;
using kube::Json;
using kube::Verb;
namespace gvr = kube::gvr;
namespace m = lockstep::migration;
using namespace std::chrono_literals;

const kube::BackoffPolicy kFast{std::chrono::milliseconds(1), std::chrono::milliseconds(4), 2.0, 0.0};

TEST_CASE("configmap state store: the operator's empty ConfigMap is nothing saved yet, Save updates it",
          "[migration][kube]") {
  FakeKubeApi api;
  // What the TrainingJob controller applies: metadata only, owned by the job.
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata",
              {{"name", "train-coordinator-state"},
               {"namespace", "ml"},
               {"labels", {{"lockstep.dev/job", "train"}}},
               {"ownerReferences", Json::array({{{"apiVersion", "lockstep.dev/v1alpha1"},
                                                 {"kind", "TrainingJob"},
                                                 {"name", "train"},
                                                 {"uid", "tj-uid"},
                                                 {"controller", true}}})}}}};
  REQUIRE(api.Create(gvr::kConfigMaps, "ml", cm).ok());
  ConfigMapStoreOptions o{.ns = "ml", .name = "train-coordinator-state", .job = "train", .retry_delay = 1ms};

  SECTION("Load first") {
    ConfigMapStateStore store(api, o);
    auto loaded = store.Load();
    REQUIRE(loaded.ok());
    CHECK_FALSE(loaded->has_value());
    REQUIRE(store.Save("{\"v\":1}").ok());
  }
  SECTION("Save without a Load") {
    ConfigMapStateStore store(api, o);
    REQUIRE(store.Save("{\"v\":1}").ok());
  }
  CHECK(api.CallCount(Verb::kCreate) == 1);  // the operator's only
  CHECK(api.CallCount(Verb::kUpdate) == 1);
  auto now = *api.Peek(gvr::kConfigMaps, "ml", "train-coordinator-state");
  CHECK(now["data"]["state.json"] == "{\"v\":1}");
  CHECK(now["metadata"]["ownerReferences"][0]["uid"] == "tj-uid");  // still goes with the job
  ConfigMapStateStore fresh(api, o);
  CHECK(fresh.Load()->value() == "{\"v\":1}");
}

TEST_CASE("configmap state store: created by someone else meanwhile (AlreadyExists) is read and updated",
          "[migration][kube]") {
  FakeKubeApi api;
  ConfigMapStateStore store(api, {.ns = "ml", .name = "train-coordinator-state", .job = "train", .retry_delay = 1ms});
  api.FailNext(1, ErrorCode::kAlreadyExists, Verb::kCreate, "configmaps \"train-coordinator-state\" already exists");
  REQUIRE(store.Save("{\"v\":1}").ok());
  CHECK((*api.Peek(gvr::kConfigMaps, "ml", "train-coordinator-state"))["data"]["state.json"] == "{\"v\":1}");
}

// A job "train" in namespace ml: TrainingJob, rank pods train-rank-<i>
// (operator's labels), spare pods train-spare-<i>; members m<i> and s<i>
// registered with their pods; generation 0 complete.
struct Job {
  FakeClock clock;
  FakeKubeApi api{clock};
  metrics::Registry registry;
  KubePodFencer fencer{api, {.ns = "ml", .backoff = {1ms, 2ms, 2.0, 0.0}}};  // RunOnce() deletes
  std::unique_ptr<Coordinator> coord;
  kube::EventRecorder events{api, clock, {.component = "lockstep-coordinator"}};
  std::unique_ptr<KubeJobSync> sync;
  std::map<std::string, std::string> uids;  // pod -> uid
  int world;
  int64_t step = 0;

  Job(int world_size, int spares) : world(world_size) {
    Json tj = {{"apiVersion", "lockstep.dev/v1alpha1"},
               {"kind", "TrainingJob"},
               {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
               {"spec", {{"replicas", world}}}};
    REQUIRE(api.Create(gvr::kTrainingJobs, "ml", tj).ok());
    m::JobConfig config;
    config.job = "train";
    config.world_size = world;
    config.spares = spares;
    CoordinatorPorts ports;
    ports.clock = &clock;
    ports.fencer = &fencer;
    coord = std::make_unique<Coordinator>(*m::NewJob(config), false, ports);
    coord->Begin();
    for (int r = 0; r < world; ++r) AddPod("train-rank-" + std::to_string(r), "rank", r);
    for (int i = 0; i < spares; ++i) AddPod("train-spare-" + std::to_string(i), "spare", -1);
    for (int r = 0; r < world; ++r)
      Register("m" + std::to_string(r), m::Role::kRank, r, "train-rank-" + std::to_string(r));
    for (int i = 0; i < spares; ++i)
      Register("s" + std::to_string(i), m::Role::kSpare, -1, "train-spare-" + std::to_string(i));
    BeatAll();
    REQUIRE(coord->Snapshot().current()->status == "complete");
    sync = std::make_unique<KubeJobSync>(api, *coord, clock,
                                         KubeJobSyncOptions{.job = "train",
                                                            .ns = "ml",
                                                            .training_job = "train",
                                                            .poll_interval = 10ms,
                                                            .leave_grace_s = 30,
                                                            .backoff = {1s, 8s, 2.0, 0.0}},
                                         &registry, &events);
  }

  void AddPod(const std::string& name, const std::string& role, int rank) {
    Json labels = {{"lockstep.dev/job", "train"}, {"lockstep.dev/role", role}};
    if (rank >= 0) labels["lockstep.dev/rank"] = std::to_string(rank);
    Json pod = {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", labels}}},
                {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "i"}}})}}}};
    auto made = api.Create(gvr::kPods, "ml", pod);
    REQUIRE(made.ok());
    uids[name] = kube::Uid(*made);
    SetPhase(name, "Running");
  }
  void SetPhase(const std::string& pod, const std::string& phase) {
    REQUIRE(api.MergePatch(gvr::kPods, "ml", pod, Json{{"status", {{"phase", phase}}}}, "status").ok());
  }
  void Annotate(const std::string& pod, const Json& value) {
    REQUIRE(
        api.MergePatch(gvr::kPods, "ml", pod, Json{{"metadata", {{"annotations", {{"lockstep.dev/migrate", value}}}}}})
            .ok());
  }
  void Register(const std::string& id, m::Role role, int rank, const std::string& pod) {
    m::Registered r;
    r.member = id;
    r.role = role;
    r.rank = rank;
    r.host = "10.0.0." + std::to_string(uids.size() + coord->Snapshot().members.size());
    r.store_port = 29500;
    r.pod_name = pod;
    r.pod_uid = uids[pod];
    r.pid = 7;  // the library's pid in its container
    REQUIRE(coord->Apply(r).status.ok());
  }
  // Every rank of the current generation heartbeats the next step; time passes.
  void BeatAll() {
    auto s = coord->Snapshot();
    for (const auto& id : s.current()->members) {
      if (s.Alive(id)) REQUIRE(coord->Apply(m::Heartbeat{id, s.generation(), step, "training"}).status.ok());
    }
    for (const auto& [id, mem] : s.members) {
      if (mem.status == m::MemberStatus::kAlive && s.RankOf(id) < 0) coord->Apply(m::Heartbeat{id, -1, 0, "waiting"});
    }
  }
  // The ranks pause as the pending migration asks; the next generation is decided.
  void PauseForMigration() {
    auto s = coord->Snapshot();
    REQUIRE(s.phase == m::Phase::kPausing);
    const int64_t at = s.transition.pause_at_step;
    for (const auto& id : s.current()->members) {
      REQUIRE(coord->Apply(m::Report{id, s.generation(), at, "pause", "", true}).status.ok());
    }
    REQUIRE(coord->Snapshot().generation() == s.generation() + 1);
    step = coord->Snapshot().current()->resume_step;
  }
  Json PodObj(const std::string& name) { return *api.Peek(gvr::kPods, "ml", name); }
  Json Status() { return (*api.Peek(gvr::kTrainingJobs, "ml", "train"))["status"]; }
};

// Calls of `verb` on `resource` so far.
uint64_t CallsOn(const FakeKubeApi& api, const std::string& resource, Verb verb) {
  uint64_t n = 0;
  for (const auto& c : api.Calls()) n += c.resource == resource && c.verb == verb;
  return n;
}

std::string Label(const Json& pod, const std::string& key) {
  return kube::GetString(pod, {"metadata", "labels", key}, "<none>");
}

TEST_CASE("kube sync: lockstep.dev/migrate=now asks for a planned migration once, as POST /v1/migrations would",
          "[migration][kube]") {
  Job job(3, 1);
  job.sync->RunOnce();
  CHECK(job.coord->Snapshot().migrations.empty());
  job.Annotate("train-rank-1", "now");
  job.sync->RunOnce();
  auto s = job.coord->Snapshot();
  REQUIRE(s.migrations.size() == 1);
  CHECK(s.migrations[0].rank == 1);
  CHECK(s.migrations[0].kind == "planned");
  CHECK(s.migrations[0].reason == "pod train-rank-1 annotated lockstep.dev/migrate=now");
  auto listed = m::MigrationsReply(s);  // what GET /v1/migrations answers
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["kind"] == "planned");
  CHECK(listed[0]["rank"] == 1);
  CHECK(job.sync->Requested() == 1);
  // Polled again and again: not asked again (the migration is in flight; it would be a 409).
  for (int i = 0; i < 3; ++i) job.sync->RunOnce();
  CHECK(job.sync->Requested() == 1);
  CHECK(job.coord->Snapshot().migrations.size() == 1);
  CHECK(job.registry.Render().find("lockstep_migration_trigger_requests_total{value=\"now\",result=\"accepted\"} 1") !=
        std::string::npos);

  // An unknown value: reported once, counted, not acted on.
  job.Annotate("train-rank-2", "soon");
  job.sync->RunOnce();
  job.sync->RunOnce();
  CHECK(job.sync->Unknown() == 1);
  CHECK(job.coord->Snapshot().migrations.size() == 1);
  CHECK(job.registry.Render().find("lockstep_migration_trigger_unknown_total 1") != std::string::npos);
}

TEST_CASE("kube sync: lockstep.dev/migrate=node-not-ready takes the member for dead and deletes its pod",
          "[migration][kube]") {
  Job job(3, 2);
  job.sync->RunOnce();
  job.Annotate("train-rank-1", "node-not-ready");
  job.Annotate("train-spare-1", "node-not-ready");
  job.sync->RunOnce();
  auto s = job.coord->Snapshot();
  CHECK(s.members.at("m1").status == m::MemberStatus::kDead);
  CHECK(s.members.at("m1").gone_cause == "node_not_ready");
  CHECK(s.members.at("m1").gone_reason == "pod train-rank-1: its node is NotReady");
  CHECK(s.members.at("s1").status == m::MemberStatus::kDead);
  CHECK(s.migrations.empty());  // unplanned: a failure re-form, no migration object
  CHECK(job.sync->Requested() == 2);
  // The fencer deletes both pods (uid precondition, grace 0).
  job.fencer.RunOnce();
  CHECK(!job.api.Peek(gvr::kPods, "ml", "train-rank-1"));
  CHECK(!job.api.Peek(gvr::kPods, "ml", "train-spare-1"));
  CHECK(job.api.Peek(gvr::kPods, "ml", "train-rank-0"));
  CHECK(job.registry.Render().find(
            "lockstep_migration_trigger_requests_total{value=\"node-not-ready\",result=\"accepted\"} 2") !=
        std::string::npos);
  // The survivors (their collectives aborted) report; the next generation takes the other spare.
  for (const char* id : {"m0", "m2"}) {
    REQUIRE(job.coord->Apply(m::Report{id, 0, job.step, "error", "aborted", true}).status.ok());
  }
  job.BeatAll();
  auto after = job.coord->Snapshot();
  CHECK(after.generation() == 1);
  CHECK(after.current()->members == std::vector<std::string>{"m0", "s0", "m2"});
  for (int i = 0; i < 3; ++i) job.sync->RunOnce();
  CHECK(job.sync->Requested() == 2);
}

TEST_CASE("kube sync: the spare that took a rank is labelled with it, the old pod retired, then deleted once it ended",
          "[migration][kube]") {
  Job job(3, 1);
  job.Annotate("train-rank-1", "drain");
  job.sync->RunOnce();
  job.PauseForMigration();  // s0 (train-spare-0) takes rank 1
  REQUIRE(job.coord->Snapshot().current()->members[1] == "s0");
  job.api.ClearCalls();
  job.sync->RunOnce();
  auto spare = job.PodObj("train-spare-0");
  CHECK(Label(spare, "lockstep.dev/role") == "rank");
  CHECK(Label(spare, "lockstep.dev/rank") == "1");
  auto old = job.PodObj("train-rank-1");
  CHECK(Label(old, "lockstep.dev/role") == "retired");
  CHECK(Label(old, "lockstep.dev/rank") == "<none>");
  // `kubectl get pods -l lockstep.dev/rank=1` finds the holder only.
  auto holders = job.api.List(gvr::kPods, "ml", {.label_selector = "lockstep.dev/rank=1"});
  REQUIRE(holders.ok());
  REQUIRE((*holders)["items"].size() == 1);
  CHECK(kube::Name((*holders)["items"][0]) == "train-spare-0");
  CHECK(CallsOn(job.api, "pods", Verb::kPatch) == 2);
  CHECK(job.api.Deletes().empty());  // the old pod is still running (told to exit)
  // Labels right: nothing patched again.
  job.api.ClearCalls();
  job.sync->RunOnce();
  CHECK(CallsOn(job.api, "pods", Verb::kPatch) == 0);
  // The old process exits: its pod is deleted (uid precondition), so a drain can finish.
  job.SetPhase("train-rank-1", "Succeeded");
  job.sync->RunOnce();
  REQUIRE(job.api.Deletes().size() == 1);
  CHECK(job.api.Deletes()[0].name == "train-rank-1");
  CHECK(job.api.Deletes()[0].uid_precondition == job.uids["train-rank-1"]);
  CHECK_FALSE(job.api.Peek(gvr::kPods, "ml", "train-rank-1").has_value());
  job.sync->RunOnce();
  CHECK(job.api.Deletes().size() == 1);
}

TEST_CASE("kube sync: a migrated-away pod that does not leave is deleted after the grace", "[migration][kube]") {
  Job job(2, 1);
  job.Annotate("train-rank-0", "now");
  job.sync->RunOnce();
  job.PauseForMigration();
  job.sync->RunOnce();
  CHECK(job.api.Deletes().empty());
  job.clock.Advance(29s);
  job.sync->RunOnce();
  CHECK(job.api.Deletes().empty());
  job.clock.Advance(1s);
  job.sync->RunOnce();
  REQUIRE(job.api.Deletes().size() == 1);
  CHECK(job.api.Deletes()[0].name == "train-rank-0");
}

TEST_CASE("kube sync: the TrainingJob's status gets generation, migrations and lastMigration, and an Event",
          "[migration][kube]") {
  Job job(3, 1);
  job.sync->RunOnce();
  Json st = job.Status();
  CHECK(st["generation"] == 0);
  CHECK(st["migrations"] == 0);
  CHECK_FALSE(st.contains("lastMigration"));
  CHECK(job.sync->StatusWrites() == 1);
  job.sync->RunOnce();
  CHECK(job.sync->StatusWrites() == 1);  // unchanged: not written again

  job.Annotate("train-rank-2", "early-warning");
  REQUIRE(job.api
              .MergePatch(gvr::kPods, "ml", "train-rank-2",
                          Json{{"metadata", {{"annotations", {{"lockstep.dev/migrate-reason", "GPU 0: Xid 48"}}}}}})
              .ok());
  job.sync->RunOnce();
  job.clock.Advance(1500ms);
  job.PauseForMigration();
  job.sync->RunOnce();
  st = job.Status();
  CHECK(st["generation"] == 1);
  CHECK(st["migrations"] == 0);  // not complete yet
  job.clock.Advance(500ms);
  job.BeatAll();
  REQUIRE(job.coord->Snapshot().current()->status == "complete");
  job.sync->RunOnce();
  st = job.Status();
  CHECK(st["generation"] == 1);
  CHECK(st["migrations"] == 1);
  const Json& last = st["lastMigration"];
  CHECK(last["rank"] == 2);
  CHECK(last["fromPod"] == "train-rank-2");
  CHECK(last["toPod"] == "train-spare-0");
  CHECK(last["reason"] == "GPU 0: Xid 48");
  CHECK(last["startTime"] == "2027-01-15T08:00:00Z");  // the FakeClock's start: the request
  CHECK(last["completeTime"] == "2027-01-15T08:00:02Z");
  CHECK(last["durationMs"] == 2000);
  // The status keys of the operator are left alone (merge patch).
  CHECK_FALSE(st.contains("phase"));
  auto events = job.api.Objects(gvr::kEvents);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["reason"] == "RankMigrated");
  CHECK(events[0]["involvedObject"]["kind"] == "TrainingJob");
  CHECK(events[0]["involvedObject"]["name"] == "train");
  CHECK(events[0]["message"] ==
        "rank 2 moved from pod train-rank-2 to pod train-spare-0 in 2000 ms (preemptive: GPU 0: Xid 48)");
  job.sync->RunOnce();
  CHECK(job.api.Objects(gvr::kEvents).size() == 1);  // once per migration
}

TEST_CASE("kube sync: status writes that fail are retried with backoff, never hot", "[migration][kube]") {
  Job job(2, 0);
  int failures = 3;
  job.api.SetFaultHook([&](const FakeKubeApi::Call& c) -> std::optional<Error> {
    if (c.resource == "trainingjobs" && c.verb == Verb::kPatch && failures > 0) {
      --failures;
      return Unavailable("etcdserver: request timed out");
    }
    return std::nullopt;
  });
  auto patches = [&] { return CallsOn(job.api, "trainingjobs", Verb::kPatch); };
  job.sync->RunOnce();
  CHECK(patches() == 1);
  job.sync->RunOnce();
  job.sync->RunOnce();
  CHECK(patches() == 1);  // waits 1 s
  job.clock.Advance(1s);
  job.sync->RunOnce();
  CHECK(patches() == 2);
  job.clock.Advance(1s);
  job.sync->RunOnce();
  CHECK(patches() == 2);  // then 2 s
  job.clock.Advance(1s);
  job.sync->RunOnce();
  CHECK(patches() == 3);
  job.clock.Advance(4s);
  job.sync->RunOnce();
  CHECK(patches() == 4);
  CHECK(job.sync->StatusWrites() == 1);
  CHECK(job.Status()["generation"] == 0);
  CHECK(job.registry.Render().find("lockstep_migration_status_write_failures_total 3") != std::string::npos);
  job.api.SetFaultHook(nullptr);
}

TEST_CASE("kube sync: a spare pod relabelled role=rank is still the launcher's, not reported deleted",
          "[migration][kube]") {
  FakeKubeApi api;
  Json tmpl = {{"apiVersion", "v1"},
               {"kind", "Pod"},
               {"metadata", {{"name", "t"}}},
               {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "i"}}})}}}};
  KubeSpareLauncher launcher(api, {.job = "train",
                                   .ns = "ml",
                                   .pod_template = tmpl,
                                   .coordinator_url = "http://c",
                                   .suffix = "abcde",
                                   .poll_interval = 0ms,
                                   .backoff = kFast});
  auto spare = launcher.Launch();
  REQUIRE(spare.ok());
  launcher.RunOnce(true);
  REQUIRE(api.Peek(gvr::kPods, "ml", spare->pod).has_value());
  REQUIRE(api.MergePatch(gvr::kPods, "ml", spare->pod, Json{{"status", {{"phase", "Running"}}}}, "status").ok());
  REQUIRE(api.MergePatch(gvr::kPods, "ml", spare->pod,
                         Json{{"metadata", {{"labels", {{"lockstep.dev/role", "rank"}, {"lockstep.dev/rank", "1"}}}}}})
              .ok());
  launcher.RunOnce(true);
  CHECK(launcher.Reap().empty());
  REQUIRE(api.Delete(gvr::kPods, "ml", spare->pod).ok());
  launcher.RunOnce(true);
  auto reaped = launcher.Reap();
  REQUIRE(reaped.size() == 1);
  CHECK(reaped[0].how == "pod deleted");
}

}  // namespace
}  // namespace lockstep::coordinator
