#include "lockstep/agent/config.h"

#include <set>
#include <unordered_map>

#include "lockstep/agent/node_id.h"

namespace lockstep::agent {

Status ValidateAgentConfig(const AgentConfig& c) {
  if (c.node_name.empty()) {
    return InvalidArgument("nodeName is empty: set it in the config, or pass --node-name (in Kubernetes: "
                           "--node-name=$(NODE_NAME) from the downward API)");
  }
  if (!api::IsIpv4(c.bind_address)) {
    return InvalidArgument("--bind-address must be an IPv4 address (got \"" + c.bind_address + "\")");
  }
  std::unordered_map<NodeId, std::string> ids{{NodeIdFromName(c.node_name), c.node_name}};
  std::set<std::string> names{c.node_name};
  for (const PeerConfig& p : c.peers) {
    if (p.name == c.node_name) continue;  // a shared peer list may include this node
    if (!names.insert(p.name).second) return InvalidArgument("peers: duplicate peer name \"" + p.name + "\"");
    auto [it, fresh] = ids.emplace(NodeIdFromName(p.name), p.name);
    if (!fresh) {
      return InvalidArgument("peers: node names \"" + it->second + "\" and \"" + p.name +
                             "\" hash to the same probe id; rename one");
    }
  }
  return Status::Ok();
}

}  // namespace lockstep::agent
