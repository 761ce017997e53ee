// The netlab topology: a pure function of the lab's parameters (see README.md,
// "Topology"). Serialized as topology.json, schema netlab/v1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"

namespace lockstep::netlab {

inline constexpr int kMaxHosts = 200, kMaxRails = 16, kMaxLeaves = 64, kMaxSpines = 64;

struct Params {
  int hosts = 8, rails = 2, leaves = 2, spines = 2;
};

// One end of a link: a node, its namespace, the interface there and its address.
struct Endpoint {
  std::string node, ns, ifname, ip;
};

// kind "host" (a = host rail, b = leaf) or "fabric" (a = leaf, b = spine).
struct Link {
  std::string name, kind;
  Endpoint a, b;
};

struct HostRail {
  int rail = 0;
  std::string ifname, ip, subnet, gateway, leaf, leaf_if, link;
};

// A host: its rails, and its host address `addr` (a /32 on the dummy
// interface `addr_if`, "host0") that the fabric advertises on every live rail
// link of the host; applications use it so traffic survives a rail.
struct Host {
  std::string name, ns;
  std::vector<HostRail> rails;
  std::string addr, addr_if;
};

struct Leaf {
  std::string name, ns, gateway;
};

struct Spine {
  std::string name, ns;
};

struct RailNet {
  int rail = 0;
  std::string subnet;
};

struct Topology {
  std::string schema = "netlab/v1";
  std::string name;
  int index = 0;
  std::string subnet;       // "10.77.0.0/16"
  std::string host_subnet;  // "10.77.200.0/24": the host addresses
  std::string layout;  // "striped" or "rail"
  std::string dir;     // the lab directory
  Params params;
  std::vector<RailNet> rails;
  std::vector<Host> hosts;
  std::vector<Leaf> leaves;
  std::vector<Spine> spines;
  std::vector<Link> links;
  int hash_policy = 3;
  int64_t hash_seed = 1;
};

// The leaf that rail r of host h attaches to.
int LeafOf(int h, int r, const Params& p, const std::string& layout);

// Checks the parameters (name, counts, layout) as `netlab up` does.
Status ValidateLab(const std::string& name, const Params& p, const std::string& layout);

// `up --miswire h2r0:l1`: host 2's rail 0 cabled to leaf l1 instead of its
// own (a cabling mistake: the addresses stay the rail's, the fabric routes to
// it where it is). InvalidArgument naming what is wrong in `spec`.
Status Miswire(Topology& t, const std::string& spec);

// Lab names are [a-z][a-z0-9]{0,9}, so namespace names stay short.
bool ValidLabName(const std::string& name);

// Parses a user-given subnet: must be a private IPv4 /16 written as its
// network address, e.g. "10.77.0.0/16".
Result<std::string> ParseLabSubnet(const std::string& subnet);

// "10.77" for "10.77.0.0/16": the two octets every address in the lab shares.
std::string SubnetPrefix(const std::string& subnet);

// Builds the topology (hash_policy/hash_seed keep their defaults).
Topology BuildTopology(const std::string& name, int index, const std::string& subnet, const Params& p,
                       const std::string& layout, const std::string& lab_dir);

// True for NAME-h<k>, NAME-l<k> and NAME-s<k>: the namespaces a lab may own.
bool IsLabNamespace(const std::string& lab, const std::string& ns);

// Every namespace: hosts, then leaves, then spines.
std::vector<std::string> AllNamespaces(const Topology& t);

const Link* FindLink(const Topology& t, const std::string& name);

// A link name, or a node name (all its links).
Result<std::vector<std::string>> ResolveLinks(const Topology& t, const std::string& what);

// The namespace of node `name` (host, leaf or spine).
Result<std::string> NodeNamespace(const Topology& t, const std::string& name);

struct RailRef {
  const Host* host;
  const HostRail* rail;
};

// "h3" (rail 0), "h3r1" or a rail's IP.
Result<RailRef> FindEndpoint(const Topology& t, const std::string& spec);

// "h3a" or a host address: the host whose host address that is.
Result<const Host*> FindHostAddr(const Topology& t, const std::string& spec);

nlohmann::ordered_json ToJson(const Topology& t);
Result<Topology> TopologyFromJson(const nlohmann::json& j);

}  // namespace lockstep::netlab
