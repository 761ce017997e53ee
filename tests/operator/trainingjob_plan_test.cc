// PlanTrainingJob and the TrainingJob object builders: one test per rule
// listed in trainingjob_plan.h.
#include <algorithm>

#include <catch2/catch.hpp>

#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/trainingjob_plan.h"

namespace lockstep::op {
namespace {

constexpr char kNow[] = "2026-01-02T03:04:05Z";

Json Template() {
  return Json::parse(R"({
    "metadata": {"labels": {"team": "ml"}, "annotations": {"a": "b"}},
    "spec": {"restartPolicy": "OnFailure",
             "containers": [{"name": "train", "image": "trainer:1",
                             "env": [{"name": "KEEP", "value": "1"}, {"name": "LOCKSTEP_RANK", "value": "99"}]}]}})");
}

Json Job(int replicas = 2, int spares = 1, Json status = nullptr) {
  Json j = {{"apiVersion", "lockstep.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", "demo"}, {"namespace", "ml"}, {"uid", "uid-1"}, {"generation", 3}}},
            {"spec", {{"replicas", replicas}, {"spares", spares}, {"template", Template()}}}};
  if (!status.is_null()) j["status"] = status;
  return j;
}

Json Pod(const std::string& name, const std::string& role, int rank, const std::string& phase) {
  Json labels = {{"lockstep.dev/job", "demo"}, {"lockstep.dev/role", role}};
  if (rank >= 0) labels["lockstep.dev/rank"] = std::to_string(rank);
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", labels}}}, {"status", {{"phase", phase}}}};
}

Json RankPod(int rank, const std::string& phase) {
  return Pod("demo-rank-" + std::to_string(rank), "rank", rank, phase);
}
Json Coordinator(const std::string& phase = "Running") { return Pod("demo-coordinator", "coordinator", -1, phase); }

TrainingJobPlan Plan(const Json& job, const std::vector<Json>& pods) {
  TrainingJobInput in;
  in.job = &job;
  in.now = kNow;
  for (const Json& p : pods) in.pods.push_back(&p);
  return PlanTrainingJob(
      in, TrainingJobSettings{.coordinator_image = "coord:test", .coordinator_cluster_role = "lockstep-coordinator"});
}

std::vector<std::string> Names(const std::vector<Json>& objs) {
  std::vector<std::string> n;
  for (const Json& o : objs) n.push_back(o["kind"].get<std::string>() + "/" + kube::Name(o));
  return n;
}

const Json* Condition(const Json& status, const std::string& type) {
  for (const Json& c : status["conditions"]) {
    if (c["type"] == type) return &c;
  }
  return nullptr;
}

std::string Env(const Json& container, const std::string& name) {
  for (const Json& e : container["env"]) {
    if (e["name"] == name) return e.contains("value") ? e["value"].get<std::string>() : e["valueFrom"].dump();
  }
  return "<unset>";
}

