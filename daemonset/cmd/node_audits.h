// The fleet audit in `lockstep-agent run` (Kubernetes mode): a
// NodeAuditRunner for this node, its checks on the sysfs/procfs root in
// $LOCKSTEP_AUDIT_ROOT (default /; tests point it at a fake tree), NVML as
// the GPU health uses it ($LOCKSTEP_NVML_LIBRARY) unless gpu.mode is
// Disabled, and the rails of agent.yaml's fabric.rails.
#pragma once

#include <memory>

#include "lockstep/agent/audit/node_audit_runner.h"
#include "lockstep/api/agent_config.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::agent {

inline constexpr char kAuditRootEnv[] = "LOCKSTEP_AUDIT_ROOT";

// Started; REQUIRES: api and registry outlive it.
std::unique_ptr<audit::NodeAuditRunner> StartNodeAudits(kube::KubeApi& api, const api::AgentConfig& config,
                                                        metrics::Registry& registry);

}  // namespace lockstep::agent
