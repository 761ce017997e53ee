#include "lockstep/fabric/failover_choice.h"

#include <algorithm>
#include <tuple>

#include "lockstep/common/hash.h"

namespace lockstep::fabric {
namespace {

// Lower is better: up before suspect before recovering, then delay (unknown
// delay last), then the key (deterministic ties).
int Tier(PathState s) {
  switch (s) {
    case PathState::kUp:
      return 0;
    case PathState::kSuspect:
      return 1;
    case PathState::kRecovering:
      return 2;
    default:
      return 3;  // unknown, down: never chosen
  }
}

bool Better(const PathChoice& a, const PathChoice& b) {
  auto rank = [](const PathChoice& c) {
    return std::make_tuple(Tier(c.state), !c.delay.has_value(), c.delay.value_or(Nanos(0)));
  };
  if (rank(a) != rank(b)) return rank(a) < rank(b);
  return a.path < b.path;
}

// A rail as one choice (see "Several paths per rail" in the header): keyed
// by its lowest path, as bad as its worst path, its delay the highest known.
PathChoice RailOf(std::vector<PathChoice>::const_iterator begin, std::vector<PathChoice>::const_iterator end) {
  PathChoice rail{begin->path, PathState::kUp, std::nullopt};
  bool failed = false, delivers = false, unknown = false, suspect = false;
  for (auto it = begin; it != end; ++it) {
    rail.path = std::min(rail.path, it->path);
    failed = failed || Failed(it->state);
    delivers = delivers || Usable(it->state) || it->state == PathState::kRecovering;
    unknown = unknown || it->state == PathState::kUnknown;
    suspect = suspect || it->state == PathState::kSuspect;
    if (it->delay && (!rail.delay || *it->delay > *rail.delay)) rail.delay = it->delay;
  }
  if (failed) {
    // Some of the rail's flows are lost: a last resort (as recovering) while
    // any of its paths delivers, else down.
    rail.state = delivers ? PathState::kRecovering : PathState::kDown;
  } else if (unknown) {
    rail.state = PathState::kUnknown;
  } else if (suspect) {
    rail.state = PathState::kSuspect;
  }
  return rail;
}

}  // namespace

std::vector<PathChoice> RailChoices(const std::vector<PathChoice>& paths) {
  std::vector<PathChoice> sorted = paths;
  std::sort(sorted.begin(), sorted.end(), [](const PathChoice& a, const PathChoice& b) { return a.path < b.path; });
  std::vector<PathChoice> rails;
  for (auto it = sorted.begin(); it != sorted.end();) {
    auto end = std::find_if(it, sorted.end(), [&](const PathChoice& c) {
      return c.path.rail != it->path.rail || c.path.peer != it->path.peer;
    });
    rails.push_back(RailOf(it, end));
    it = end;
  }
  return rails;
}

std::string ToString(const RouteAction& action) {
  if (const auto* pin = std::get_if<PinPeer>(&action)) {
    return "pin " + pin->peer + " rail" + std::to_string(pin->path.rail) + "/path" + std::to_string(pin->path.index);
  }
  return "unpin " + std::get<UnpinPeer>(action).peer;
}

std::optional<PathKey> HomePath(const std::string& self, const std::string& peer,
                                const std::vector<PathChoice>& paths) {
  if (paths.empty()) return std::nullopt;
  const std::string pair = self < peer ? self + '\n' + peer : peer + '\n' + self;
  std::vector<PathKey> keys;
  for (const PathChoice& c : RailChoices(paths)) keys.push_back(c.path);  // sorted
  return keys[Fnv1a64(pair) % keys.size()];
}

std::optional<PathKey> ChoosePin(const std::vector<PathChoice>& all_paths, const std::optional<PathKey>& current,
                                 const std::optional<PathKey>& home) {
  // The kernel routes a peer to a rail, not to one of its fabric paths.
  const std::vector<PathChoice> paths = RailChoices(all_paths);
  const bool any_failed = std::any_of(paths.begin(), paths.end(), [](const PathChoice& c) { return Failed(c.state); });
  const bool all_deliver = std::all_of(paths.begin(), paths.end(), [](const PathChoice& c) { return Usable(c.state); });
  const PathChoice* pinned = nullptr;  // a pin to a path no longer listed counts as none
  for (const PathChoice& c : paths) {
    if (current && c.path.rail == current->rail && c.path.peer == current->peer) pinned = &c;
  }
  const std::optional<PathKey> keep = pinned ? current : std::nullopt;
  if (!any_failed) {
    // Home (or back to ECMP) only when every path delivers again (failed ones
    // were re-admitted); while some are still unknown (just started), keep
    // what we have.
    return all_deliver ? home : keep;
  }
  if (pinned && Usable(pinned->state)) return keep;  // sticky while it delivers
  const PathChoice* best = nullptr;
  for (const PathChoice& c : paths) {
    if (Tier(c.state) > 2) continue;
    if (!best || Better(c, *best)) best = &c;
  }
  if (!best) {
    // Nothing delivers: the peer is gone, or its last link is congested so
    // hard that every probe is lost. Keep the pin: static ECMP is no better
    // and may hash onto a rail without carrier (measured: unpinning here made
    // a rail-down churn between pinned and ECMP every ~0.9 s). The pin moves
    // as soon as any path delivers again.
    return keep;
  }
  // Among last-resort recovering paths, stay where we are.
  if (pinned && pinned->state == PathState::kRecovering && best->state == PathState::kRecovering) return keep;
  return best->path;
}

RoutePlan PlanRoutes(const std::map<std::string, std::vector<PathChoice>>& peers,
                     const std::map<std::string, PathKey>& current, bool enabled, bool pin_home,
                     const std::string& self) {
  RoutePlan plan;
  if (enabled) {
    for (const auto& [peer, paths] : peers) {
      auto it = current.find(peer);
      std::optional<PathKey> cur;
      if (it != current.end()) cur = it->second;
      std::optional<PathKey> home = pin_home ? HomePath(self, peer, paths) : std::nullopt;
      if (auto pin = ChoosePin(paths, cur, home)) plan.pins.emplace(peer, *pin);
    }
  }
  // Diff in peer order: both maps are sorted.
  auto cur = current.begin();
  auto next = plan.pins.begin();
  while (cur != current.end() || next != plan.pins.end()) {
    if (next == plan.pins.end() || (cur != current.end() && cur->first < next->first)) {
      plan.actions.push_back(UnpinPeer{cur->first});
      ++cur;
    } else if (cur == current.end() || next->first < cur->first) {
      plan.actions.push_back(PinPeer{next->first, next->second});
      ++next;
    } else {
      if (cur->second != next->second) plan.actions.push_back(PinPeer{next->first, next->second});
      ++cur;
      ++next;
    }
  }
  return plan;
}

}  // namespace lockstep::fabric
