#include "lockstep/operator/trainingjob_objects.h"

#include <charconv>
#include <cstdio>
#include <set>

#include "lockstep/kube/object_meta.h"

namespace lockstep::op {
namespace {

Json OwnerRefs(const JobRef& j) {
  // No blockOwnerDeletion: it would need update on trainingjobs/finalizers
  // (for the operator and for the coordinator, which creates spares from the
  // same manifest); background garbage collection needs none.
  return Json::array({{{"apiVersion", "lockstep.dev/v1alpha1"},
                       {"kind", "TrainingJob"},
                       {"name", j.name},
                       {"uid", j.uid},
                       {"controller", true}}});
}

Json Labels(const JobRef& j, const std::string& role) {
  Json l = {{"app.kubernetes.io/managed-by", "lockstep-operator"}, {kJobLabel, j.name}};
  if (!role.empty()) l[kRoleLabel] = role;
  return l;
}

Json Metadata(const JobRef& j, const std::string& name, const std::string& role) {
  return {{"name", name}, {"namespace", j.ns}, {"labels", Labels(j, role)}, {"ownerReferences", OwnerRefs(j)}};
}

Json FieldEnv(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

// A pod from the job's template with role `role` (rank >= 0 for a rank).
Json PodFromTemplate(const JobRef& j, const api::TrainingJobSpec& spec, const std::string& role, int rank,
                     const std::string& coordinator_url) {
  const Json& tpl = *spec.pod_template;
  Json meta = tpl.contains("metadata") && tpl["metadata"].is_object() ? tpl["metadata"] : Json::object();
  Json labels = meta.contains("labels") && meta["labels"].is_object() ? meta["labels"] : Json::object();
  const Json ours_labels = Labels(j, role);
  for (const auto& [k, v] : ours_labels.items()) labels[k] = v;
  if (rank >= 0) labels[kRankLabel] = std::to_string(rank);
  Json metadata = {{"namespace", j.ns}, {"labels", labels}, {"ownerReferences", OwnerRefs(j)}};
  if (rank >= 0) {
    metadata["name"] = RankPodName(j.name, rank);
  } else {
    metadata["generateName"] = j.name + "-spare-";
  }
  if (meta.contains("annotations") && meta["annotations"].is_object()) metadata["annotations"] = meta["annotations"];

  Json env = Json::array(
      {{{"name", api::kEnvCoordinator}, {"value", coordinator_url.empty() ? CoordinatorUrl(j) : coordinator_url}},
       {{"name", api::kEnvRole}, {"value", role}}});
  if (rank >= 0) env.push_back({{"name", api::kEnvRank}, {"value", std::to_string(rank)}});
  env.push_back({{"name", api::kEnvWorldSize}, {"value", std::to_string(spec.replicas)}});
  env.push_back(FieldEnv(api::kEnvPodName, "metadata.name"));
  env.push_back(FieldEnv(api::kEnvPodUid, "metadata.uid"));
  // Every variable the operator sets for some role (a spare has no rank until it takes one).
  const std::set<std::string> ours = {api::kEnvCoordinator, api::kEnvRole,    api::kEnvRank,
                                      api::kEnvWorldSize,   api::kEnvPodName, api::kEnvPodUid};

  Json pod_spec = tpl["spec"];
  pod_spec["restartPolicy"] = "Never";
  for (Json& c : pod_spec["containers"]) {
    Json merged = Json::array();
    // The operator's values win over a template's own of the same name.
    if (c.contains("env") && c["env"].is_array()) {
      for (const Json& e : c["env"]) {
        if (!(e.is_object() && e.contains("name") && e["name"].is_string() && ours.count(e["name"].get<std::string>())))
          merged.push_back(e);
      }
    }
    for (const Json& e : env) merged.push_back(e);
    AddMissingEnv(merged, DetectionEnv(spec.detection));
    c["env"] = merged;
  }
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", pod_spec}};
}

}  // namespace

std::string CoordinatorName(const std::string& job) { return job + "-coordinator"; }
std::string CoordinatorStateName(const std::string& job) { return job + "-coordinator-state"; }
std::string RankPodName(const std::string& job, int rank) { return job + "-rank-" + std::to_string(rank); }
std::string RankDisruptionBudgetName(const std::string& job) { return job + "-ranks"; }
std::string CoordinatorUrl(const JobRef& job) {
  return "http://" + CoordinatorName(job.name) + "." + job.ns + ".svc:" + std::to_string(kCoordinatorPort);
}
std::string CoordinatorPodIpUrl(const std::string& ip) {
  const std::string host = ip.find(':') != std::string::npos ? "[" + ip + "]" : ip;
  return "http://" + host + ":" + std::to_string(kCoordinatorPort);
}

Json DetectionEnv(const api::DetectionSpec& d) {
  auto seconds = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s);
    return std::string(buf);
  };
  return Json::array({{{"name", api::kEnvHeartbeatInterval}, {"value", seconds(d.heartbeat_interval_ms / 1000.0)}},
                      {{"name", api::kEnvHangTimeout}, {"value", std::to_string(d.hang_timeout_seconds)}}});
}

