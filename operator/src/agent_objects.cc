#include "lockstep/operator/agent_objects.h"

#include "lockstep/api/agent_config.h"
#include "lockstep/kube/label_selector.h"

namespace lockstep::op {
namespace {

constexpr const char* kConfigKey = api::kAgentConfigKey;
constexpr const char* kConfigDir = api::kAgentConfigDir;
constexpr const char* kProbeKeyDir = api::kProbeKeyDir;
// Where the agent serves the NCCL plugin's endpoint (its --nccl-socket
// default is /run/lockstep/nccl.sock) and where the init container sees the
// plugin's host directory.
constexpr const char* kNcclSocketDir = "/run/lockstep";
constexpr const char* kNcclPluginMountDir = "/host-nccl";

Json Labels(const PolicyRef& p) {
  return {{"app.kubernetes.io/name", "lockstep-agent"},
          {"app.kubernetes.io/instance", p.name},
          {"app.kubernetes.io/component", "agent"},
          {"app.kubernetes.io/managed-by", "lockstep-operator"},
          {"lockstep.dev/policy", p.name}};
}

Json OwnerRefs(const PolicyRef& p) {
  return Json::array({{{"apiVersion", "lockstep.dev/v1alpha1"},
                       {"kind", "FabricPolicy"},
                       {"name", p.name},
                       {"uid", p.uid},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}});
}

Json Metadata(const PolicyRef& p, const OperatorSettings& s) {
  return {{"name", AgentObjectName(p.name)},
          {"namespace", s.namespace_name},
          {"labels", Labels(p)},
          {"ownerReferences", OwnerRefs(p)}};
}

}  // namespace

std::string AgentObjectName(const std::string& policy_name) { return api::kAgentObjectPrefix + policy_name; }

std::string RenderAgentConfig(const PolicyRef& policy, const PolicySpec& spec, const OperatorSettings& s) {
  return api::RenderAgentConfigYaml(api::AgentConfigForPolicy(policy.name, spec, s.agent_health_port));
}

Json RenderAgentConfigMap(const PolicyRef& policy, const PolicySpec& spec, const OperatorSettings& s) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", Metadata(policy, s)},
          {"data", {{kConfigKey, RenderAgentConfig(policy, spec, s)}}}};
}