TEST_CASE("trainingjob plan: a new job gets the coordinator's objects, its pod and every rank pod", "[operator]") {
  auto plan = Plan(Job(), {});
  CHECK(plan.spec_error.empty());
  CHECK(Names(plan.apply) == std::vector<std::string>{"ServiceAccount/demo-coordinator", "RoleBinding/demo-coordinator",
                                                      "ConfigMap/demo-coordinator", "ConfigMap/demo-coordinator-state",
                                                      "Service/demo-coordinator", "PodDisruptionBudget/demo-ranks"});
  CHECK(Names(plan.create_pods) ==
        std::vector<std::string>{"Pod/demo-coordinator", "Pod/demo-rank-0", "Pod/demo-rank-1"});
  CHECK(plan.delete_pods.empty());
  // A drain cannot evict a rank pod before its rank moved.
  const Json& pdb = plan.apply.back();
  CHECK(pdb["apiVersion"] == "policy/v1");
  CHECK(pdb["spec"]["maxUnavailable"] == 0);
  CHECK(pdb["spec"]["selector"] ==
        Json{{"matchLabels", {{"lockstep.dev/job", "demo"}, {"lockstep.dev/role", "rank"}}}});
  CHECK(pdb["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "lockstep-operator");
  for (const Json& o : plan.apply) {
    INFO(o.dump());
    CHECK(o["metadata"]["namespace"] == "ml");
    CHECK(o["metadata"]["labels"]["lockstep.dev/job"] == "demo");
    const Json& owner = o["metadata"]["ownerReferences"][0];
    CHECK(owner["kind"] == "TrainingJob");
    CHECK(owner["uid"] == "uid-1");
    CHECK(owner["controller"] == true);
  }
  CHECK(plan.status["phase"] == "Pending");
  CHECK(plan.status["readyReplicas"] == 0);
  CHECK(plan.status["observedGeneration"] == 3);
  REQUIRE(Condition(plan.status, "Ready"));
  CHECK((*Condition(plan.status, "Ready"))["status"] == "False");
}

TEST_CASE("trainingjob objects: rank pod from the template, rank environment, restartPolicy Never", "[operator]") {
  auto plan = Plan(Job(4, 1), {});
  const Json& pod = plan.create_pods[3];  // after the coordinator: ranks 0, 1, 2
  CHECK(kube::Name(pod) == "demo-rank-2");
  CHECK(pod["metadata"]["labels"] == Json{{"team", "ml"},
                                          {"app.kubernetes.io/managed-by", "lockstep-operator"},
                                          {"lockstep.dev/job", "demo"},
                                          {"lockstep.dev/role", "rank"},
                                          {"lockstep.dev/rank", "2"}});
  CHECK(pod["metadata"]["annotations"] == Json{{"a", "b"}});
  CHECK(pod["metadata"]["ownerReferences"][0]["name"] == "demo");
  CHECK(pod["spec"]["restartPolicy"] == "Never");
  const Json& c = pod["spec"]["containers"][0];
  CHECK(c["image"] == "trainer:1");
  CHECK(Env(c, "KEEP") == "1");
  CHECK(Env(c, "LOCKSTEP_COORDINATOR") == "http://demo-coordinator.ml.svc:8470");
  CHECK(Env(c, "LOCKSTEP_ROLE") == "rank");
  CHECK(Env(c, "LOCKSTEP_RANK") == "2");  // the operator's value, not the template's 99
  CHECK(Env(c, "LOCKSTEP_WORLD_SIZE") == "4");
  CHECK(Env(c, "LOCKSTEP_POD_NAME") == R"({"fieldRef":{"fieldPath":"metadata.name"}})");
  CHECK(Env(c, "LOCKSTEP_POD_UID") == R"({"fieldRef":{"fieldPath":"metadata.uid"}})");
  int rank_entries = 0;
  for (const Json& e : c["env"]) rank_entries += e["name"] == "LOCKSTEP_RANK";
  CHECK(rank_entries == 1);
  // spec.detection (its defaults here) for the library.
  CHECK(Env(c, "LOCKSTEP_HEARTBEAT_INTERVAL") == "0.5");
  CHECK(Env(c, "LOCKSTEP_HANG_TIMEOUT") == "10");
}

TEST_CASE("trainingjob objects: spec.detection reaches the coordinator and the pods, a template's own value wins",
          "[operator]") {
  Json job = Job(2, 1);
  job["spec"]["detection"] = {{"heartbeatIntervalMs", 200}, {"heartbeatTimeoutMs", 1500}, {"hangTimeoutSeconds", 45}};
  job["spec"]["template"]["spec"]["containers"][0]["env"].push_back({{"name", "LOCKSTEP_HANG_TIMEOUT"}, {"value", "7"}});
  auto plan = Plan(job, {});
  const Json& args = plan.create_pods[0]["spec"]["containers"][0]["args"];
  CHECK(args[args.size() - 2] == "--heartbeat-timeout");
  CHECK(args.back() == "1500ms");
  const Json& c = plan.create_pods[1]["spec"]["containers"][0];
  CHECK(Env(c, "LOCKSTEP_HEARTBEAT_INTERVAL") == "0.2");
  CHECK(Env(c, "LOCKSTEP_HANG_TIMEOUT") == "7");
  int hang_entries = 0;
  for (const Json& e : c["env"]) hang_entries += e["name"] == "LOCKSTEP_HANG_TIMEOUT";
  CHECK(hang_entries == 1);
}

TEST_CASE("trainingjob objects: the coordinator pod, its arguments, ConfigMap, Service and RBAC", "[operator]") {
  auto plan = Plan(Job(2, 1), {});
  const Json& pod = plan.create_pods[0];
  const Json& c = pod["spec"]["containers"][0];
  CHECK(c["image"] == "coord:test");
  CHECK(c["command"] == Json::array({"lockstep-coordinator"}));
  CHECK(c["args"] == Json::array({"--job",
                                  "demo",
                                  "--world-size",
                                  "2",
                                  "--listen",
                                  "0.0.0.0:8470",
                                  "--advertise-url",
                                  "http://demo-coordinator.ml.svc:8470",
                                  "--kube",
                                  "--namespace",
                                  "ml",
                                  "--spares",
                                  "1",
                                  "--spare-pod-template",
                                  "/etc/lockstep/spare-pod.json",
                                  "--state-configmap",
                                  "demo-coordinator-state",
                                  "--fence",
                                  "kube",
                                  "--pid-check",
                                  "off",
                                  "--heartbeat-timeout",
                                  "3000ms"}));
  CHECK_FALSE(c.contains("env"));
  CHECK(c["volumeMounts"][0]["mountPath"] == "/etc/lockstep");
  CHECK(pod["spec"]["volumes"][0]["configMap"]["name"] == "demo-coordinator");
  CHECK(pod["spec"]["serviceAccountName"] == "demo-coordinator");
  CHECK(pod["metadata"]["labels"]["lockstep.dev/role"] == "coordinator");
  const Json& anti = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
  CHECK(anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname");
  CHECK(anti["podAffinityTerm"]["labelSelector"]["matchLabels"] == Json{{"lockstep.dev/job", "demo"}});

  const Json& rb = plan.apply[1];
  CHECK(rb["roleRef"] ==
        Json{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", "lockstep-coordinator"}});
  CHECK(rb["subjects"][0] == Json{{"kind", "ServiceAccount"}, {"name", "demo-coordinator"}, {"namespace", "ml"}});

  const Json& state = plan.apply[3];
  CHECK(kube::Name(state) == "demo-coordinator-state");
  CHECK_FALSE(state.contains("data"));  // the coordinator's to write

  const Json& svc = plan.apply[4];
  CHECK(svc["spec"]["selector"] == Json{{"lockstep.dev/job", "demo"}, {"lockstep.dev/role", "coordinator"}});
  CHECK(svc["spec"]["ports"][0]["port"] == 8470);

  const Json spare = Json::parse(plan.apply[2]["data"]["spare-pod.json"].get<std::string>());
  CHECK(spare["kind"] == "Pod");
  CHECK(spare["metadata"]["generateName"] == "demo-spare-");
  CHECK_FALSE(spare["metadata"].contains("name"));
  CHECK(spare["metadata"]["labels"]["lockstep.dev/role"] == "spare");
  CHECK_FALSE(spare["metadata"]["labels"].contains("lockstep.dev/rank"));
  CHECK(spare["metadata"]["ownerReferences"][0]["uid"] == "uid-1");
  CHECK(spare["spec"]["restartPolicy"] == "Never");
  const Json& sc = spare["spec"]["containers"][0];
  CHECK(Env(sc, "LOCKSTEP_ROLE") == "spare");
  CHECK(Env(sc, "LOCKSTEP_RANK") == "<unset>");
  CHECK(Env(sc, "LOCKSTEP_WORLD_SIZE") == "2");
  CHECK(Env(sc, "LOCKSTEP_COORDINATOR") == "http://demo-coordinator.ml.svc:8470");
}

TEST_CASE("trainingjob plan: coordinator address pod-ip, ranks wait for the coordinator pod's IP and get it",
          "[operator]") {
  const TrainingJobSettings pod_ip{.coordinator_image = "coord:test",
                                   .coordinator_cluster_role = "lockstep-coordinator",
                                   .coordinator_address = CoordinatorAddress::kPodIp};
  auto plan_with = [&](const Json& job, const std::vector<Json>& pods) {
    TrainingJobInput in;
    in.job = &job;
    in.now = kNow;
    for (const Json& p : pods) in.pods.push_back(&p);
    return PlanTrainingJob(in, pod_ip);
  };
  const Json job = Job(2, 1);
  // No coordinator pod yet: only it is created; its spares are told $(POD_IP).
  auto first = plan_with(job, {});
  REQUIRE(Names(first.create_pods) == std::vector<std::string>{"Pod/demo-coordinator"});
  const Json& c = first.create_pods[0]["spec"]["containers"][0];
  const Json args = c["args"];
  auto at = std::find(args.begin(), args.end(), "--advertise-url");
  REQUIRE(at != args.end());
  CHECK(*(at + 1) == "http://$(POD_IP):8470");
  CHECK(Env(c, "POD_IP") == Json{{"fieldRef", {{"fieldPath", "status.podIP"}}}}.dump());
  // Scheduled but no IP yet, or being deleted: still no rank pod.
  CHECK(plan_with(job, {Coordinator("Pending")}).create_pods.empty());
  Json deleting = Coordinator();
  deleting["status"]["podIP"] = "10.88.1.9";
  deleting["metadata"]["deletionTimestamp"] = kNow;
  CHECK(plan_with(job, {deleting}).create_pods.empty());
  // With an IP: every rank pod, told that IP.
  Json coord = Coordinator();
  coord["status"]["podIP"] = "10.88.1.9";
  auto ranks = plan_with(job, {coord});
  REQUIRE(Names(ranks.create_pods) == std::vector<std::string>{"Pod/demo-rank-0", "Pod/demo-rank-1"});
  for (const Json& p : ranks.create_pods) {
    CHECK(Env(p["spec"]["containers"][0], "LOCKSTEP_COORDINATOR") == "http://10.88.1.9:8470");
  }
  CHECK(CoordinatorPodIpUrl("fd00::5") == "http://[fd00::5]:8470");
}

TEST_CASE("trainingjob plan: before the start only the missing rank pods are created", "[operator]") {
  auto plan = Plan(Job(3, 1), {Coordinator(), RankPod(0, "Running"), RankPod(2, "Pending")});
  CHECK(Names(plan.create_pods) == std::vector<std::string>{"Pod/demo-rank-1"});
  CHECK(plan.status["phase"] == "Pending");
  CHECK(plan.status["readyReplicas"] == 1);
}

TEST_CASE("trainingjob plan: all rank pods Running is phase Running, Ready, spares counted", "[operator]") {
  Json spare_deleting = Pod("demo-spare-y", "spare", -1, "Running");
  spare_deleting["metadata"]["deletionTimestamp"] = kNow;
  auto plan = Plan(Job(2, 2), {Coordinator(), RankPod(0, "Running"), RankPod(1, "Running"),
                               Pod("demo-spare-x", "spare", -1, "Running"), Pod("demo-spare-z", "spare", -1, "Pending"),
                               spare_deleting});
  CHECK(plan.create_pods.empty());
  CHECK(plan.delete_pods.empty());
  CHECK(plan.status["phase"] == "Running");
  CHECK(plan.status["readyReplicas"] == 2);
  CHECK(plan.status["availableSpares"] == 1);
  const Json* ready = Condition(plan.status, "Ready");
  REQUIRE(ready);
  CHECK((*ready)["status"] == "True");
  CHECK((*ready)["reason"] == "AllRanksRunning");
  CHECK((*ready)["message"] == "2 ranks of 2 running, 1 spare of 2 available");
  CHECK((*ready)["lastTransitionTime"] == kNow);
  CHECK((*ready)["observedGeneration"] == 3);
}

TEST_CASE("trainingjob plan: once started, a gone rank pod is the coordinator's to replace", "[operator]") {
  Json running = Json::parse(R"({"phase":"Running","readyReplicas":2})");
  auto plan = Plan(Job(2, 1, running), {Coordinator(), RankPod(0, "Running")});
  CHECK(plan.create_pods.empty());
  CHECK(plan.status["phase"] == "Degraded");
  CHECK((*Condition(plan.status, "Ready"))["reason"] == "RankMissing");

  // A spare that took rank 1 over (relabelled by the coordinator) counts.
  auto taken =
      Plan(Job(2, 1, running), {Coordinator(), RankPod(0, "Running"), Pod("demo-spare-x", "rank", 1, "Running")});
  CHECK(taken.create_pods.empty());
  CHECK(taken.status["phase"] == "Running");
}

TEST_CASE("trainingjob plan: a failed rank with a spare is Degraded, without one Failed", "[operator]") {
  auto with_spare = Plan(Job(2, 1), {Coordinator(), RankPod(0, "Running"), RankPod(1, "Failed")});
  CHECK(with_spare.status["phase"] == "Degraded");
  CHECK(with_spare.create_pods.empty());  // the failed pod still holds rank 1's place
  CHECK(with_spare.delete_pods.empty());

  auto no_spare = Plan(Job(2, 0), {Coordinator(), RankPod(0, "Running"), RankPod(1, "Failed"),
                                   Pod("demo-spare-x", "spare", -1, "Running")});
  CHECK(no_spare.status["phase"] == "Failed");
  const Json* ready = Condition(no_spare.status, "Ready");
  CHECK((*ready)["reason"] == "RankFailed");
  CHECK((*ready)["message"] == "rank 1 (pod demo-rank-1) failed and no spare can take it over (spec.spares is 0)");
  CHECK(no_spare.delete_pods == std::vector<std::string>{"demo-spare-x"});  // final: spares go
  CHECK(no_spare.apply.empty());
  CHECK(no_spare.create_pods.empty());

  Json job = Job(2, 1);
  job["spec"]["migration"] = {{"onFailure", false}};
  auto no_migration = Plan(job, {Coordinator(), RankPod(0, "Running"), RankPod(1, "Failed")});
  CHECK(no_migration.status["phase"] == "Failed");
  CHECK((*Condition(no_migration.status, "Ready"))["message"].get<std::string>().find(
            "spec.migration.onFailure is false") != std::string::npos);
}

TEST_CASE("trainingjob plan: every rank succeeded is Succeeded, final, spares deleted", "[operator]") {
  Json running = Json::parse(R"({"phase":"Running"})");
  auto plan = Plan(Job(2, 1, running), {Coordinator(), RankPod(0, "Succeeded"), RankPod(1, "Succeeded"),
                                        Pod("demo-spare-x", "spare", -1, "Running")});
  CHECK(plan.status["phase"] == "Succeeded");
  CHECK(plan.delete_pods == std::vector<std::string>{"demo-spare-x"});
  CHECK(plan.create_pods.empty());

  // Final: with every pod gone, nothing is created and the phase stays.
  auto after = Plan(Job(2, 1, plan.status), {});
  CHECK(after.status["phase"] == "Succeeded");
  CHECK(after.create_pods.empty());
  CHECK(after.apply.empty());
  CHECK(*Condition(after.status, "Ready") == *Condition(plan.status, "Ready"));
}

TEST_CASE("trainingjob plan: an ended coordinator pod is deleted, a missing one created", "[operator]") {
  Json running = Json::parse(R"({"phase":"Running"})");
  auto ended = Plan(Job(1, 1, running), {Coordinator("Failed"), RankPod(0, "Running")});
  CHECK(ended.delete_pods == std::vector<std::string>{"demo-coordinator"});
  CHECK(ended.create_pods.empty());
  auto missing = Plan(Job(1, 1, running), {RankPod(0, "Running")});
  CHECK(Names(missing.create_pods) == std::vector<std::string>{"Pod/demo-coordinator"});
}

TEST_CASE("trainingjob plan: before the start, rank pods beyond spec.replicas are deleted", "[operator]") {
  auto plan = Plan(Job(1, 1), {Coordinator(), RankPod(0, "Running"), RankPod(1, "Running")});
  CHECK(plan.delete_pods == std::vector<std::string>{"demo-rank-1"});
  CHECK(plan.status["readyReplicas"] == 1);
}

Json RefJob(const std::string& field, const std::string& name) {
  Json job = Job(3, 1);
  job["spec"].erase("template");
  job["spec"][field] = {{"name", name}};
  return job;
}

TrainingJobPlan PlanRef(const Json& job, const std::vector<Json>& pods, const Json* kubeflow_job,
                        const Json* jobset) {
  TrainingJobInput in;
  in.job = &job;
  in.now = kNow;
  for (const Json& p : pods) in.pods.push_back(&p);
  in.kubeflow_job = kubeflow_job;
  in.jobset = jobset;
  return PlanTrainingJob(
      in, TrainingJobSettings{.coordinator_image = "coord:test", .coordinator_cluster_role = "lockstep-coordinator"});
}

// A TrainJob and the JobSet Trainer makes for it (the trainer's replicated job).
const Json kTrainJob = {{"metadata", {{"name", "llama"}, {"namespace", "ml"}, {"uid", "tj-uid"}}}};
const Json kJobSet = Json::parse(R"({"metadata": {"name": "llama", "namespace": "ml"},
  "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"parallelism": 3, "template": {
    "metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": "llama", "team": "ml"}},
    "spec": {"subdomain": "llama", "containers": [{"name": "node", "image": "pytorch:2.7",
             "env": [{"name": "PET_NODE_RANK", "value": "0"}]}]}}}}}]}})");

