// Builds fabric failover for `lockstep-agent run`: discovers the rails and
// the host address, opens the probe socket and the netlink actuator, and
// hands them to a FabricAgent (lockstep/agent/app/fabric_agent.h).
#pragma once

#include <memory>

#include "lockstep/agent/app/fabric_agent.h"
#include "lockstep/agent/clock_sync_service.h"

namespace lockstep::agent {

// nullptr when agent.yaml has no fabric.rails. Errors are
// configuration or environment problems the caller reports and exits on.
// `clock` may be null (clock sync disabled): probes then carry no one-way delay.
// `kubernetes`: peers come from discovery (FabricService::SetPeers), not agent.yaml.
Result<std::unique_ptr<FabricAgent>> BuildFabricAgent(const AgentConfig& config, const ProbeKey& key,
                                                      const ClockSyncService* clock, metrics::Registry& registry,
                                                      uint64_t seed, bool kubernetes);

// Logs what failover covers (RDMA devices present or not) and, with an
// agent, its rails, host address and peers; without, that it is off.
void LogFabricStart(const AgentConfig& config, const FabricAgent* agent);

}  // namespace lockstep::agent
