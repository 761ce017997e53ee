// AgentConfig: the node agent's configuration. The type, its defaults, the
// agent.yaml parser and the emitter the operator uses live in the typed
// contract (lockstep/api/agent_config.h); this header adds what only the agent
// checks, after command-line flags were applied. Pure; thread-compatible.
#pragma once

#include "lockstep/api/agent_config.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

using api::AgentConfig;
using api::HostPort;
using api::ParseAgentConfig;
using api::ParseHostPort;
using api::ParsePeers;
using api::PeerConfig;

// Checks what only holds after flags were applied: a node name is set, the
// bind address is IPv4, peer names are unique and do not collide on the wire.
Status ValidateAgentConfig(const AgentConfig& config);

}  // namespace lockstep::agent