TEST_CASE("trainingjob plan: a trainJobRef job without its TrainJob is reported, nothing created", "[operator]") {
  Json job = RefJob("trainJobRef", "llama");
  auto plan = PlanRef(job, {}, nullptr, nullptr);
  CHECK(plan.kubeflow_missing.rfind("spec.trainJobRef.name: TrainJob \"llama\" was not found in namespace ml", 0) ==
        0);
  CHECK(plan.apply.empty());
  CHECK(plan.create_pods.empty());
  CHECK(plan.status["phase"] == "Pending");
  CHECK((*Condition(plan.status, "Ready"))["reason"] == "KubeflowJobNotFound");
  // Planning again from the written status changes nothing (no write loop).
  job["status"] = plan.status;
  CHECK(PlanRef(job, {}, nullptr, nullptr).status == plan.status);

  // A PyTorchJob reference the same way, naming its field.
  auto pj = PlanRef(RefJob("pytorchJobRef", "bert"), {}, nullptr, nullptr);
  CHECK(pj.kubeflow_missing.rfind("spec.pytorchJobRef.name: PyTorchJob \"bert\"", 0) == 0);
}

TEST_CASE("trainingjob plan: a TrainJob whose JobSet is not there yet waits", "[operator]") {
  auto plan = PlanRef(RefJob("trainJobRef", "llama"), {}, &kTrainJob, nullptr);
  CHECK(plan.kubeflow_missing.empty());
  CHECK(plan.apply.empty());
  CHECK(plan.create_pods.empty());
  CHECK((*Condition(plan.status, "Ready"))["reason"] == "WaitingForJobSet");
}

