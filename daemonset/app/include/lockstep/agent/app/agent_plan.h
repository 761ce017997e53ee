// The agent's start-up decisions, pure and testable (the `run` command only
// gathers inputs and builds adapters around them):
//  - ChooseAgentMode: Kubernetes (peer discovery, FabricHealth reports) or
//    standalone (static peers), from the flags, the config and the environment;
//  - ResolvePeers: static peers -> probe targets (own name skipped, ports
//    defaulted to probe.port);
//  - MakeClockSyncOptions: the clock-sync service's options, including which
//    peers to probe (SelectPeers, seeded).
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/agent/runtime/clock_sync_service.h"
#include "lockstep/agent/config.h"

namespace lockstep::agent {

enum class AgentMode {
  kStandalone,           // static peers (or none)
  kKubernetesExplicit,   // --kubeconfig / --server given
  kKubernetesInCluster,  // in a pod without static peers: the ServiceAccount
};

// explicit_credentials: --kubeconfig or --server given. in_pod:
// KUBERNETES_SERVICE_HOST is set. Static peers and explicit credentials are
// exclusive (an error says to drop one); static peers in a pod mean standalone.
Result<AgentMode> ChooseAgentMode(bool explicit_credentials, bool has_static_peers, bool in_pod);

// Probe targets for the static peers (config.peers), own node excluded.
// Errors name the peer and what to write instead.
Result<std::vector<PeerTarget>> ResolvePeers(const AgentConfig& config);

// The service's options: interval, window, bounds, seed, every known peer,
// and the probe subset (SelectPeers over config.peers with `seed`).
ClockSyncOptions MakeClockSyncOptions(const AgentConfig& config, const std::vector<PeerTarget>& known, uint64_t seed);

}  // namespace lockstep::agent
