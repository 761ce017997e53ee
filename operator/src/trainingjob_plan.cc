#include "lockstep/operator/trainingjob_plan.h"

#include <map>
#include <set>

#include "lockstep/kube/conditions.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/apply_outcome.h"

namespace lockstep::op {
namespace {

constexpr char kReady[] = "Ready";
constexpr char kSupported[] = "Supported";

Json WithoutCondition(const Json& conditions, const std::string& type) {
  Json out = Json::array();
  if (!conditions.is_array()) return out;
  for (const Json& c : conditions) {
    if (!(c.is_object() && c.value("type", "") == type)) out.push_back(c);
  }
  return out;
}

std::string Plural(int n, const std::string& word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

}  // namespace

TrainingJobPlan PlanTrainingJob(const TrainingJobInput& in, const TrainingJobSettings& settings) {
  const Json& job = *in.job;
  TrainingJobPlan plan;
  const JobRef ref{kube::Name(job), kube::Namespace(job), kube::Uid(job)};
  const int64_t generation = kube::Generation(job);
  const Json old_status = job.contains("status") && job["status"].is_object() ? job["status"] : Json::object();
  const std::string old_phase = old_status.value("phase", "");
  Json status = old_status;
  status["observedGeneration"] = generation;
  Json conditions = status.contains("conditions") ? status["conditions"] : Json::array();
  auto set_ready = [&](const std::string& st, const std::string& reason, const std::string& message) {
    conditions = kube::SetCondition(conditions, {kReady, st, reason, message}, generation, in.now);
  };

  auto spec = api::ParseTrainingJobSpec(ref.name, job.contains("spec") ? job["spec"] : Json());
  if (!spec.ok()) {
    plan.spec_error = spec.error().message;
    status["phase"] = "Pending";
    status["readyReplicas"] = 0;
    status["availableSpares"] = 0;
    set_ready("False", "InvalidSpec", plan.spec_error);
    status["conditions"] = conditions;
    plan.status = status;
    return plan;
  }
  conditions = WithoutCondition(conditions, kSupported);  // written by operators before Kubeflow jobs were handled
  std::optional<KubeflowKind> kf_kind;
  if (spec->train_job_ref) kf_kind = KubeflowKind::kTrainJob;
  if (spec->pytorch_job_ref) kf_kind = KubeflowKind::kPyTorchJob;
  std::string kf_ended;
  if (kf_kind) {
    const std::string kind = KubeflowKindName(*kf_kind);
    const std::string kf_name = spec->train_job_ref ? *spec->train_job_ref : *spec->pytorch_job_ref;
    const std::string field = std::string("spec.") + KubeflowRefField(*kf_kind) + ".name";
    auto pending = [&](const std::string& reason, const std::string& message) {
      status["phase"] = "Pending";
      status["readyReplicas"] = 0;
      status["availableSpares"] = 0;
      set_ready("False", reason, message);
      status["conditions"] = conditions;
      plan.status = status;
      return plan;
    };
    if (!in.kubeflow_job) {
      plan.kubeflow_missing = field + ": " + kind + " \"" + kf_name + "\" was not found in namespace " + ref.ns +
                              "; nothing is created for this job until it exists";
      return pending("KubeflowJobNotFound", plan.kubeflow_missing);
    }
    const Json* tpl = KubeflowPodTemplate(*kf_kind, *in.kubeflow_job, in.jobset);
    if (!tpl) {
      return pending("WaitingForJobSet", "waiting for the JobSet of " + kind + " \"" + kf_name +
                                             "\" (the spares are made from its pod template)");
    }
    spec->pod_template = SpareTemplateFrom(*tpl);
    kf_ended = KubeflowJobEnded(*kf_kind, *in.kubeflow_job);
  }

  const int replicas = spec->replicas;
  const std::string coordinator = CoordinatorName(ref.name);
  std::set<std::string> names;        // every pod observed, by name
  std::set<int> running, succeeded;   // ranks with such a pod
  std::map<int, std::string> failed;  // rank -> a failed pod of it
  std::set<int> present;              // ranks with a pod in any state
  const Json* coordinator_pod = nullptr;
  std::vector<const Json*> spares, extra_ranks;
  int available_spares = 0;
  for (const Json* p : in.pods) {
    names.insert(kube::Name(*p));
    const std::string role = PodRole(*p);
    if (kube::Name(*p) == coordinator) {
      coordinator_pod = p;
      continue;
    }
    if (role == kRoleSpare) {
      spares.push_back(p);
      if (!IsDeleting(*p) && PodPhase(*p) == "Running") ++available_spares;
      continue;
    }
    if (role != kRoleRank) continue;
    const int rank = PodRank(*p);
    if (rank < 0) continue;
    if (rank >= replicas) {
      extra_ranks.push_back(p);
      continue;
    }
    present.insert(rank);
    if (IsDeleting(*p)) continue;
    const std::string phase = PodPhase(*p);
    if (phase == "Running") running.insert(rank);
    if (phase == "Succeeded") succeeded.insert(rank);
    if (phase == "Failed") failed.emplace(rank, kube::Name(*p));
  }
  const int ready = static_cast<int>(running.size());
  status["readyReplicas"] = ready;
  status["availableSpares"] = available_spares;

  const bool terminal = old_phase == "Succeeded" || old_phase == "Failed";
  const bool started = old_phase == "Running" || old_phase == "Migrating" || old_phase == "Degraded";
  const bool can_migrate = spec->spares > 0 && spec->migration.on_failure;
  const std::string counts = Plural(ready, "rank") + " of " + std::to_string(replicas) + " running, " +
                             Plural(available_spares, "spare") + " of " + std::to_string(spec->spares) + " available";
  std::string phase = old_phase;
  if (!terminal) {
    if (!kf_ended.empty()) {
      phase = kf_ended;
      set_ready("False", kf_ended, std::string("the ") + KubeflowKindName(*kf_kind) + " " + kf_ended);
    } else if (static_cast<int>(succeeded.size()) == replicas) {
      phase = "Succeeded";
      set_ready("False", "Succeeded", "all " + Plural(replicas, "rank") + " completed");
    } else if (!failed.empty() && !can_migrate) {
      const auto& [rank, pod] = *failed.begin();
      phase = "Failed";
      set_ready("False", "RankFailed",
                "rank " + std::to_string(rank) + " (pod " + pod + ") failed and no spare can take it over (" +
                    (spec->spares == 0 ? "spec.spares is 0" : "spec.migration.onFailure is false") + ")");
    } else if (ready == replicas) {
      phase = "Running";
      set_ready("True", "AllRanksRunning", counts);
    } else if (started || !failed.empty()) {
      phase = "Degraded";
      set_ready("False", "RankMissing", counts + "; the coordinator moves a lost rank onto a spare");
    } else {
      phase = "Pending";
      set_ready("False", "Pending", counts);
    }
  }
  if (phase != "Succeeded" && phase != "Failed") {
    MigrationTriggerPlan triggers = PlanMigrationTriggers({&*spec, in.pods, in.nodes, in.healths});
    plan.annotate = std::move(triggers.annotate);
    if (!triggers.held.empty()) {
      conditions = kube::SetCondition(
          conditions, {kMigrationBlockedCondition, "True", triggers.blocked_reason, triggers.blocked_message},
          generation, in.now);
    } else if (kube::FindCondition(Json{{"conditions", conditions}}, kMigrationBlockedCondition)) {
      conditions = kube::SetCondition(
          conditions, {kMigrationBlockedCondition, "False", "NotBlocked", "no rank waits for a spare to move to"},
          generation, in.now);
    }
  }
  status["phase"] = phase;
  status["conditions"] = conditions;
  plan.status = status;

  if (phase == "Succeeded" || phase == "Failed") {
    // Nothing will use the spares again: give their nodes back.
    for (const Json* p : spares) {
      if (!IsDeleting(*p)) plan.delete_pods.push_back(kube::Name(*p));
    }
    return plan;
  }

  plan.apply.push_back(RenderCoordinatorServiceAccount(ref));
  plan.apply.push_back(RenderCoordinatorRoleBinding(ref, settings));
  plan.apply.push_back(RenderCoordinatorConfigMap(ref, *spec));
  plan.apply.push_back(RenderCoordinatorStateConfigMap(ref));
  plan.apply.push_back(RenderCoordinatorService(ref));
  plan.apply.push_back(RenderRankDisruptionBudget(ref));
  if (!coordinator_pod) {
    plan.create_pods.push_back(RenderCoordinatorPod(ref, *spec, settings));
  } else if (!IsDeleting(*coordinator_pod) &&
             (PodPhase(*coordinator_pod) == "Failed" || PodPhase(*coordinator_pod) == "Succeeded")) {
    // Evicted or ended: a new one continues from the state ConfigMap.
    plan.delete_pods.push_back(coordinator);
  }
  // --coordinator-address pod-ip: ranks are told the coordinator pod's IP, so
  // they are created once it has one.
  std::string coordinator_url;
  if (settings.coordinator_address == CoordinatorAddress::kPodIp) {
    const std::string ip =
        coordinator_pod && !IsDeleting(*coordinator_pod) ? kube::GetString(*coordinator_pod, {"status", "podIP"}) : "";
    if (!ip.empty()) coordinator_url = CoordinatorPodIpUrl(ip);
  }
  const bool can_create_ranks =
      settings.coordinator_address == CoordinatorAddress::kService || !coordinator_url.empty();
  if (!started && !kf_kind) {  // a Kubeflow job's ranks are its controller's
    for (int i = 0; i < replicas && can_create_ranks; ++i) {
      if (!present.count(i) && !names.count(RankPodName(ref.name, i))) {
        plan.create_pods.push_back(RenderRankPod(ref, *spec, i, coordinator_url));
      }
    }
    for (const Json* p : extra_ranks) {
      if (!IsDeleting(*p)) plan.delete_pods.push_back(kube::Name(*p));
    }
  }
  return plan;
}

std::string DescribeRejectedPod(const Json& pod, const std::string& server_message) {
  const std::string name = kube::Name(pod);
  const std::string path = InvalidFieldPath(server_message);
  if (kube::GetString(pod, {"metadata", "labels", kRoleLabel}) == kRoleCoordinator) {
    return "the API server rejected the coordinator pod " + name + ": " + server_message +
           "; check the operator's --coordinator-image and --coordinator-cluster-role";
  }
  std::string field = path.empty() ? "spec.template" : "spec.template." + path;
  return field + ": the API server rejected rank pod " + name + " made from spec.template: " + server_message +
         "; fix spec.template";
}

Json WithRejectedPod(const Json& status, const std::string& message, int64_t generation, const std::string& now) {
  Json s = status;
  s["conditions"] = kube::SetCondition(s.contains("conditions") ? s["conditions"] : Json::array(),
                                       {kReady, "False", "InvalidTemplate", message}, generation, now);
  return s;
}

}  // namespace lockstep::op
