#include "node_audits.h"

#include <cstdlib>

#include "lockstep/agent/audit/audit_command.h"
#include "lockstep/common/clock.h"

namespace lockstep::agent {

std::unique_ptr<audit::NodeAuditRunner> StartNodeAudits(kube::KubeApi& api, const api::AgentConfig& config,
                                                        metrics::Registry& registry) {
  audit::CollectOptions collect;
  if (const char* root = std::getenv(kAuditRootEnv); root && *root) collect.root = root;
  collect.rails = config.fabric.rails;
  std::optional<gpu::NvmlOptions> nvml;
  if (config.gpu.mode != api::kGpuModeDisabled) nvml = gpu::NvmlOptionsFromEnv();
  auto run = [collect, nvml](const std::vector<std::string>& modules) -> Result<std::vector<lockstep::audit::Check>> {
    return audit::RunNodeChecks(collect, nvml, modules);
  };
  auto runner = std::make_unique<audit::NodeAuditRunner>(
      api, SystemClock::Instance(), run, audit::NodeAuditRunnerOptions{.node_name = config.node_name}, registry);
  runner->Start();
  return runner;
}

}  // namespace lockstep::agent
