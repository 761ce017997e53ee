// Rail discovery: what the kernel knows about this host's rails and its host
// address, read once at start (libnl-route-3 for routes, getifaddrs for
// addresses). Thread-safe (no shared state).
#pragma once

#include <string>
#include <vector>

#include "lockstep/agent/fabric_setup.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

// The first IPv4 address on `interface`. NotFound names the interface and
// says to set fabric.hostAddress or fix fabric.hostInterface.
Result<uint32_t> InterfaceIpv4(const std::string& interface);

// Each named rail with its ifindex, IPv4 address and gateway: the gateway of
// the main-table route on that interface whose prefix covers the rail's own
// address (its subnet route), else of the first main-table route with a
// gateway on it (an ECMP nexthop), keeping its onlink flag. Errors name the
// rail: no such interface, no IPv4 address, no route with a gateway.
Result<std::vector<RailInfo>> DiscoverRails(const std::vector<std::string>& names);

}  // namespace lockstep::agent
