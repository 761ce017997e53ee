// Protecting Kubeflow jobs (kubeflow_plan.h) and the webhook's pod mutation
// (pod_mutation.h): one test per rule, on objects shaped like the ones Trainer
// v2.3 / JobSet v0.12 and the v1 training-operator make.
#include <catch2/catch.hpp>

#include "lockstep/api/training_job.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/kubeflow_plan.h"
#include "lockstep/operator/pod_mutation.h"

namespace lockstep::op {
namespace {

Json TrainJob(Json annotations, Json num_nodes = 4) {
  Json j = {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
            {"kind", "TrainJob"},
            {"metadata", {{"name", "llama"}, {"namespace", "ml"}, {"uid", "tj-uid"}, {"annotations", annotations}}},
            {"spec", {{"runtimeRef", {{"name", "torch-distributed"}}}, {"trainer", Json::object()}}}};
  if (!num_nodes.is_null()) j["spec"]["trainer"]["numNodes"] = num_nodes;
  return j;
}

Json Enabled(const std::string& spares = "") {
  Json a = {{"lockstep.dev/fault-tolerance", "enabled"}};
  if (!spares.empty()) a["lockstep.dev/spares"] = spares;
  return a;
}

// The JobSet Trainer renders for a TrainJob: one Indexed Job per replicated job.
Json JobSet() {
  return Json::parse(R"({
    "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
    "metadata": {"name": "llama", "namespace": "ml",
                 "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                      "name": "llama", "uid": "tj-uid", "controller": true}]},
    "spec": {"replicatedJobs": [
      {"name": "dataset-initializer", "replicas": 1,
       "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "init", "image": "init:1"}]}}}}},
      {"name": "node", "replicas": 1,
       "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"parallelism": 3, "completions": 3, "completionMode": "Indexed",
                             "template": {
                               "metadata": {"labels": {"team": "ml", "jobset.sigs.k8s.io/jobset-name": "llama",
                                                       "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
                                                       "batch.kubernetes.io/job-name": "llama-node-0",
                                                       "job-name": "llama-node-0", "controller-uid": "c"},
                                            "annotations": {"keep": "me",
                                                            "jobset.sigs.k8s.io/replicatedjob-name": "node"},
                                            "ownerReferences": [{"kind": "Job", "name": "llama-node-0"}]},
                               "spec": {"restartPolicy": "OnFailure", "subdomain": "llama", "hostname": "x",
                                        "nodeName": "gpu-7",
                                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                                        "affinity": {"nodeAffinity": {"x": 1}},
                                        "containers": [{"name": "node", "image": "pytorch:2.7",
                                                        "command": ["torchrun", "train.py"],
                                                        "resources": {"limits": {"nvidia.com/gpu": 8}},
                                                        "env": [{"name": "PET_NNODES", "value": "3"},
                                                                {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
                                                                  "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                                                                {"name": "IDX", "valueFrom": {"fieldRef": {
                                                                  "fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}},
                                                                {"name": "KEEP", "value": "1"}]}]}}}}}]}})");
}

Json PyTorchJob(Json annotations) {
  Json j = Json::parse(R"({
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
    "metadata": {"name": "bert", "namespace": "ml", "uid": "pj-uid"},
    "spec": {"pytorchReplicaSpecs": {
      "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "m:1"}]}}},
      "Worker": {"replicas": 3, "template": {
        "metadata": {"labels": {"training.kubeflow.org/replica-type": "worker", "app": "bert"}},
        "spec": {"containers": [{"name": "pytorch", "image": "w:1", "env": [{"name": "RANK", "value": "2"}]}]}}}}}})");
  j["metadata"]["annotations"] = annotations;
  return j;
}

}  // namespace

