// RDMA device listing (rdma-core's ibv_get_device_list), so the agent can
// say at start whether RDMA devices are present: fabric failover steers
// kernel-routed traffic only; RDMA queue pairs are not moved yet.
// Thread-safe.
#pragma once

#include <string>
#include <vector>

namespace lockstep::agent {

// Names of the RDMA devices on this host (empty when none, or when
// libibverbs finds no provider).
std::vector<std::string> RdmaDeviceNames();

}  // namespace lockstep::agent
