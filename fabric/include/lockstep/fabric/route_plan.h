// Failover choice: which path carries each peer's traffic, as decisions and
// the actions that move from the current decisions to the new ones.
//
// Per peer: unpinned (the fabric's static ECMP carries it) while no path is
// failed; when one fails, pinned to the best alternative: an up path with
// the lowest recent one-way delay, else a suspect one, else (last resort,
// replies flow but it is not re-admitted) a recovering one. A pin sticks
// while its path delivers (up or suspect); it moves only when that path
// fails, and is removed only when every path of the peer is up or suspect
// again (failed paths re-admitted) or when none delivers at all (never a
// route to a dead path). So every route change follows a state change.
// Nothing here knows Linux routing: a pin is a path, the actuator decides
// what that means (a /32 route on rail r, an RDMA queue pair, ...).
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

// Steer all of `peer`'s traffic (from this host) onto `path`.
struct PinPeer {
  std::string peer;
  PathKey path;
  bool operator==(const PinPeer&) const = default;
};
// Hand `peer`'s traffic back to the fabric's default (static ECMP).
struct UnpinPeer {
  std::string peer;
  bool operator==(const UnpinPeer&) const = default;
};
using RouteAction = std::variant<PinPeer, UnpinPeer>;

std::string ToString(const RouteAction& action);  // "pin node-b rail1/path0", "unpin node-b"

// One path of a peer as the planner sees it.
struct PathChoice {
  PathKey path;
  PathState state = PathState::kUnknown;
  std::optional<Nanos> delay;  // recent one-way delay (PathHealth::RankingDelay); nullopt ranks last
};

// The pin for one peer given its paths and its current pin (nullopt: unpinned).
std::optional<PathKey> ChoosePin(const std::vector<PathChoice>& paths, const std::optional<PathKey>& current);

struct RoutePlan {
  std::map<std::string, PathKey> pins;  // the new decisions: pinned peers only
  std::vector<RouteAction> actions;     // current -> pins, in peer order
};

// Plans every peer. Peers pinned in `current` but absent from `peers` are
// unpinned; with `enabled` false every pin is removed.
RoutePlan PlanRoutes(const std::map<std::string, std::vector<PathChoice>>& peers,
                     const std::map<std::string, PathKey>& current, bool enabled = true);

}  // namespace lockstep::fabric