void AddMissingEnv(Json& env, const Json& add) {
  std::set<std::string> have;
  for (const Json& e : env) {
    if (e.is_object() && e.contains("name") && e["name"].is_string()) have.insert(e["name"].get<std::string>());
  }
  for (const Json& e : add) {
    if (!have.count(e["name"].get<std::string>())) env.push_back(e);
  }
}

Json CoordinatorArgs(const JobRef& job, const api::TrainingJobSpec& spec, const TrainingJobSettings& settings) {
  // Without --advertise-url the coordinator would give its spares http://127.0.0.1:8470.
  const std::string advertise = settings.coordinator_address == CoordinatorAddress::kPodIp
                                    ? "http://$(POD_IP):" + std::to_string(kCoordinatorPort)
                                    : CoordinatorUrl(job);
  Json args = Json::array({"--job", job.name, "--world-size", std::to_string(spec.replicas), "--listen",
                           "0.0.0.0:" + std::to_string(kCoordinatorPort), "--kube", "--namespace", job.ns, "--spares",
                           std::to_string(spec.spares), "--spare-pod-template",
                           std::string(kCoordinatorConfigDir) + "/" + kSparePodKey, "--state-configmap",
                           CoordinatorStateName(job.name), "--fence", "kube", "--pid-check", "off"});
  args.insert(args.begin() + 6, {"--advertise-url", advertise});  // after --listen
  args.push_back("--heartbeat-timeout");
  args.push_back(std::to_string(spec.detection.heartbeat_timeout_ms) + "ms");
  // A Kubeflow job's rank pods are its Job's: a dead container restarts in place and
  // its process comes back as a spare; deleting the pod would spend a backoffLimit failure.
  if (spec.train_job_ref || spec.pytorch_job_ref) args.push_back("--keep-restarted-pods");
  return args;
}

Json RenderCoordinatorServiceAccount(const JobRef& job) {
  return {{"apiVersion", "v1"},
          {"kind", "ServiceAccount"},
          {"metadata", Metadata(job, CoordinatorName(job.name), kRoleCoordinator)}};
}

Json RenderCoordinatorRoleBinding(const JobRef& job, const TrainingJobSettings& settings) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "RoleBinding"},
          {"metadata", Metadata(job, CoordinatorName(job.name), kRoleCoordinator)},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"},
            {"kind", "ClusterRole"},
            {"name", settings.coordinator_cluster_role}}},
          {"subjects",
           Json::array({{{"kind", "ServiceAccount"}, {"name", CoordinatorName(job.name)}, {"namespace", job.ns}}})}};
}

Json RenderSparePod(const JobRef& job, const api::TrainingJobSpec& spec) {
  return PodFromTemplate(job, spec, kRoleSpare, -1, "");
}

Json RenderCoordinatorStateConfigMap(const JobRef& job) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", Metadata(job, CoordinatorStateName(job.name), kRoleCoordinator)}};
}

Json RenderCoordinatorConfigMap(const JobRef& job, const api::TrainingJobSpec& spec) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", Metadata(job, CoordinatorName(job.name), kRoleCoordinator)},
          {"data", {{kSparePodKey, RenderSparePod(job, spec).dump(2)}}}};
}

