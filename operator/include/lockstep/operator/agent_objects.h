// The node agent's objects for one FabricPolicy: its config file, the
// ConfigMap that carries it and the DaemonSet that runs it. Pure: policy in,
// objects (ready for server-side apply) out.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/api/defaults.h"
#include "lockstep/common/hash.h"  // StableHash, for the config hash
#include "lockstep/operator/policy_spec.h"

namespace lockstep::op {

// Operator-wide settings from flags.
struct OperatorSettings {
  std::string namespace_name = "lockstep-system";     // where agent objects live
  std::string agent_service_account = "lockstep-agent";
  std::string agent_image;                             // overrides the policy default when set
  std::string probe_key_secret = "lockstep-probe-key";
  int agent_health_port = api::kHealthPort;
};

// Identity of the owning policy (for names, labels and ownerReferences).
struct PolicyRef {
  std::string name;
  std::string uid;
};

std::string AgentObjectName(const std::string& policy_name);  // "lockstep-agent-<policy>"

// agent.yaml as the agent reads it: api::AgentConfigForPolicy rendered by
// api::RenderAgentConfigYaml (the agent parses it with api::ParseAgentConfig).
std::string RenderAgentConfig(const PolicyRef& policy, const PolicySpec& spec, const OperatorSettings& s);

Json RenderAgentConfigMap(const PolicyRef& policy, const PolicySpec& spec, const OperatorSettings& s);

// The DaemonSet. Its pod template carries a hash of the config so that a config
// change rolls the agents.
Json RenderAgentDaemonSet(const PolicyRef& policy, const PolicySpec& spec, const OperatorSettings& s);

}  // namespace lockstep::op
