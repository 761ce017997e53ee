#include "lockstep/operator/pod_mutation.h"

#include <charconv>
#include <set>

#include "lockstep/api/pod_contract.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/trainingjob_objects.h"

namespace lockstep::op {
namespace {

std::optional<int> Decimal(const std::string& s) {
  int v = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::string Label(const Json& pod, const char* key) { return kube::GetString(pod, {"metadata", "labels", key}); }

// "~" and "/" escaped for a JSON Pointer token (RFC 6901).
std::string PointerToken(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

Json FieldEnv(const char* name, const char* path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

}  // namespace

std::optional<KubeflowPodOwner> KubeflowJobOfPod(const Json& pod) {
  const std::string jobset = Label(pod, kJobSetNameLabel);
  if (!jobset.empty() && (Label(pod, kTrainerAncestorLabel) == kTrainerAncestorTrainer ||
                          Label(pod, kReplicatedJobNameLabel) == kTrainerReplicatedJob)) {
    return KubeflowPodOwner{KubeflowKind::kTrainJob, jobset};
  }
  const std::string pj = Label(pod, kPyTorchJobNameLabel);
  if (!pj.empty()) return KubeflowPodOwner{KubeflowKind::kPyTorchJob, pj};
  return std::nullopt;
}

std::optional<int> KubeflowPodRank(const Json& pod, KubeflowKind kind) {
  if (kind == KubeflowKind::kTrainJob) {
    std::string index = Label(pod, "batch.kubernetes.io/job-completion-index");
    if (index.empty())
      index = kube::GetString(pod, {"metadata", "annotations", "batch.kubernetes.io/job-completion-index"});
    return Decimal(index);
  }
  if (const Json* cs = kube::FindPath(pod, {"spec", "containers"}); cs && cs->is_array()) {
    for (const Json& c : *cs) {
      if (!c.contains("env") || !c["env"].is_array()) continue;
      for (const Json& e : c["env"]) {
        if (e.is_object() && e.value("name", "") == "RANK" && e.contains("value") && e["value"].is_string()) {
          if (auto r = Decimal(e["value"].get<std::string>())) return r;
        }
      }
    }
  }
  const std::string type = Label(pod, "training.kubeflow.org/replica-type");
  auto index = Decimal(Label(pod, "training.kubeflow.org/replica-index"));
  if (!index) return std::nullopt;
  // Without RANK (the v1 operator sets it on every pod of a job with a Master): a
  // Worker-only job, whose worker i is rank i.
  if (type == "master" || type == "worker") return *index;
  return std::nullopt;
}

Json PodMutationPatch(const Json& pod, const PodMutationTarget& target, int rank) {
  Json patch = Json::array();
  if (!kube::FindPath(pod, {"metadata", "labels"})) {
    patch.push_back({{"op", "add"}, {"path", "/metadata/labels"}, {"value", Json::object()}});
  }
  const std::pair<const char*, std::string> labels[] = {{api::kJobLabel, target.training_job},
                                                        {api::kRoleLabel, api::kRoleRank},
                                                        {api::kRankLabel, std::to_string(rank)}};
  for (const auto& [k, v] : labels) {
    patch.push_back({{"op", "add"}, {"path", "/metadata/labels/" + PointerToken(k)}, {"value", v}});
  }
  const Json ours =
      Json::array({{{"name", api::kEnvCoordinator},
                    {"value", target.coordinator_url.empty() ? CoordinatorUrl({target.training_job, target.ns, ""})
                                                             : target.coordinator_url}},
                   {{"name", api::kEnvRole}, {"value", api::kRoleRank}},
                   {{"name", api::kEnvRank}, {"value", std::to_string(rank)}},
                   {{"name", api::kEnvWorldSize}, {"value", std::to_string(target.replicas)}},
                   FieldEnv(api::kEnvPodName, "metadata.name"),
                   FieldEnv(api::kEnvPodUid, "metadata.uid")});
  std::set<std::string> names;
  for (const Json& e : ours) names.insert(e["name"].get<std::string>());
  const Json* cs = kube::FindPath(pod, {"spec", "containers"});
  if (!cs || !cs->is_array()) return patch;
  for (size_t i = 0; i < cs->size(); ++i) {
    const Json& c = (*cs)[i];
    Json env = Json::array();
    if (c.contains("env") && c["env"].is_array()) {
      for (const Json& e : c["env"]) {
        if (!(e.is_object() && names.count(e.value("name", "")))) env.push_back(e);
      }
    }
    for (const Json& e : ours) env.push_back(e);
    AddMissingEnv(env, DetectionEnv(target.detection));
    // "add" of an existing member replaces it (RFC 6902 4.1).
    patch.push_back({{"op", "add"}, {"path", "/spec/containers/" + std::to_string(i) + "/env"}, {"value", env}});
  }
  return patch;
}

}  // namespace lockstep::op
