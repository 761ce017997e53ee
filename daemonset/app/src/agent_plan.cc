#include "lockstep/agent/app/agent_plan.h"

#include "lockstep/agent/node_id.h"
#include "lockstep/agent/node_signer.h"
#include "lockstep/agent/peer_selection.h"

namespace lockstep::agent {

Result<AgentMode> ChooseAgentMode(bool explicit_credentials, bool has_static_peers, bool in_pod) {
  if (explicit_credentials) {
    if (has_static_peers) {
      return InvalidArgument("peers: (or --peers-file) and Kubernetes discovery (--kubeconfig/--server) are "
                             "exclusive; drop one");
    }
    return AgentMode::kKubernetesExplicit;
  }
  if (has_static_peers || !in_pod) return AgentMode::kStandalone;
  return AgentMode::kKubernetesInCluster;
}

Result<std::vector<PeerTarget>> ResolvePeers(const AgentConfig& config) {
  std::vector<PeerTarget> known;
  for (const PeerConfig& p : config.peers) {
    if (p.name == config.node_name) continue;
    int port = p.port ? p.port : config.probe.port;
    if (port == 0) {
      return InvalidArgument("peer \"" + p.name + "\" has no port and probe.port is 0; give it address IP:PORT");
    }
    auto ep = Endpoint::Parse(p.address, port);
    if (!ep.ok()) return InvalidArgument("peer \"" + p.name + "\": " + ep.error().message);
    if (!p.public_key.empty()) {
      if (auto k = NodePublicKey::FromBase64(p.public_key); !k.ok()) {
        return InvalidArgument("peer \"" + p.name + "\" publicKey: " + k.error().message);
      }
    }
    known.push_back({p.name, NodeIdFromName(p.name), *ep, p.public_key});
  }
  return known;
}

ClockSyncOptions MakeClockSyncOptions(const AgentConfig& config, const std::vector<PeerTarget>& known,
                                      uint64_t seed) {
  ClockSyncOptions opts;
  opts.self_name = config.node_name;
  std::vector<PeerConfig> chosen = SelectPeers(config.peers, config.node_name, config.probe.peers_per_node, seed);
  for (const PeerConfig& p : chosen) {
    for (const PeerTarget& t : known) {
      if (t.name == p.name) opts.selected.push_back(t);
    }
  }
  opts.known = known;
  opts.interval = std::chrono::milliseconds(config.probe.interval_ms);
  opts.window = std::chrono::seconds(config.clock_sync.window_seconds);
  opts.max_error_bound_ns = config.clock_sync.max_error_bound_ns;
  opts.asymmetry_allowance_ns = config.clock_sync.asymmetry_allowance_ns;
  opts.seed = seed;
  return opts;
}

}  // namespace lockstep::agent
