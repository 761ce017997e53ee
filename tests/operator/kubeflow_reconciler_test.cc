// The Kubeflow job controllers as BuildOperator() wires them
// (--kubeflow-trainjobs, --kubeflow-pytorchjobs), against the in-memory
// FakeKubeApi with synchronous reconciles: an annotated TrainJob gets its
// TrainingJob, which gets its coordinator; bad annotations are told as Events
// on the Kubeflow job; protection turned off deletes the TrainingJob.
#include <catch2/catch.hpp>

#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/api/training_job.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/operator_runtime.h"

namespace lockstep::op {
namespace {

using kube::FakeKubeApi;
namespace gvr = kube::gvr;

Json TrainJob(const Json& annotations) {
  return {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
          {"kind", "TrainJob"},
          {"metadata", {{"name", "llama"}, {"namespace", "ml"}, {"annotations", annotations}}},
          {"spec", {{"runtimeRef", {{"name", "torch-distributed"}}}, {"trainer", {{"numNodes", 2}}}}}};
}

Json JobSetFor(const Json& trainjob) {
  return {
      {"apiVersion", "jobset.x-k8s.io/v1alpha2"},
      {"kind", "JobSet"},
      {"metadata",
       {{"name", "llama"},
        {"namespace", "ml"},
        {"ownerReferences", Json::array({{{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
                                          {"kind", "TrainJob"},
                                          {"name", "llama"},
                                          {"uid", kube::Uid(trainjob)},
                                          {"controller", true}}})}}},
      {"spec",
       {{"replicatedJobs",
         Json::array(
             {{{"name", "node"},
               {"template",
                {{"spec",
                  {{"parallelism", 2},
                   {"template",
                    {{"spec", {{"containers", Json::array({{{"name", "node"}, {"image", "torch:1"}}})}}}}}}}}}}})}}}};
}

struct Fixture {
  FakeClock clock;
  FakeKubeApi api{clock};
  metrics::Registry registry;
  std::unique_ptr<Operator> op;
  Json trainjob;

  explicit Fixture(const Json& annotations) {
    auto created = api.Create(gvr::kTrainJobs, "ml", TrainJob(annotations));
    REQUIRE(created.ok());
    trainjob = *created;
    REQUIRE(api.Create(gvr::kJobSets, "ml", JobSetFor(trainjob)).ok());
    OperatorOptions o;
    o.settings.namespace_name = "ls";
    o.leader_elect = false;
    o.kubeflow_trainjobs = true;
    o.training_jobs.coordinator_image = "coord:test";
    o.registry = &registry;
    auto built = BuildOperator(api, clock, o);
    REQUIRE(built.ok());
    op = std::move(*built);
    REQUIRE(op->ListOnce().ok());
  }
  kube::ReconcileResult ReconcileKubeflow() {
    REQUIRE(op->trainjob_reconciler());
    auto r = op->trainjob_reconciler()->Reconcile("ml/llama");
    REQUIRE(op->ListOnce().ok());
    return r;
  }
  kube::ReconcileResult ReconcileTrainingJob() {
    auto r = op->trainingjob_reconciler().Reconcile("ml/llama");
    REQUIRE(op->ListOnce().ok());
    return r;
  }
  std::vector<Json> Warnings(const std::string& reason) {
    std::vector<Json> out;
    for (const Json& e : api.Objects(gvr::kEvents)) {
      if (e["reason"] == reason && e["type"] == "Warning") out.push_back(e);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("kubeflow reconcile: an annotated TrainJob gets an owned TrainingJob and that its coordinator",
          "[operator]") {
  Fixture f(Json{{"lockstep.dev/fault-tolerance", "enabled"}, {"lockstep.dev/spares", "2"}});
  CHECK_FALSE(f.ReconcileKubeflow().error);
  auto tj = f.api.Peek(gvr::kTrainingJobs, "ml", "llama");
  REQUIRE(tj);
  CHECK((*tj)["metadata"]["ownerReferences"][0]["uid"] == kube::Uid(f.trainjob));
  CHECK((*tj)["metadata"]["ownerReferences"][0]["kind"] == "TrainJob");
  CHECK((*tj)["spec"]["trainJobRef"]["name"] == "llama");
  CHECK((*tj)["spec"]["replicas"] == 2);
  CHECK((*tj)["spec"]["spares"] == 2);
  // Applied again: nothing to write.
  const uint64_t writes = f.api.WriteCount();
  CHECK_FALSE(f.ReconcileKubeflow().error);
  CHECK(f.api.WriteCount() == writes);

  auto r = f.ReconcileTrainingJob();
  CHECK_FALSE(r.error);
  CHECK(f.api.Peek(gvr::kPods, "ml", "llama-coordinator"));
  CHECK_FALSE(f.api.Peek(gvr::kPods, "ml", "llama-rank-0"));  // the Kubeflow controller's
  auto cm = f.api.Peek(gvr::kConfigMaps, "ml", "llama-coordinator");
  REQUIRE(cm);
  const Json spare = Json::parse((*cm)["data"]["spare-pod.json"].get<std::string>());
  CHECK(spare["spec"]["containers"][0]["image"] == "torch:1");
  CHECK(f.api.Peek(gvr::kTrainingJobs, "ml", "llama")->at("status")["phase"] == "Pending");
}

TEST_CASE("kubeflow reconcile: invalid annotations are told on the TrainJob, naming the annotation", "[operator]") {
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"lockstep.dev/spares", "-1"}, {"lockstep.dev/spares", "abc"}, {"lockstep.dev/fault-tolerance", "maybe"}}) {
    Json annotations = {{"lockstep.dev/fault-tolerance", "enabled"}};
    annotations[key] = value;
    Fixture f(annotations);
    auto r = f.ReconcileKubeflow();
    CHECK_FALSE(r.error);
    CHECK_FALSE(r.requeue_after);
    CHECK_FALSE(f.api.Peek(gvr::kTrainingJobs, "ml", "llama"));
    auto warnings = f.Warnings("InvalidAnnotation");
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0]["involvedObject"]["kind"] == "TrainJob");
    CHECK(warnings[0]["message"].get<std::string>().find("metadata.annotations[" + key + "]: \"" + value + "\"") == 0);
  }
}

TEST_CASE("kubeflow reconcile: protection turned off deletes the TrainingJob", "[operator]") {
  Fixture f(Json{{"lockstep.dev/fault-tolerance", "enabled"}});
  CHECK_FALSE(f.ReconcileKubeflow().error);
  REQUIRE(f.api.Peek(gvr::kTrainingJobs, "ml", "llama"));
  REQUIRE(f.api
              .MergePatch(gvr::kTrainJobs, "ml", "llama",
                          {{"metadata", {{"annotations", {{"lockstep.dev/fault-tolerance", "disabled"}}}}}})
              .ok());
  REQUIRE(f.op->ListOnce().ok());
  CHECK_FALSE(f.ReconcileKubeflow().error);
  CHECK_FALSE(f.api.Peek(gvr::kTrainingJobs, "ml", "llama"));
}

}  // namespace lockstep::op
