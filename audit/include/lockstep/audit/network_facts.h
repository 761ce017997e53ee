// NetworkFacts: what the back-end network checks judge, as plain values: the
// fabric agent's path state (every rail x peer path, with its state and
// one-way delays from Lockstep's fabric time) and TTL-limited route traces
// (which hops each rail's probes to each peer take, per ECMP source port).
// Thread-compatible values.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lockstep::audit {

// One rail x peer path as the fabric agent sees it (its GET /fabric).
struct PathObservation {
  int rail = 0;
  std::string peer;                          // the peer's node name
  std::string state;                         // "up", "suspect", "down", "recovering", "unknown"
  double loss = 0;                           // over the agent's recent window
  std::optional<double> p50_us{}, p99_us{};  // one-way delay (fabric time), else half the round trip
  bool one_way = true;                       // false: the delays are half round trips (clock sync not locked)
  // How many replies the delays are over (the agent's stats window); nullopt:
  // not reported (an agent older than the field). A p99 needs kMinP99Samples.
  std::optional<int> delay_samples{};
  bool operator==(const PathObservation&) const = default;
};

// One TTL-limited trace: probes out of one rail to one target with one UDP
// source port (one ECMP choice), TTL 1, 2, ... until the target answers.
struct RouteTrace {
  int rail = 0;
  std::string peer;    // the peer's node name
  std::string target;  // the address traced to
  int source_port = 0;
  std::vector<std::string> hops{};  // per TTL the address that answered ("*": none)
  bool reached = false;             // the target answered (port unreachable)
  bool operator==(const RouteTrace&) const = default;
};

// Below this many samples a p99 is the largest one or two: one probe the
// host's scheduler held up (a millisecond on a busy node) would decide it.
inline constexpr int kMinP99Samples = 100;

struct NetworkFacts {
  // Why there is no path state (no fabric agent, fabric off); else paths.
  std::optional<std::string> paths_unavailable{};
  std::vector<PathObservation> paths{};
  // Why no traces ran; else traces.
  std::optional<std::string> traces_unavailable{};
  std::vector<RouteTrace> traces{};
  bool operator==(const NetworkFacts&) const = default;
};

}  // namespace lockstep::audit
