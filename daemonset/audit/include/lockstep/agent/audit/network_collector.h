// The back-end network facts of the fleet audit (adapters): the fabric
// agent's path state and one-way delays, read from its status (GET /fabric,
// FabricAgent::StatusJson: no new sockets, the prober's own numbers), and
// TTL-limited route traces out of each rail to each peer (the RouteTracer
// port; UdpRouteTracer sends UDP with IP_TTL 1, 2, ... from the rail and
// reads the ICMP time-exceeded / port-unreachable answers from the socket's
// error queue, IP_RECVERR, as tracepath does: no raw socket). Each trace is
// repeated over several UDP source ports, so ECMP spreads them over the
// spines. The judgement is the pure audit/network_checks.h.
//
// Thread-compatible: plain functions; a tracer is used by one caller.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/audit/network_facts.h"

namespace lockstep::agent::audit {

// A rail's interface and index, as the fabric agent names them.
struct TraceRail {
  int rail = 0;
  std::string interface;
};

// Where a peer is traced to: its host address (from the fabric status), or
// another of its addresses given on the command line (a rail's, to see the
// spines between leaves).
struct TraceTarget {
  std::string peer;
  std::string address;
  bool operator==(const TraceTarget&) const = default;
};

struct TraceOptions {
  int source_ports = 8;  // traces per rail and target: ports first_port...
  int first_port = 47000;
  int dest_port = 33434;  // nothing listens: the target answers port unreachable
  int max_ttl = 6;
  std::chrono::milliseconds timeout{250};  // per probe
  std::chrono::milliseconds gap{2};        // between probes (routers rate-limit ICMP)
  int give_up_after = 2;                   // unanswered TTLs in a row end a trace
  // At most this many targets (0: all), taken from a place in the list that
  // `spread` picks (the node's name), so a large fleet neither traces O(N^2)
  // routes nor aims every node at the same few peers. The first hop, which
  // the topology checks judge, is the same towards any peer.
  size_t max_targets = 0;
  std::string spread{};
};

class RouteTracer {
 public:
  virtual ~RouteTracer() = default;
  virtual lockstep::audit::RouteTrace Trace(const TraceRail& rail, const TraceTarget& target, int source_port,
                                            const TraceOptions& options) = 0;
};

// IP_TTL probes from the rail's first IPv4 address, bound to its device,
// marked DSCP CS6 as the fabric probes are.
class UdpRouteTracer : public RouteTracer {
 public:
  lockstep::audit::RouteTrace Trace(const TraceRail& rail, const TraceTarget& target, int source_port,
                                    const TraceOptions& options) override;
};

// The paths of a fabric status ({"paths": [{"peer", "rail", "state", "loss",
// "owd_p50_ns", "owd_p99_ns", "rtt_p50_ns", "rtt_p99_ns"}]}): the one-way
// delays when present, else half the round trips (one_way = false). A status
// without "paths" gives paths_unavailable.
void PathsFromFabricStatus(const nlohmann::json& status, lockstep::audit::NetworkFacts& out);
// The rails ({"paths": [{"rail", "interface"}]}) and the peers' host addresses
// ({"peers": [{"peer", "host_address"}]}) of a fabric status.
std::vector<TraceRail> RailsFromFabricStatus(const nlohmann::json& status);
std::vector<TraceTarget> TargetsFromFabricStatus(const nlohmann::json& status);

// Every rail x target x source port, traced with `tracer` into out.traces.
void TraceRoutes(const std::vector<TraceRail>& rails, const std::vector<TraceTarget>& targets, RouteTracer& tracer,
                 const TraceOptions& options, lockstep::audit::NetworkFacts& out);

}  // namespace lockstep::agent::audit
