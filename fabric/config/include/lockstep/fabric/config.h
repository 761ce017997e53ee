// The bridge from the typed contract to the decision core: the agent's
// failover settings (agent.yaml, rendered by the operator from a
// FabricPolicy) become FabricOptions. Separate target
// (lockstep_fabric_config) so lockstep_fabric itself links only
// lockstep_base. Pure; thread-safe.
#pragma once

#include "lockstep/api/agent_config.h"
#include "lockstep/fabric/latency_sla.h"
#include "lockstep/fabric/options.h"

namespace lockstep::fabric {

// probe.pathIntervalMs -> probe_interval and reply_timeout (AckTimeout: a
// probe is missed when the peer's next packet, one jittered gap later, has
// not acknowledged it), probe.missThreshold -> miss_threshold,
// failover.* -> failover_enabled, readmit_after, max_hold_down,
// flapAlertPerHour -> flap_alert_per_hour; the rest keep their defaults.
// InvalidArgument (naming the agent.yaml key) when the result is not valid.
Result<FabricOptions> FabricOptionsFromConfig(const api::AgentConfig& config);

// latency.oneWayDelayP99Micros -> all_rails, latency.rails[] -> per_rail (by
// the rail's index in fabric.rails; a name not there is ignored: the parser
// rejects it), latency.minSamples -> min_samples.
LatencySlaOptions LatencySlaOptionsFromConfig(const api::AgentConfig& config);

}  // namespace lockstep::fabric
