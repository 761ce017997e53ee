// FabricSetup: what fabric failover on this host runs on, and the pure
// mapping between the fabric core's paths and this host's routes.
//
//  - rails: agent.yaml fabric.rails, each with what the kernel said at start
//    (ifindex, address, the gateway of its subnet route);
//  - host_address: where this host's applications live (fabric.hostAddress,
//    else the address of fabric.hostInterface);
//  - peers: every configured peer with a hostAddress (own node excluded).
// A pin of peer P to path (rail r) is the route
//   <P host>/32 via <gw of rail r> dev <rail r> [onlink] src <host> proto 211 rto_min 10ms
// and an owned route found at start maps back to a pin when it names a known
// peer's host address and a rail's interface (anything else is not ours to
// keep: the start reconcile drops it).
// Plain values and pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/agent/config.h"
#include "lockstep/agent/node_id.h"
#include "lockstep/agent/route.h"
#include "lockstep/common/result.h"
#include "lockstep/fabric/path.h"

namespace lockstep::agent {

struct RailInfo {
  std::string name;      // interface, e.g. "rail1"
  int ifindex = 0;
  uint32_t address = 0;  // its IPv4 address (host order); 0: none
  Nexthop gateway;       // how pins on this rail leave (gateway, interface, onlink)
  bool operator==(const RailInfo&) const = default;
};

struct FabricPeer {
  std::string name;
  NodeId id = 0;
  uint32_t host_address = 0;  // host order
  bool operator==(const FabricPeer&) const = default;
};

struct FabricSetup {
  uint32_t host_address = 0;
  std::vector<RailInfo> rails;  // rail order: rails[r] is rail r
  std::vector<FabricPeer> peers;
};

// The peers fabric failover watches: config.peers with a hostAddress, own
// node skipped. Errors (InvalidArgument) name the peer: a host address used
// twice, or equal to this host's.
Result<std::vector<FabricPeer>> FabricPeers(const AgentConfig& config, uint32_t own_host_address);

// The route that pins `path.peer` to rail `path.rail`. nullopt when the peer
// or rail is unknown.
std::optional<OwnedRoute> PinRoute(const FabricSetup& setup, const fabric::PathKey& path);

// The pin an owned route stands for (peer name, path), or nullopt when it is
// not a /32 to a known peer's host address on one of our rails.
std::optional<std::pair<std::string, fabric::PathKey>> PinFromRoute(const FabricSetup& setup,
                                                                     const OwnedRoute& route);

// The routes for a set of pins (skipping any that PinRoute cannot map).
std::vector<OwnedRoute> PinRoutes(const FabricSetup& setup, const std::vector<fabric::PathKey>& pins);

}  // namespace lockstep::agent
