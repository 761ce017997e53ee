// Peer discovery from FabricHealth objects. Pure; thread-compatible.
//
// Every agent publishes its probe endpoints in its FabricHealth
// (status.probeAddresses: ["10.0.0.1:7311"], one per rail). The agents of one
// FabricPolicy (label lockstep.dev/policy) find each other there:
//
//  - candidates: the other nodes of the policy that can be probed now: an
//    address from status.probeAddresses (the first, rail 0), or, for a node
//    whose agent has not published one (not started yet, or an older agent),
//    its Node's InternalIP and the policy's probe port (when the fallback is
//    on). A node whose lastReportTime is more than stale_after behind the
//    policy's median report time (the upper median, ours included) is left
//    out: its agent is gone. Staleness is relative so that an API outage,
//    which stops every report at once, does not empty the peer set, and
//    median-based so that a few agents with wrong wall clocks cannot.
//  - known: every node of the policy (the sender filter accepts them; port 0
//    when no address is known, so they are probed back where they send from).
//  - host_addresses: the fabric host address (status.hostAddress) of every
//    other node of the policy that publishes a valid one (agents with
//    fabric.rails do); fabric failover probes and answers these.
#pragma once

#include "lockstep/api/defaults.h"
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/agent/runtime/clock_sync_service.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::agent {

inline constexpr char kPolicyLabel[] = "lockstep.dev/policy";

struct DirectoryOptions {
  std::string self;    // our node name
  std::string policy;  // our FabricPolicy
  int probe_port = api::kProbePort;  // the policy's probe.port, for the Node-address fallback
  bool node_address_fallback = true;
  std::chrono::seconds stale_after{90};
};

struct PeerDirectory {
  std::vector<PeerTarget> candidates;  // sorted by name
  std::vector<PeerTarget> known;       // sorted by name
  // Candidates that need their Node's InternalIP (fallback on, no
  // probeAddresses, not in the `node_addresses` given).
  std::vector<std::string> need_node_address;
  std::map<std::string, std::string> host_addresses;  // node name -> IPv4
};

// `healths`: FabricHealth objects (any policy; others are ignored).
// `node_addresses`: node name -> InternalIP for the fallback.
PeerDirectory BuildPeerDirectory(const std::vector<kube::Json>& healths,
                                 const std::map<std::string, std::string>& node_addresses,
                                 const DirectoryOptions& options);

// "a.b.c.d:port" with port 1..65535.
Result<Endpoint> ParseProbeAddress(const std::string& text);

// The Node's first IPv4 InternalIP, if any.
std::optional<std::string> NodeInternalIp(const kube::Json& node);

}  // namespace lockstep::agent