TEST_CASE("kubeflow: the annotations, with an invalid value named", "[operator]") {
  REQUIRE_FALSE(ParseProtection(TrainJob(Json::object()))->enabled);
  REQUIRE_FALSE(ParseProtection(TrainJob({{"lockstep.dev/fault-tolerance", "disabled"}}))->enabled);
  auto on = ParseProtection(TrainJob(Enabled()));
  REQUIRE(on->enabled);
  REQUIRE(on->spares == 1);
  REQUIRE(ParseProtection(TrainJob(Enabled("3")))->spares == 3);
  REQUIRE(ParseProtection(TrainJob(Enabled("0")))->spares == 0);
  for (const char* bad : {"-1", "abc", "65", "1.5", " 2"}) {
    auto r = ParseProtection(TrainJob(Enabled(bad)));
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().message.find("metadata.annotations[lockstep.dev/spares]: \"" + std::string(bad) + "\"") == 0);
  }
  auto maybe = ParseProtection(TrainJob({{"lockstep.dev/fault-tolerance", "maybe"}}));
  REQUIRE_FALSE(maybe.ok());
  REQUIRE(maybe.error().message.find("metadata.annotations[lockstep.dev/fault-tolerance]: \"maybe\"") == 0);
}

TEST_CASE("kubeflow: an annotated TrainJob gets a TrainingJob it owns and that references it", "[operator]") {
  const Json tj = TrainJob(Enabled("2"));
  KubeflowJobPlan plan = PlanKubeflowJob(KubeflowKind::kTrainJob, tj, nullptr, nullptr);
  REQUIRE(plan.warning.empty());
  REQUIRE(plan.apply);
  const Json& t = *plan.apply;
  CHECK(t["apiVersion"] == "lockstep.dev/v1alpha1");
  CHECK(t["kind"] == "TrainingJob");
  CHECK(kube::Name(t) == "llama");
  CHECK(kube::Namespace(t) == "ml");
  REQUIRE(t["metadata"]["ownerReferences"].size() == 1);
  const Json& owner = t["metadata"]["ownerReferences"][0];
  CHECK(owner["apiVersion"] == "trainer.kubeflow.org/v1alpha1");
  CHECK(owner["kind"] == "TrainJob");
  CHECK(owner["name"] == "llama");
  CHECK(owner["uid"] == "tj-uid");
  CHECK(owner["controller"] == true);
  CHECK(ControlledBy(t, tj));
  // A valid TrainingJob spec: 4 ranks (numNodes), 2 spares, trainJobRef.
  auto spec = api::ParseTrainingJobSpec("llama", t["spec"]);
  REQUIRE(spec.ok());
  CHECK(spec->replicas == 4);
  CHECK(spec->spares == 2);
  CHECK(spec->train_job_ref == "llama");
  CHECK_FALSE(spec->pod_template);

  // Already there and ours: applied again (server-side apply is idempotent).
  CHECK(PlanKubeflowJob(KubeflowKind::kTrainJob, tj, &t, nullptr).apply);
}

TEST_CASE("kubeflow: the world size from numNodes, else the JobSet, else wait", "[operator]") {
  const Json js = JobSet();
  CHECK(KubeflowReplicas(KubeflowKind::kTrainJob, TrainJob(Enabled(), 4), &js) == 4);
  CHECK(KubeflowReplicas(KubeflowKind::kTrainJob, TrainJob(Enabled(), nullptr), &js) == 3);
  CHECK_FALSE(KubeflowReplicas(KubeflowKind::kTrainJob, TrainJob(Enabled(), nullptr), nullptr));
  KubeflowJobPlan wait = PlanKubeflowJob(KubeflowKind::kTrainJob, TrainJob(Enabled(), nullptr), nullptr, nullptr);
  CHECK(wait.waiting);
  CHECK_FALSE(wait.apply);
  CHECK(KubeflowReplicas(KubeflowKind::kPyTorchJob, PyTorchJob(Enabled()), nullptr) == 4);
}