TEST_CASE("trainingjob plan: a trainJobRef job gets the coordinator and a spare manifest from the JobSet, no rank pods",
          "[operator]") {
  auto plan = PlanRef(RefJob("trainJobRef", "llama"), {}, &kTrainJob, &kJobSet);
  CHECK(Names(plan.apply) == std::vector<std::string>{"ServiceAccount/demo-coordinator", "RoleBinding/demo-coordinator",
                                                      "ConfigMap/demo-coordinator", "ConfigMap/demo-coordinator-state",
                                                      "Service/demo-coordinator", "PodDisruptionBudget/demo-ranks"});
  REQUIRE(plan.create_pods.size() == 1);
  CHECK(kube::Name(plan.create_pods[0]) == "demo-coordinator");
  // The Job restarts a dead container in place: the coordinator does not delete that pod.
  CHECK(plan.create_pods[0]["spec"]["containers"][0]["args"].back() == "--keep-restarted-pods");
  const Json spare = Json::parse(plan.apply[2]["data"]["spare-pod.json"].get<std::string>());
  CHECK(spare["metadata"]["generateName"] == "demo-spare-");
  CHECK(spare["metadata"]["labels"] == Json{{"team", "ml"},
                                            {"app.kubernetes.io/managed-by", "lockstep-operator"},
                                            {"lockstep.dev/job", "demo"},
                                            {"lockstep.dev/role", "spare"}});
  CHECK(spare["metadata"]["ownerReferences"][0]["kind"] == "TrainingJob");  // not the Job's, not the JobSet's
  CHECK_FALSE(spare["spec"].contains("subdomain"));
  const Json& c = spare["spec"]["containers"][0];
  CHECK(c["image"] == "pytorch:2.7");
  CHECK(Env(c, "PET_NODE_RANK") == "<unset>");
  CHECK(Env(c, "LOCKSTEP_ROLE") == "spare");
  CHECK(Env(c, "LOCKSTEP_WORLD_SIZE") == "3");
  CHECK(Env(c, "LOCKSTEP_COORDINATOR") == "http://demo-coordinator.ml.svc:8470");

  // Started, a rank pod (the Kubeflow controller's, labelled by the webhook) gone: nothing recreated here.
  Json running = RefJob("trainJobRef", "llama");
  running["status"]["phase"] = "Running";
  auto later = PlanRef(running, {Coordinator(), RankPod(0, "Running"), RankPod(1, "Running")}, &kTrainJob, &kJobSet);
  CHECK(later.create_pods.empty());
  CHECK(later.status["phase"] == "Degraded");
}