Json RenderAgentDaemonSet(const PolicyRef& policy, const PolicySpec& spec, const OperatorSettings& s) {
  const std::string name = AgentObjectName(policy.name);
  // Only the capabilities in use: probes use kernel software timestamps on
  // unprivileged UDP ports. NET_ADMIN while fabric failover is enabled: the
  // agent installs and deletes its own host routes (proto 211, rto_min) over
  // rtnetlink to steer a peer's traffic onto a healthy rail. SYS_TIME only to
  // discipline the host clock.
  Json caps = {{"drop", Json::array({"ALL"})}};
  Json add = Json::array();
  if (spec.failover.enabled) add.push_back("NET_ADMIN");
  if (spec.clock_sync.discipline_host_clock) add.push_back("SYS_TIME");
  if (!add.empty()) caps["add"] = add;
  const int port = s.agent_health_port;
  Json env = Json::array({{{"name", "NODE_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
                          {{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}}});
  if (spec.gpu.mode != api::kGpuModeDisabled) {
    // GPU health reads NVML: the NVIDIA container runtime (the GPU
    // Operator's default runtime) mounts the driver's libnvidia-ml.so.1 and
    // the device nodes into a container that asks for them this way, without
    // requesting (and so taking) a GPU, as DCGM Exporter does. Elsewhere the
    // variables do nothing and the agent says "no NVIDIA driver".
    env.push_back({{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}});
    env.push_back({{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "utility"}});
  }
  Json args = Json::array({std::string("--config=") + kConfigDir + "/" + kConfigKey, "--node-name=$(NODE_NAME)",
                           "--health-addr=$(POD_IP):" + std::to_string(port)});
  Json mounts = Json::array({{{"name", "config"}, {"mountPath", kConfigDir}, {"readOnly", true}},
                             {{"name", "probe-key"}, {"mountPath", kProbeKeyDir}, {"readOnly", true}}});
  Json volumes = Json::array({{{"name", "config"}, {"configMap", {{"name", name}}}},
                              {{"name", "probe-key"}, {"secret", {{"secretName", s.probe_key_secret}}}}});
  // The NCCL plugin's endpoint: the agent serves nccl.sock (0666) in a host
  // directory that training pods mount at the same path, so the plugin's
  // default LOCKSTEP_NCCL_AGENT_SOCKET finds it.
  const std::string& socket_dir = spec.agent.nccl_socket_host_path;
  if (socket_dir.empty()) {
    args.push_back("--nccl-socket=");
  } else {
    mounts.push_back({{"name", "nccl-socket"}, {"mountPath", kNcclSocketDir}});
    volumes.push_back({{"name", "nccl-socket"}, {"hostPath", {{"path", socket_dir}, {"type", "DirectoryOrCreate"}}}});
  }
  const std::string image = s.agent_image.empty() ? spec.agent.image : s.agent_image;
  Json container = {
      {"name", "agent"},
      {"image", image},
      {"imagePullPolicy", spec.agent.image_pull_policy},
      // Health endpoints on the pod IP only: with hostNetwork that is the node's
      // address, where the kubelet's httpGet probes (no host: the pod IP) and
      // Prometheus scrape; not on 0.0.0.0, so no other interface of the node
      // (fabric rails, other networks) exposes them.
      {"args", args},
      {"env", env},
      {"ports", Json::array({{{"name", "health"}, {"containerPort", port}, {"protocol", "TCP"}},
                             {{"name", "probe"}, {"containerPort", spec.probe.port}, {"protocol", "UDP"}}})},
      {"livenessProbe", {{"httpGet", {{"path", "/healthz"}, {"port", port}}}, {"periodSeconds", 10}}},
      {"readinessProbe", {{"httpGet", {{"path", "/readyz"}, {"port", port}}}, {"periodSeconds", 5}}},
      {"resources", api::ToJson(spec.agent.resources)},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", caps}}},
      {"volumeMounts", mounts}};
  Json pod_spec = {
      {"serviceAccountName", s.agent_service_account},
      {"hostNetwork", true},
      {"dnsPolicy", "ClusterFirstWithHostNet"},
      {"securityContext", {{"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"priorityClassName", spec.agent.priority_class_name},
      {"tolerations", api::ToJson(spec.tolerations)},
      {"containers", Json::array({container})},
      {"volumes", volumes}};
  // The NCCL network plugin: an init container of the agent image copies
  // libnccl-net-lockstep.so into the host directory training pods mount (the
  // image has no shell: the agent binary does the copy, atomically, so a
  // training process that has the old file loaded keeps it). Root without
  // capabilities: the hostPath directory is root's own.
  const std::string& plugin_dir = spec.agent.nccl_plugin_host_path;
  if (!plugin_dir.empty()) {
    Json init = {
        {"name", "install-nccl-plugin"},
        {"image", image},
        {"imagePullPolicy", spec.agent.image_pull_policy},
        {"args", Json::array({"install-nccl-plugin", std::string("--to=") + kNcclPluginMountDir})},
        {"resources", api::ToJson(spec.agent.resources)},
        {"securityContext",
         {{"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"capabilities", {{"drop", Json::array({"ALL"})}}}}},
        {"volumeMounts", Json::array({{{"name", "nccl-plugin"}, {"mountPath", kNcclPluginMountDir}}})}};
    pod_spec["initContainers"] = Json::array({init});
    pod_spec["volumes"].push_back(
        {{"name", "nccl-plugin"}, {"hostPath", {{"path", plugin_dir}, {"type", "DirectoryOrCreate"}}}});
  }
  if (auto sel = kube::LabelSelector::FromJson(api::ToJson(spec.node_selector)); sel.ok() && !sel->empty()) {
    pod_spec["affinity"] = sel->ToNodeAffinity();
  }
  Json selector_labels = {{"app.kubernetes.io/name", "lockstep-agent"}, {"lockstep.dev/policy", policy.name}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "DaemonSet"},
          {"metadata", Metadata(policy, s)},
          {"spec",
           {{"selector", {{"matchLabels", selector_labels}}},
            {"updateStrategy", {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", "10%"}}}}},
            {"template",
             {{"metadata",
               {{"labels", Labels(policy)},
                {"annotations", {{"lockstep.dev/config-hash", StableHash(RenderAgentConfig(policy, spec, s))}}}}},
              {"spec", pod_spec}}}}}};
}

}  // namespace lockstep::op
