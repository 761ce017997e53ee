#include "node_audits.h"

#include <cstdlib>

#include "lockstep/agent/audit/audit_command.h"
#include "lockstep/common/clock.h"

namespace lockstep::agent {

std::unique_ptr<audit::NodeAuditRunner> StartNodeAudits(kube::KubeApi& api, const api::AgentConfig& config,
                                                        metrics::Registry& registry,
                                                        std::function<nlohmann::json()> fabric_status,
                                                        const std::string& api_server) {
  audit::CollectOptions collect;
  collect.api_server = api_server;
  if (const char* root = std::getenv(kAuditRootEnv); root && *root) collect.root = root;
  collect.rails = config.fabric.rails;
  std::optional<gpu::NvmlOptions> nvml;
  if (config.gpu.mode != api::kGpuModeDisabled) nvml = gpu::NvmlOptionsFromEnv();
  // In a fleet: 8 peers per node (spread by the node's name), 4 source ports.
  audit::TraceOptions trace;
  trace.source_ports = 4;
  trace.max_targets = 8;
  trace.spread = config.node_name;
  auto run = [collect, nvml, fabric_status, trace](const std::vector<std::string>& modules) -> Result<std::vector<lockstep::audit::Check>> {
    audit::UdpRouteTracer tracer;
    nlohmann::json status;
    if (fabric_status) status = fabric_status();
    auto network = audit::CollectNetwork(fabric_status ? &status : nullptr, "fabric failover is off (no fabric.rails)",
                                         true, {}, tracer, trace);
    return audit::RunNodeChecks(collect, nvml, modules, std::move(network));
  };
  auto runner = std::make_unique<audit::NodeAuditRunner>(
      api, SystemClock::Instance(), run, audit::NodeAuditRunnerOptions{.node_name = config.node_name}, registry);
  runner->Start();
  return runner;
}

}  // namespace lockstep::agent
