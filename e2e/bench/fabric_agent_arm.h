// The fabric benchmark's agent arm: one lockstep-agent per host namespace,
// standalone (agent.yaml with fabric.rails [rail0, rail1] and every peer's
// host address), started before the workloads (once every path is up) and
// stopped after them. Its report: detection time (fault -> the first path
// declared down, from the agents' logs), time to the first pin, flap alerts,
// agent CPU (utime + stime over the agent's life), peak RSS and fabric probe
// bandwidth per node (probes sent + replies, 100 bytes each at the IP layer,
// from the agents' counters). Single-threaded.
#pragma once

#include <string>

#include "fabric_run.h"

namespace lockstep::bench::fabric {

// `agent`: the lockstep-agent binary; configs and logs go to
// LabInfo::log_prefix + "-agent-h<i>.{yaml,log}".
Arm MakeAgentArm(const std::string& agent, int paths_per_rail);

}  // namespace lockstep::bench::fabric
