#include "lockstep/operator/agent_objects.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>

#include "lockstep/operator/selector.h"

namespace lockstep::op {
namespace {

constexpr char kConfigKey[] = "agent.yaml";
constexpr char kConfigDir[] = "/etc/lockstep";
constexpr char kProbeKeyDir[] = "/etc/lockstep/probe-key";

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

std::string AgentObjectName(const std::string& policy_name) { return "lockstep-agent-" + policy_name; }

std::string StableHash(const std::string& data) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string RenderAgentConfig(const PolicyRef& policy, const PolicySpec& spec, const OperatorSettings& s) {
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "policy" << YAML::Value << policy.name;
  y << YAML::Key << "nodeName" << YAML::Value << "";
  y << YAML::Key << "probe" << YAML::Value << YAML::BeginMap
    << YAML::Key << "port" << YAML::Value << spec.probe.port
    << YAML::Key << "intervalMs" << YAML::Value << spec.probe.interval_ms
    << YAML::Key << "peersPerNode" << YAML::Value << spec.probe.peers_per_node
    << YAML::Key << "missThreshold" << YAML::Value << spec.probe.miss_threshold << YAML::EndMap;
  y << YAML::Key << "clockSync" << YAML::Value << YAML::BeginMap
    << YAML::Key << "enabled" << YAML::Value << spec.clock_sync.enabled
    << YAML::Key << "windowSeconds" << YAML::Value << spec.clock_sync.window_seconds
    << YAML::Key << "disciplineHostClock" << YAML::Value << spec.clock_sync.discipline_host_clock
    << YAML::Key << "maxErrorBoundNs" << YAML::Value << spec.clock_sync.max_error_bound_ns
    << YAML::Key << "asymmetryAllowanceNs" << YAML::Value << spec.clock_sync.asymmetry_allowance_ns << YAML::EndMap;
  y << YAML::Key << "failover" << YAML::Value << YAML::BeginMap
    << YAML::Key << "enabled" << YAML::Value << spec.failover.enabled
    << YAML::Key << "readmitAfterSeconds" << YAML::Value << spec.failover.readmit_after_seconds
    << YAML::Key << "maxHoldDownSeconds" << YAML::Value << spec.failover.max_hold_down_seconds << YAML::EndMap;
  y << YAML::Key << "flapAlertPerHour" << YAML::Value << spec.flap_alert_per_hour;
  y << YAML::Key << "loadBalancing" << YAML::Value << spec.load_balancing;
  y << YAML::Key << "probeKeyFile" << YAML::Value << std::string(kProbeKeyDir) + "/key";
  y << YAML::Key << "healthAddr" << YAML::Value << "0.0.0.0:" + std::to_string(s.agent_health_port);
  y << YAML::Key << "timeApiAddr" << YAML::Value << "127.0.0.1:" + std::to_string(s.agent_health_port + 1);
  y << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

Json RenderAgentConfigMap(const PolicyRef& policy, const PolicySpec& spec, const OperatorSettings& s) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", Metadata(policy, s)},
          {"data", {{kConfigKey, RenderAgentConfig(policy, spec, s)}}}};
}

Json RenderAgentDaemonSet(const PolicyRef& policy, const PolicySpec& spec, const OperatorSettings& s) {
  const std::string name = AgentObjectName(policy.name);
  // No capability by default: probes use kernel software timestamps on an
  // unprivileged UDP port. SYS_TIME only to discipline the host clock;
  // NET_ADMIN comes back with fabric failover (routes), not before.
  Json caps = {{"drop", Json::array({"ALL"})}};
  if (spec.clock_sync.discipline_host_clock) caps["add"] = Json::array({"SYS_TIME"});
  const int port = s.agent_health_port;
  Json container = {
      {"name", "agent"},
      {"image", s.agent_image.empty() ? spec.agent.image : s.agent_image},
      {"imagePullPolicy", spec.agent.image_pull_policy},
      {"args", Json::array({std::string("--config=") + kConfigDir + "/" + kConfigKey, "--node-name=$(NODE_NAME)"})},
      {"env", Json::array({{{"name", "NODE_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}}})},
      {"ports", Json::array({{{"name", "health"}, {"containerPort", port}, {"protocol", "TCP"}},
                             {{"name", "probe"}, {"containerPort", spec.probe.port}, {"protocol", "UDP"}}})},
      {"livenessProbe", {{"httpGet", {{"path", "/healthz"}, {"port", port}}}, {"periodSeconds", 10}}},
      {"readinessProbe", {{"httpGet", {{"path", "/readyz"}, {"port", port}}}, {"periodSeconds", 5}}},
      {"resources", spec.agent.resources},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", caps}}},
      {"volumeMounts", Json::array({{{"name", "config"}, {"mountPath", kConfigDir}, {"readOnly", true}},
                                    {{"name", "probe-key"}, {"mountPath", kProbeKeyDir}, {"readOnly", true}}})}};
  Json pod_spec = {
      {"serviceAccountName", s.agent_service_account},
      {"hostNetwork", true},
      {"dnsPolicy", "ClusterFirstWithHostNet"},
      {"securityContext", {{"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"priorityClassName", spec.agent.priority_class_name},
      {"tolerations", spec.tolerations},
      {"containers", Json::array({container})},
      {"volumes", Json::array({{{"name", "config"}, {"configMap", {{"name", name}}}},
                               {{"name", "probe-key"}, {"secret", {{"secretName", s.probe_key_secret}}}}})}};
  if (Json affinity = SelectorToNodeAffinity(spec.node_selector); !affinity.is_null()) pod_spec["affinity"] = affinity;
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
