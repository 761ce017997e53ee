#include "lockstep/operator/kubeflow_plan.h"

#include <charconv>
#include <set>

#include "lockstep/api/defaults.h"
#include "lockstep/api/pod_contract.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::op {
namespace {

// Labels and annotations by which JobSet, batch Jobs and Kubeflow recognise
// (adopt, count, index) their pods.
bool ForeignKey(const std::string& key) {
  static const char* const kPrefixes[] = {"jobset.sigs.k8s.io/", "batch.kubernetes.io/", "training.kubeflow.org/",
                                          "trainer.kubeflow.org/", "kubeflow.org/"};
  for (const char* p : kPrefixes) {
    if (key.rfind(p, 0) == 0) return true;
  }
  return key == "job-name" || key == "controller-uid";
}

Json WithoutForeignKeys(const Json& map) {
  Json out = Json::object();
  if (!map.is_object()) return out;
  for (const auto& [k, v] : map.items()) {
    if (!ForeignKey(k)) out[k] = v;
  }
  return out;
}

// A variable that carries the rank, or is read from a label or annotation the spare does not have.
bool RankEnv(const Json& e) {
  static const std::set<std::string> kRankVars = {"RANK", "PET_NODE_RANK", "JOB_COMPLETION_INDEX", "NODE_RANK",
                                                  "GROUP_RANK"};
  if (!e.is_object()) return false;
  if (kRankVars.count(e.value("name", ""))) return true;
  const std::string path = kube::GetString(e, {"valueFrom", "fieldRef", "fieldPath"});
  for (const char* sel : {"metadata.labels['", "metadata.annotations['"}) {
    if (path.rfind(sel, 0) == 0 && ForeignKey(path.substr(std::string(sel).size()))) return true;
  }
  return false;
}

std::optional<int> Int(const Json* v) {
  if (v && v->is_number_integer()) return v->get<int>();
  return std::nullopt;
}

// The JobSet's replicated job that runs the trainer.
const Json* TrainerReplicatedJob(const Json& jobset) {
  const Json* rjs = kube::FindPath(jobset, {"spec", "replicatedJobs"});
  if (!rjs || !rjs->is_array() || rjs->empty()) return nullptr;
  for (const Json& rj : *rjs) {
    const std::string a = kube::GetString(rj, {"template", "metadata", "labels", kTrainerAncestorLabel});
    const std::string b =
        kube::GetString(rj, {"template", "spec", "template", "metadata", "labels", kTrainerAncestorLabel});
    if (a == kTrainerAncestorTrainer || b == kTrainerAncestorTrainer) return &rj;
  }
  for (const Json& rj : *rjs) {
    if (rj.value("name", "") == kTrainerReplicatedJob) return &rj;
  }
  return &(*rjs)[0];
}

bool ConditionTrue(const Json& job, const std::string& type) {
  const Json* cs = kube::FindPath(job, {"status", "conditions"});
  if (!cs || !cs->is_array()) return false;
  for (const Json& c : *cs) {
    if (c.is_object() && c.value("type", "") == type && c.value("status", "") == "True") return true;
  }
  return false;
}

std::string Annotation(const Json& job, const char* key) {
  return kube::GetString(job, {"metadata", "annotations", key});
}

bool HasAnnotation(const Json& job, const char* key) {
  return kube::FindPath(job, {"metadata", "annotations", key}) != nullptr;
}

}  // namespace

const char* KubeflowApiVersion(KubeflowKind kind) {
  return kind == KubeflowKind::kTrainJob ? "trainer.kubeflow.org/v1alpha1" : "kubeflow.org/v1";
}
const char* KubeflowKindName(KubeflowKind kind) { return kind == KubeflowKind::kTrainJob ? "TrainJob" : "PyTorchJob"; }
const char* KubeflowRefField(KubeflowKind kind) {
  return kind == KubeflowKind::kTrainJob ? "trainJobRef" : "pytorchJobRef";
}

Result<Protection> ParseProtection(const Json& job) {
  Protection p;
  const std::string ft = Annotation(job, api::kFaultToleranceAnnotation);
  if (!HasAnnotation(job, api::kFaultToleranceAnnotation) || ft == api::kFaultToleranceDisabled) return p;
  if (ft != api::kFaultToleranceEnabled) {
    return InvalidArgument(std::string("metadata.annotations[") + api::kFaultToleranceAnnotation + "]: \"" + ft +
                           "\" is not \"enabled\" or \"disabled\"; set " + api::kFaultToleranceAnnotation +
                           ": enabled to protect this job");
  }
  p.enabled = true;
  if (HasAnnotation(job, api::kSparesAnnotation)) {
    const std::string s = Annotation(job, api::kSparesAnnotation);
    int v = -1;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0 || v > 64) {
      return InvalidArgument(std::string("metadata.annotations[") + api::kSparesAnnotation + "]: \"" + s +
                             "\" is not a number of spare pods from 0 to 64 (default " +
                             std::to_string(api::kTrainingJobSpares) + ")");
    }
    p.spares = v;
  }
  return p;
}