TEST_CASE("trainingjob plan: the TrainingJob of an ended TrainJob ends with it and lets its spares go", "[operator]") {
  Json done = kTrainJob;
  done["status"]["conditions"] = Json::array({{{"type", "Complete"}, {"status", "True"}}});
  auto plan = PlanRef(RefJob("trainJobRef", "llama"), {Coordinator(), Pod("demo-spare-x", "spare", -1, "Running")},
                      &done, &kJobSet);
  CHECK(plan.status["phase"] == "Succeeded");
  CHECK(plan.delete_pods == std::vector<std::string>{"demo-spare-x"});
  CHECK(plan.apply.empty());
}

TEST_CASE("trainingjob plan: an invalid spec names the field and creates nothing", "[operator]") {
  Json job = Job();
  job["spec"]["template"]["spec"]["containers"] = Json::array();
  auto plan = Plan(job, {});
  CHECK(plan.spec_error.find("spec.template.spec.containers") != std::string::npos);
  CHECK(plan.apply.empty());
  CHECK(plan.create_pods.empty());
  const Json* ready = Condition(plan.status, "Ready");
  CHECK((*ready)["reason"] == "InvalidSpec");
  CHECK((*ready)["message"] == plan.spec_error);
}

TEST_CASE("trainingjob plan: a rejected rank pod names the TrainingJob field, a coordinator pod the flags",
          "[operator]") {
  auto plan = Plan(Job(), {});
  const Json& rank = plan.create_pods[1];
  const std::string server = "Pod \"demo-rank-0\" is invalid: spec.containers[0].name: Invalid value: \"Bad_Name\"";
  const std::string msg = DescribeRejectedPod(rank, server);
  CHECK(msg.rfind("spec.template.spec.containers[0].name: the API server rejected rank pod demo-rank-0", 0) == 0);
  CHECK(msg.find("Bad_Name") != std::string::npos);
  CHECK(DescribeRejectedPod(rank, "something else").rfind("spec.template: ", 0) == 0);
  CHECK(DescribeRejectedPod(plan.create_pods[0], server).find("--coordinator-image") != std::string::npos);

  const Json status = WithRejectedPod(plan.status, msg, 3, kNow);
  const Json* ready = Condition(status, "Ready");
  CHECK((*ready)["reason"] == "InvalidTemplate");
  CHECK((*ready)["message"] == msg);
  CHECK(status["phase"] == "Pending");
}

TEST_CASE("trainingjob plan: the status keeps the coordinator's keys and is stable", "[operator]") {
  Json status = Json::parse(R"({"phase":"Running","migrations":2,"generation":3,
                                "lastMigration":{"rank":1,"toPod":"demo-spare-x"}})");
  std::vector<Json> pods = {Coordinator(), RankPod(0, "Running"), RankPod(1, "Running")};
  auto plan = Plan(Job(2, 1, status), pods);
  CHECK(plan.status["migrations"] == 2);
  CHECK(plan.status["generation"] == 3);
  CHECK(plan.status["lastMigration"]["toPod"] == "demo-spare-x");
  auto again = Plan(Job(2, 1, plan.status), pods);
  CHECK(again.status == plan.status);
}

}  // namespace
}  // namespace lockstep::op
