#include "lockstep/agent/fabric_setup.h"

#include <map>

namespace lockstep::agent {

Result<std::vector<FabricPeer>> FabricPeers(const AgentConfig& config, uint32_t own_host_address) {
  std::vector<FabricPeer> out;
  std::map<uint32_t, std::string> owner;
  for (const PeerConfig& p : config.peers) {
    if (p.name == config.node_name || p.host_address.empty()) continue;
    auto addr = ParseIpv4(p.host_address);
    if (!addr.ok()) return InvalidArgument("peer \"" + p.name + "\": hostAddress: " + addr.error().message);
    if (*addr == own_host_address) {
      return InvalidArgument("peer \"" + p.name + "\": hostAddress " + p.host_address +
                             " is this host's own address; give each peer its own host address");
    }
    if (auto [it, fresh] = owner.emplace(*addr, p.name); !fresh) {
      return InvalidArgument("peers \"" + it->second + "\" and \"" + p.name + "\" share hostAddress " +
                             p.host_address + "; each host has its own");
    }
    out.push_back({p.name, NodeIdFromName(p.name), *addr});
  }
  return out;
}

std::optional<OwnedRoute> PinRoute(const FabricSetup& setup, const fabric::PathKey& path) {
  if (path.rail < 0 || path.rail >= static_cast<int>(setup.rails.size())) return std::nullopt;
  for (const FabricPeer& p : setup.peers) {
    if (p.name != path.peer) continue;
    OwnedRoute r;
    r.destination = {p.host_address, 32};
    r.nexthop = setup.rails[path.rail].gateway;
    r.source = setup.host_address;
    r.rto_min = kDefaultRtoMin;
    return r;
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, fabric::PathKey>> PinFromRoute(const FabricSetup& setup,
                                                                     const OwnedRoute& route) {
  if (route.destination.length != 32) return std::nullopt;
  for (const FabricPeer& p : setup.peers) {
    if (p.host_address != route.destination.address) continue;
    for (size_t r = 0; r < setup.rails.size(); ++r) {
      if (setup.rails[r].name == route.nexthop.interface) {
        return std::make_pair(p.name, fabric::PathKey{static_cast<int>(r), p.name, 0});
      }
    }
  }
  return std::nullopt;
}

std::vector<OwnedRoute> PinRoutes(const FabricSetup& setup, const std::vector<fabric::PathKey>& pins) {
  std::vector<OwnedRoute> out;
  for (const auto& path : pins) {
    if (auto r = PinRoute(setup, path)) out.push_back(*r);
  }
  return out;
}

}  // namespace lockstep::agent
