// FabricMap: the fabric's shape as localisation needs it. Which leaf each
// host rail hangs off (the rail layout), and, where ECMP path discovery
// found it, which spine a path crosses; from that, the directed links each
// path crosses: host rail -> leaf [-> spine -> leaf] -> host rail.
//
// A path whose spine is not known (ECMP picks one by hash, and nothing has
// discovered which) crosses "leaf>*" and "*>leaf": the leaf's uplinks and the
// other leaf's downlinks as a group, so a congested leaf-spine link can
// still be narrowed down to one leaf's uplinks. Plain values;
// thread-compatible.
#pragma once

#include <compare>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

// A directed link between two fabric nodes. Host rails are named
// "<host>/rail<r>"; leaves and spines by their own names; "*" is "one of
// the spines" (not discovered).
struct Link {
  std::string from, to;
  auto operator<=>(const Link&) const = default;
  bool operator==(const Link&) const = default;
};

// "leaf0>spine1" (metrics labels, status, logs).
std::string ToString(const Link& link);

// "<host>/rail<r>": a host rail as a link end.
std::string RailEnd(const std::string& host, int rail);

// Which leaf the rails follow:
//   kStriped: rail r of host h (0-based, in host order) on leaf (h + r) % leaves
//   kRail:    leaves / rails groups of hosts; host h of n is in group
//             g = h * groups / n and hangs rail r off leaf g * rails + r
// (e2e/netlab's two layouts, README "Topology").
enum class RailLayout { kStriped, kRail };

class FabricMap {
 public:
  void SetLeaf(const std::string& host, int rail, const std::string& leaf);
  // ECMP path discovery: `path` from `source` crosses `spine`.
  void SetSpine(const std::string& source, const PathKey& path, const std::string& spine);
  // ECMP path discovery of the whole route (a traceroute): the links `path`
  // from `source` crosses, in order. Overrides the layout: traffic to a
  // host address may leave on one rail and arrive on another.
  void SetRoute(const std::string& source, const PathKey& path, std::vector<Link> links);

  std::optional<std::string> LeafOf(const std::string& host, int rail) const;
  std::optional<std::string> SpineOf(const std::string& source, const PathKey& path) const;

  // The links `path` from `source` crosses, in order: its route when one
  // was set (SetRoute), else from the layout. Same leaf: host ->
  // leaf -> host. Otherwise via its spine, or "*" when no spine is known for
  // it. The peer's leaf unknown: only the source's uplink (host -> leaf);
  // the source's unknown: none.
  std::vector<Link> Route(const std::string& source, const PathKey& path) const;

  // Host rails placed on a leaf, and paths with a route: 0 for an empty map.
  size_t rails_known() const { return leaf_.size() + route_.size(); }

 private:
  std::map<std::pair<std::string, int>, std::string> leaf_;
  std::map<std::pair<std::string, PathKey>, std::string> spine_;
  std::map<std::pair<std::string, PathKey>, std::vector<Link>> route_;
};

// The map of `hosts` (in order) with `rails` rails each over `leaves`
// leaves named leaf_prefix + index (netlab: "l"). kRail needs leaves to be a
// multiple of rails; otherwise it falls back to kStriped.
FabricMap LayoutMap(const std::vector<std::string>& hosts, int rails, int leaves, RailLayout layout,
                    const std::string& leaf_prefix = "l");

}  // namespace lockstep::fabric
