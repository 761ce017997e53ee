// Failover choice: which path carries each peer's traffic, as decisions and
// the actions that move from the current decisions to the new ones.
//
// Per peer, while no path is failed: pinned to its home path (HomePath), or,
// without home pins, unpinned (the fabric's static ECMP carries it). When one
// fails: pinned to the best alternative: an up path with
// the lowest recent one-way delay, else a suspect one, else (last resort,
// replies flow but it is not re-admitted) a recovering one. A pin sticks
// while its path delivers (up or suspect); it moves only when that path
// fails and another delivers, and is removed only when every path of the
// peer is up or suspect again (failed paths re-admitted: back home, so a
// repaired path is reused). While no path delivers at all the pin stays
// where it is (ECMP would be no better). So every route change follows a
// state change.
//
// Several paths per rail (PathKey.index: the same rail through different
// spines, each probed with its own UDP source port): a pin moves a peer's
// traffic to a rail, and the fabric hashes each of its flows onto one of
// the rail's paths, so a rail counts as one choice, as bad as its worst
// path (RailChoices): a rail with any path down or recovering is failed
// (the kernel may hash a flow onto that path), a last resort like a
// recovering path while another of its paths delivers, and down when none
// does. A peer moves to a rail whose paths all deliver. A pin names the
// rail's lowest path (index 0 when every rail has it).
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

// One choice per (peer, rail) of `paths` (see "Several paths per rail"
// above), in key order: keyed by its lowest PathKey; up when every path is
// up, suspect when every one delivers and one is suspect, unknown when none
// failed and one has no verdict yet, recovering when one is down or
// recovering and another delivers (or recovers), down when none does; its
// delay is the highest of its paths'. With one path per rail: `paths`, sorted.
std::vector<PathChoice> RailChoices(const std::vector<PathChoice>& paths);

// A peer's home path: the rail (RailChoices) of one of `paths`, chosen by a
// stable hash (FNV-1a) of the unordered pair {self, peer}, so pairs spread
// over the rails, both ends of a pair pick the same rail whatever their
// paths per rail, and every run, and every restart, picks the same.
// nullopt when `paths` is empty.
std::optional<PathKey> HomePath(const std::string& self, const std::string& peer, const std::vector<PathChoice>& paths);

// The pin for one peer given its paths and its current pin (nullopt:
// unpinned). `home`: where the peer goes while every path delivers (nullopt:
// unpinned, static ECMP).
std::optional<PathKey> ChoosePin(const std::vector<PathChoice>& paths, const std::optional<PathKey>& current,
                                 const std::optional<PathKey>& home = std::nullopt);

struct RoutePlan {
  std::map<std::string, PathKey> pins;  // the new decisions: pinned peers only
  std::vector<RouteAction> actions;     // current -> pins, in peer order
};

// Plans every peer. Peers pinned in `current` but absent from `peers` are
// unpinned; with `enabled` false every pin is removed; with `pin_home` every
// healthy peer goes to its HomePath.
RoutePlan PlanRoutes(const std::map<std::string, std::vector<PathChoice>>& peers,
                     const std::map<std::string, PathKey>& current, bool enabled = true, bool pin_home = false,
                     const std::string& self = "");

}  // namespace lockstep::fabric