std::optional<int> KubeflowReplicas(KubeflowKind kind, const Json& job, const Json* jobset) {
  if (kind == KubeflowKind::kPyTorchJob) {
    const Json* specs = kube::FindPath(job, {"spec", "pytorchReplicaSpecs"});
    if (!specs || !specs->is_object() || specs->empty()) return std::nullopt;
    int total = 0;
    for (const auto& [type, rs] : specs->items()) total += Int(kube::FindPath(rs, {"replicas"})).value_or(1);
    return total > 0 ? std::optional<int>(total) : std::nullopt;
  }
  if (auto n = Int(kube::FindPath(job, {"spec", "trainer", "numNodes"})); n && *n > 0) return n;
  if (!jobset) return std::nullopt;
  const Json* rj = TrainerReplicatedJob(*jobset);
  if (!rj) return std::nullopt;
  const int replicas = Int(kube::FindPath(*rj, {"replicas"})).value_or(1);
  const int parallelism = Int(kube::FindPath(*rj, {"template", "spec", "parallelism"})).value_or(1);
  return replicas * parallelism > 0 ? std::optional<int>(replicas * parallelism) : std::nullopt;
}

const Json* KubeflowPodTemplate(KubeflowKind kind, const Json& job, const Json* jobset) {
  if (kind == KubeflowKind::kPyTorchJob) {
    for (const char* type : {"Worker", "Master"}) {
      const Json* t = kube::FindPath(job, {"spec", "pytorchReplicaSpecs", type, "template"});
      if (t && t->is_object()) return t;
    }
    return nullptr;
  }
  if (!jobset) return nullptr;
  const Json* rj = TrainerReplicatedJob(*jobset);
  const Json* t = rj ? kube::FindPath(*rj, {"template", "spec", "template"}) : nullptr;
  return t && t->is_object() ? t : nullptr;
}

Json SpareTemplateFrom(const Json& tpl) {
  Json out = Json::object();
  Json meta = Json::object();
  if (const Json* l = kube::FindPath(tpl, {"metadata", "labels"})) meta["labels"] = WithoutForeignKeys(*l);
  if (const Json* a = kube::FindPath(tpl, {"metadata", "annotations"})) meta["annotations"] = WithoutForeignKeys(*a);
  out["metadata"] = meta;
  Json spec = tpl.contains("spec") && tpl["spec"].is_object() ? tpl["spec"] : Json::object();
  for (const char* k : {"nodeName", "hostname", "subdomain"}) spec.erase(k);
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (Json& c : spec[list]) {
      if (!c.contains("env") || !c["env"].is_array()) continue;
      Json env = Json::array();
      for (const Json& e : c["env"]) {
        if (!RankEnv(e)) env.push_back(e);
      }
      c["env"] = env;
    }
  }
  out["spec"] = spec;
  return out;
}

std::string KubeflowJobEnded(KubeflowKind kind, const Json& job) {
  if (ConditionTrue(job, "Failed")) return "Failed";
  if (ConditionTrue(job, kind == KubeflowKind::kTrainJob ? "Complete" : "Succeeded")) return "Succeeded";
  return "";
}

bool ControlledBy(const Json& tj, const Json& owner) {
  const Json* refs = kube::FindPath(tj, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return false;
  for (const Json& r : *refs) {
    if (r.is_object() && r.value("controller", false) && r.value("uid", "") == kube::Uid(owner)) return true;
  }
  return false;
}

Json DesiredTrainingJob(KubeflowKind kind, const Json& job, int replicas, int spares) {
  Json owner = {{"apiVersion", KubeflowApiVersion(kind)},
                {"kind", KubeflowKindName(kind)},
                {"name", kube::Name(job)},
                {"uid", kube::Uid(job)},
                {"controller", true}};
  return {
      {"apiVersion", "lockstep.dev/v1alpha1"},
      {"kind", "TrainingJob"},
      {"metadata",
       {{"name", kube::Name(job)},
        {"namespace", kube::Namespace(job)},
        {"labels", {{"app.kubernetes.io/managed-by", "lockstep-operator"}}},
        {"ownerReferences", Json::array({owner})}}},
      {"spec", {{"replicas", replicas}, {"spares", spares}, {KubeflowRefField(kind), {{"name", kube::Name(job)}}}}}};
}

KubeflowJobPlan PlanKubeflowJob(KubeflowKind kind, const Json& job, const Json* tj, const Json* jobset) {
  KubeflowJobPlan plan;
  if (kube::FindPath(job, {"metadata", "deletionTimestamp"})) return plan;  // the TrainingJob goes with it
  const bool ours = tj && ControlledBy(*tj, job);
  auto protection = ParseProtection(job);
  if (!protection.ok()) {
    plan.warning_reason = "InvalidAnnotation";
    plan.warning = protection.error().message;
    return plan;
  }
  if (!protection->enabled) {
    plan.delete_training_job = ours && !kube::FindPath(*tj, {"metadata", "deletionTimestamp"});
    return plan;
  }
  const std::string name = kube::Name(job);
  if (name.size() > static_cast<size_t>(api::kMaxTrainingJobNameLength)) {
    plan.warning_reason = "NameTooLong";
    plan.warning = std::string("metadata.name: ") + KubeflowKindName(kind) + " \"" + name + "\" has " +
                   std::to_string(name.size()) + " characters; Lockstep protects jobs of at most " +
                   std::to_string(api::kMaxTrainingJobNameLength) +
                   " (the TrainingJob takes its name); rename the job or remove " + api::kFaultToleranceAnnotation;
    return plan;
  }
  if (tj && !ours) {
    plan.warning_reason = "NameTaken";
    plan.warning = "TrainingJob " + kube::Namespace(job) + "/" + name + " exists and is not owned by this " +
                   KubeflowKindName(kind) + "; delete it or rename the job to protect it";
    return plan;
  }
  auto replicas = KubeflowReplicas(kind, job, jobset);
  if (!replicas) {
    plan.waiting = true;
    return plan;
  }
  plan.apply = DesiredTrainingJob(kind, job, *replicas, protection->spares);
  return plan;
}

}  // namespace lockstep::op
