// The fleet audit in `lockstep-agent run` (Kubernetes mode): a
// NodeAuditRunner for this node, its checks on the sysfs/procfs root in
// $LOCKSTEP_AUDIT_ROOT (default /; tests point it at a fake tree), NVML as
// the GPU health uses it ($LOCKSTEP_NVML_LIBRARY) unless gpu.mode is
// Disabled, and the rails of agent.yaml's fabric.rails. With the fabric
// agent running (`fabric_status` set), the back-end network checks read its
// path state and one-way delays, and trace the routes out of every rail to
// every peer's host address (TTL-limited UDP, network_collector.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/agent/audit/node_audit_runner.h"
#include "lockstep/api/agent_config.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::agent {

inline constexpr char kAuditRootEnv[] = "LOCKSTEP_AUDIT_ROOT";

// Started; REQUIRES: api, registry and what `fabric_status` reads outlive it.
// `fabric_status`: the fabric agent's StatusJson (thread-safe); empty
// without fabric.rails (the network checks are then NotPresent).
// `api_server`: the server URL the agent talks to (frontend.api_dns resolves
// its name; an IP is NotPresent).
std::unique_ptr<audit::NodeAuditRunner> StartNodeAudits(kube::KubeApi& api, const api::AgentConfig& config,
                                                        metrics::Registry& registry,
                                                        std::function<nlohmann::json()> fabric_status = {},
                                                        const std::string& api_server = "");

}  // namespace lockstep::agent