Json RenderCoordinatorPod(const JobRef& job, const api::TrainingJobSpec& spec, const TrainingJobSettings& settings) {
  const std::string name = CoordinatorName(job.name);
  Json container = {
      {"name", "coordinator"},
      {"image", settings.coordinator_image},
      {"command", Json::array({"lockstep-coordinator"})},
      {"args", CoordinatorArgs(job, spec, settings)},
      {"ports", Json::array({{{"name", "http"}, {"containerPort", kCoordinatorPort}, {"protocol", "TCP"}}})},
      {"readinessProbe", {{"httpGet", {{"path", "/readyz"}, {"port", kCoordinatorPort}}}, {"periodSeconds", 5}}},
      {"resources", {{"requests", {{"cpu", "50m"}, {"memory", "64Mi"}}}}},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", {{"drop", Json::array({"ALL"})}}}}},
      {"volumeMounts",
       Json::array({{{"name", "spare-pod"}, {"mountPath", kCoordinatorConfigDir}, {"readOnly", true}}})}};
  if (settings.coordinator_address == CoordinatorAddress::kPodIp) {  // $(POD_IP) in --advertise-url
    container["env"] = Json::array({FieldEnv("POD_IP", "status.podIP")});
  }
  // Not on a node with one of the job's ranks (rank 0 included), where a node
  // failure would take the coordinator down with the rank it must move.
  Json anti = {
      {"preferredDuringSchedulingIgnoredDuringExecution",
       Json::array({{{"weight", 100},
                     {"podAffinityTerm",
                      {{"labelSelector",
                        {{"matchLabels", {{kJobLabel, job.name}}},
                         {"matchExpressions", Json::array({{{"key", kRoleLabel},
                                                            {"operator", "In"},
                                                            {"values", Json::array({kRoleRank, kRoleSpare})}}})}}},
                       {"topologyKey", "kubernetes.io/hostname"}}}}})}};
  Json pod_spec = {{"serviceAccountName", name},
                   {"restartPolicy", "Always"},
                   {"securityContext", {{"seccompProfile", {{"type", "RuntimeDefault"}}}}},
                   {"affinity", {{"podAntiAffinity", anti}}},
                   {"containers", Json::array({container})},
                   {"volumes", Json::array({{{"name", "spare-pod"}, {"configMap", {{"name", name}}}}})}};
  return {
      {"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", Metadata(job, name, kRoleCoordinator)}, {"spec", pod_spec}};
}

Json RenderCoordinatorService(const JobRef& job) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", Metadata(job, CoordinatorName(job.name), kRoleCoordinator)},
          {"spec",
           {{"selector", {{kJobLabel, job.name}, {kRoleLabel, kRoleCoordinator}}},
            {"ports", Json::array({{{"name", "http"},
                                    {"port", kCoordinatorPort},
                                    {"targetPort", kCoordinatorPort},
                                    {"protocol", "TCP"}}})}}}};
}

Json RenderRankPod(const JobRef& job, const api::TrainingJobSpec& spec, int rank, const std::string& coordinator_url) {
  return PodFromTemplate(job, spec, kRoleRank, rank, coordinator_url);
}

Json RenderRankDisruptionBudget(const JobRef& job) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "PodDisruptionBudget"},
          {"metadata", Metadata(job, RankDisruptionBudgetName(job.name), "")},
          {"spec",
           {{"selector", {{"matchLabels", {{kJobLabel, job.name}, {kRoleLabel, kRoleRank}}}}}, {"maxUnavailable", 0}}}};
}

bool IsDeleting(const Json& pod) { return kube::FindPath(pod, {"metadata", "deletionTimestamp"}) != nullptr; }
std::string PodRole(const Json& pod) { return kube::GetString(pod, {"metadata", "labels", kRoleLabel}); }
std::string PodPhase(const Json& pod) { return kube::GetString(pod, {"status", "phase"}); }

int PodRank(const Json& pod) {
  const std::string s = kube::GetString(pod, {"metadata", "labels", kRankLabel});
  int v = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return -1;
  return v;
}

}  // namespace lockstep::op