TEST_CASE("kubeflow: a PyTorchJob gets a TrainingJob with pytorchJobRef", "[operator]") {
  KubeflowJobPlan plan = PlanKubeflowJob(KubeflowKind::kPyTorchJob, PyTorchJob(Enabled()), nullptr, nullptr);
  REQUIRE(plan.apply);
  CHECK((*plan.apply)["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob");
  CHECK((*plan.apply)["metadata"]["ownerReferences"][0]["apiVersion"] == "kubeflow.org/v1");
  auto spec = api::ParseTrainingJobSpec("bert", (*plan.apply)["spec"]);
  REQUIRE(spec.ok());
  CHECK(spec->pytorch_job_ref == "bert");
  CHECK(spec->replicas == 4);
  CHECK(spec->spares == 1);
}

TEST_CASE("kubeflow: invalid annotations, long names and taken names are reported, nothing applied", "[operator]") {
  KubeflowJobPlan bad = PlanKubeflowJob(KubeflowKind::kTrainJob, TrainJob(Enabled("abc")), nullptr, nullptr);
  CHECK_FALSE(bad.apply);
  CHECK(bad.warning_reason == "InvalidAnnotation");
  CHECK(bad.warning.find("lockstep.dev/spares") != std::string::npos);

  Json long_name = TrainJob(Enabled());
  long_name["metadata"]["name"] = std::string(46, 'x');
  KubeflowJobPlan too_long = PlanKubeflowJob(KubeflowKind::kTrainJob, long_name, nullptr, nullptr);
  CHECK_FALSE(too_long.apply);
  CHECK(too_long.warning_reason == "NameTooLong");

  const Json users = {{"metadata", {{"name", "llama"}, {"namespace", "ml"}}}};
  KubeflowJobPlan taken = PlanKubeflowJob(KubeflowKind::kTrainJob, TrainJob(Enabled()), &users, nullptr);
  CHECK_FALSE(taken.apply);
  CHECK_FALSE(taken.delete_training_job);
  CHECK(taken.warning_reason == "NameTaken");
}

TEST_CASE("kubeflow: protection turned off deletes only the TrainingJob the job owns", "[operator]") {
  const Json on = TrainJob(Enabled());
  const Json ours = *PlanKubeflowJob(KubeflowKind::kTrainJob, on, nullptr, nullptr).apply;
  const Json off = TrainJob({{"lockstep.dev/fault-tolerance", "disabled"}});
  CHECK(PlanKubeflowJob(KubeflowKind::kTrainJob, off, &ours, nullptr).delete_training_job);
  const Json none = TrainJob(Json::object());
  CHECK(PlanKubeflowJob(KubeflowKind::kTrainJob, none, &ours, nullptr).delete_training_job);
  const Json users = {{"metadata", {{"name", "llama"}, {"namespace", "ml"}}}};
  CHECK_FALSE(PlanKubeflowJob(KubeflowKind::kTrainJob, off, &users, nullptr).delete_training_job);
  Json deleting = on;
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  KubeflowJobPlan gone = PlanKubeflowJob(KubeflowKind::kTrainJob, deleting, &ours, nullptr);
  CHECK_FALSE(gone.apply);
  CHECK_FALSE(gone.delete_training_job);
}

TEST_CASE("kubeflow: the spare template keeps the pod spec and drops the job controllers' marks", "[operator]") {
  const Json js = JobSet();
  const Json* tpl = KubeflowPodTemplate(KubeflowKind::kTrainJob, TrainJob(Enabled()), &js);
  REQUIRE(tpl);
  CHECK((*tpl)["spec"]["containers"][0]["image"] == "pytorch:2.7");  // the trainer's, not the initializer's
  const Json spare = SpareTemplateFrom(*tpl);
  CHECK(spare["metadata"]["labels"] == Json{{"team", "ml"}});
  CHECK(spare["metadata"]["annotations"] == Json{{"keep", "me"}});
  CHECK_FALSE(spare["metadata"].contains("ownerReferences"));
  const Json& spec = spare["spec"];
  CHECK_FALSE(spec.contains("nodeName"));
  CHECK_FALSE(spec.contains("hostname"));
  CHECK_FALSE(spec.contains("subdomain"));
  CHECK(spec["tolerations"] == (*tpl)["spec"]["tolerations"]);
  CHECK(spec["affinity"] == (*tpl)["spec"]["affinity"]);
  const Json& c = spec["containers"][0];
  CHECK(c["image"] == "pytorch:2.7");
  CHECK(c["command"] == Json::array({"torchrun", "train.py"}));
  CHECK(c["resources"]["limits"]["nvidia.com/gpu"] == 8);
  CHECK(c["env"] == Json::array({{{"name", "PET_NNODES"}, {"value", "3"}}, {{"name", "KEEP"}, {"value", "1"}}}));

  // PyTorchJob: the Worker's template, its literal RANK dropped.
  const Json pj = PyTorchJob(Enabled());
  const Json* wtpl = KubeflowPodTemplate(KubeflowKind::kPyTorchJob, pj, nullptr);
  REQUIRE(wtpl);
  const Json wspare = SpareTemplateFrom(*wtpl);
  CHECK(wspare["metadata"]["labels"] == Json{{"app", "bert"}});
  CHECK(wspare["spec"]["containers"][0]["image"] == "w:1");
  CHECK(wspare["spec"]["containers"][0]["env"] == Json::array());
  CHECK_FALSE(KubeflowPodTemplate(KubeflowKind::kTrainJob, TrainJob(Enabled()), nullptr));
}

TEST_CASE("kubeflow: the job's end from its conditions", "[operator]") {
  Json tj = TrainJob(Enabled());
  CHECK(KubeflowJobEnded(KubeflowKind::kTrainJob, tj).empty());
  tj["status"]["conditions"] = Json::array({{{"type", "Complete"}, {"status", "True"}}});
  CHECK(KubeflowJobEnded(KubeflowKind::kTrainJob, tj) == "Succeeded");
  Json pj = PyTorchJob(Enabled());
  pj["status"]["conditions"] =
      Json::array({{{"type", "Succeeded"}, {"status", "False"}}, {{"type", "Failed"}, {"status", "True"}}});
  CHECK(KubeflowJobEnded(KubeflowKind::kPyTorchJob, pj) == "Failed");
}

TEST_CASE("pod mutation: which Kubeflow job a pod is a rank of, and its rank", "[operator]") {
  const Json trainer = {{"metadata",
                         {{"labels",
                           {{"jobset.sigs.k8s.io/jobset-name", "llama"},
                            {"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
                            {"batch.kubernetes.io/job-completion-index", "2"}}}}}};
  auto owner = KubeflowJobOfPod(trainer);
  REQUIRE(owner);
  CHECK(owner->kind == KubeflowKind::kTrainJob);
  CHECK(owner->job == "llama");
  CHECK(KubeflowPodRank(trainer, KubeflowKind::kTrainJob) == 2);
  Json by_annotation = trainer;
  by_annotation["metadata"]["labels"].erase("batch.kubernetes.io/job-completion-index");
  by_annotation["metadata"]["annotations"] = {{"batch.kubernetes.io/job-completion-index", "1"}};
  CHECK(KubeflowPodRank(by_annotation, KubeflowKind::kTrainJob) == 1);

  Json initializer = trainer;
  initializer["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "dataset-initializer";
  CHECK_FALSE(KubeflowJobOfPod(initializer));
  CHECK_FALSE(KubeflowJobOfPod(Json{{"metadata", {{"labels", {{"app", "x"}}}}}}));

  Json worker = {{"metadata",
                  {{"labels",
                    {{"training.kubeflow.org/job-name", "bert"},
                     {"training.kubeflow.org/replica-type", "worker"},
                     {"training.kubeflow.org/replica-index", "1"}}}}},
                 {"spec", {{"containers", Json::array({{{"name", "pytorch"}}})}}}};
  auto pj = KubeflowJobOfPod(worker);
  REQUIRE(pj);
  CHECK(pj->kind == KubeflowKind::kPyTorchJob);
  CHECK(pj->job == "bert");
  // No RANK: the v1 operator (v1.9.3) sets RANK on every pod of a job with a Master, so
  // this is a Worker-only job, whose worker i is rank i.
  CHECK(KubeflowPodRank(worker, KubeflowKind::kPyTorchJob) == 1);
  worker["spec"]["containers"][0]["env"] = Json::array({{{"name", "RANK"}, {"value", "3"}}});
  CHECK(KubeflowPodRank(worker, KubeflowKind::kPyTorchJob) == 3);  // the operator's own RANK wins
  Json master = worker;
  master["spec"]["containers"][0].erase("env");
  master["metadata"]["labels"]["training.kubeflow.org/replica-type"] = "master";
  master["metadata"]["labels"]["training.kubeflow.org/replica-index"] = "0";
  CHECK(KubeflowPodRank(master, KubeflowKind::kPyTorchJob) == 0);
}

TEST_CASE("pod mutation: labels and the library's environment, applied as a JSON Patch", "[operator]") {
  Json pod = {{"metadata", {{"generateName", "llama-node-0-2-"}, {"labels", {{"a/b", "c"}}}}},
              {"spec",
               {{"containers", Json::array({{{"name", "node"},
                                             {"env", Json::array({{{"name", "KEEP"}, {"value", "1"}},
                                                                  {{"name", "LOCKSTEP_RANK"}, {"value", "99"}},
                                                                  {{"name", "LOCKSTEP_HANG_TIMEOUT"}, {"value", "30"}}})}},
                                            {{"name", "sidecar"}}})}}}};
  PodMutationTarget target{"llama", "ml", 4};
  target.detection.heartbeat_interval_ms = 250;
  target.detection.hang_timeout_seconds = 12;
  const Json patch = PodMutationPatch(pod, target, 2);
  const Json out = pod.patch(patch);  // nlohmann applies RFC 6902 like the API server
  CHECK(out["metadata"]["labels"] ==
        Json{{"a/b", "c"}, {"lockstep.dev/job", "llama"}, {"lockstep.dev/role", "rank"}, {"lockstep.dev/rank", "2"}});
  const Json want_env =
      Json::array({{{"name", "LOCKSTEP_COORDINATOR"}, {"value", "http://llama-coordinator.ml.svc:8470"}},
                   {{"name", "LOCKSTEP_ROLE"}, {"value", "rank"}},
                   {{"name", "LOCKSTEP_RANK"}, {"value", "2"}},
                   {{"name", "LOCKSTEP_WORLD_SIZE"}, {"value", "4"}},
                   {{"name", "LOCKSTEP_POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
                   {{"name", "LOCKSTEP_POD_UID"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.uid"}}}}}}});
  // spec.detection's variables where the container sets none (its own value wins).
  Json first = Json::array({{{"name", "KEEP"}, {"value", "1"}}, {{"name", "LOCKSTEP_HANG_TIMEOUT"}, {"value", "30"}}});
  for (const Json& e : want_env) first.push_back(e);
  first.push_back({{"name", "LOCKSTEP_HEARTBEAT_INTERVAL"}, {"value", "0.25"}});
  CHECK(out["spec"]["containers"][0]["env"] == first);
  Json second = want_env;
  second.push_back({{"name", "LOCKSTEP_HEARTBEAT_INTERVAL"}, {"value", "0.25"}});
  second.push_back({{"name", "LOCKSTEP_HANG_TIMEOUT"}, {"value", "12"}});
  CHECK(out["spec"]["containers"][1]["env"] == second);

  // No labels at all: the patch makes the map first.
  Json bare = {{"metadata", Json::object()}, {"spec", {{"containers", Json::array({{{"name", "c"}}})}}}};
  const Json bare_out = bare.patch(PodMutationPatch(bare, {"llama", "ml", 4}, 0));
  CHECK(bare_out["metadata"]["labels"]["lockstep.dev/rank"] == "0");
}

}  // namespace lockstep::op
