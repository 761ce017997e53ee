// The `ip` commands that build a lab and keep its routes converged: pure
// functions of the topology and the link states (no I/O).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "netlab/state.h"
#include "netlab/topology.h"

namespace lockstep::netlab {

// `ip -batch` lines for one namespace. `cleanup` deletes objects that must not
// exist; it runs after `apply` and its errors (already gone) do not matter.
struct NsCommands {
  std::string ns;
  std::vector<std::string> apply, cleanup;
};

// Desired routes for every namespace (hosts, leaves, spines, in that order):
// host rail routes and per-rail tables; leaf and spine nexthops, ECMP groups
// over the spines that reach both leaves, and a /32 per host rail
// (`unreachable` once its link is down).
std::vector<NsCommands> ConvergeCommands(const Topology& t, const LabState& s);

// Root-namespace batches: create the namespaces, then the veth pairs.
std::vector<std::string> NetnsAddCommands(const Topology& t);
std::vector<std::string> VethCommands(const Topology& t);

// Per namespace: loopback up, addresses, links up, host source rules, and
// each host's address on its own interface of link kind `host_if_kind`
// ("dummy"; "ifb" where the kernel has no dummy driver).
std::vector<NsCommands> AddressCommands(const Topology& t, const std::string& host_if_kind = "dummy");

// sysctl name ("net.ipv4.ip_forward") -> value, in the order they are set.
using Sysctls = std::vector<std::pair<std::string, std::string>>;
Sysctls HostSysctls();
// kernel_has_seed: whether net.ipv4.fib_multipath_hash_seed exists (>= 6.11).
Sysctls RouterSysctls(const Topology& t, bool kernel_has_seed);

// A --silent failure: each end resolves the far end's IP to a MAC nobody has
// (on), or forgets that entry (off). Returns (namespace, batch line) per end.
// `one_way` "up" poisons only the lower end's entry (what it sends is lost,
// the other direction flows), "down" only the upper end's; "" both. Off
// always forgets both.
std::vector<std::pair<std::string, std::string>> SilentCommands(const Link& lk, bool on,
                                                                const std::string& one_way = "");

}  // namespace lockstep::netlab
