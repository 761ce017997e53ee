// What the agent tells the NCCL plugins (NcclEndpoint's state source): the
// fabric service's path verdicts and this node's fabric time, read from the
// agent's thread-safe views (FabricService::StatusJson, the time source).
// Thread-safe (the returned function is called from the endpoint's thread).
#pragma once

#include "lockstep/agent/app/agent.h"
#include "lockstep/agent/ports/node_clock.h"
#include "lockstep/agent/runtime/nccl_endpoint.h"

namespace lockstep::agent {

// REQUIRES: agent and node_clock outlive the function. `raw_now` reads
// CLOCK_MONOTONIC_RAW (the plugins' clock); the offset handed out is fabric
// time at a node-clock reading taken together with it, less it.
NcclEndpoint::StateSource NcclStateSource(Agent& agent, const NodeClock& node_clock, std::function<int64_t()> raw_now);

}  // namespace lockstep::agent
