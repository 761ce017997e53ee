// Failover choice per peer, as a pure function of path states and delays.
#include <catch2/catch.hpp>

#include "lockstep/fabric/failover_choice.h"

namespace lockstep::fabric {
namespace {

using namespace std::chrono_literals;
using S = PathState;

PathKey R(int rail, const std::string& peer = "b") { return {rail, peer, 0}; }
PathChoice C(int rail, S s, std::optional<Nanos> delay = std::nullopt) { return {R(rail), s, delay}; }

TEST_CASE("while every path is healthy the peer stays on ECMP", "[fabric]") {
  REQUIRE_FALSE(ChoosePin({C(0, S::kUp), C(1, S::kUp)}, std::nullopt));
  REQUIRE_FALSE(ChoosePin({C(0, S::kUp), C(1, S::kSuspect)}, std::nullopt));  // one miss is no reason to move
  REQUIRE_FALSE(ChoosePin({C(0, S::kUnknown), C(1, S::kUnknown)}, std::nullopt));
}

TEST_CASE("with home pins a healthy peer goes home, and back home only once every path is re-admitted", "[fabric]") {
  const std::optional<PathKey> home = R(1);
  REQUIRE(ChoosePin({C(0, S::kUp), C(1, S::kUp)}, std::nullopt, home) == R(1));
  REQUIRE(ChoosePin({C(0, S::kUp), C(1, S::kSuspect)}, std::nullopt, home) == R(1));
  REQUIRE_FALSE(ChoosePin({C(0, S::kUnknown), C(1, S::kUnknown)}, std::nullopt, home));  // no verdict yet
  REQUIRE(ChoosePin({C(0, S::kUp), C(1, S::kDown)}, R(1), home) == R(0));               // home failed
  REQUIRE(ChoosePin({C(0, S::kUp), C(1, S::kRecovering)}, R(0), home) == R(0));         // not re-admitted
  REQUIRE(ChoosePin({C(0, S::kUp), C(1, S::kUp)}, R(0), home) == R(1));                 // re-admitted: reused
}

TEST_CASE("HomePath is a stable spread of pairs over the paths, the same from both ends", "[fabric]") {
  std::map<int, int> per_rail;
  for (int i = 0; i < 64; ++i) {
    const std::string peer = "node-" + std::to_string(i);
    std::vector<PathChoice> paths = {{{0, peer, 0}, S::kUp, {}}, {{1, peer, 0}, S::kDown, {}}};
    std::vector<PathChoice> reversed = {paths[1], paths[0]};
    auto home = HomePath("self", peer, paths);
    REQUIRE(home);
    REQUIRE(home == HomePath("self", peer, reversed));  // independent of order and state
    // The peer's own choice for us: the same rail.
    std::vector<PathChoice> theirs = {{{0, "self", 0}, S::kUp, {}}, {{1, "self", 0}, S::kUp, {}}};
    REQUIRE(HomePath(peer, "self", theirs)->rail == home->rail);
    ++per_rail[home->rail];
  }
  REQUIRE(per_rail[0] >= 16);
  REQUIRE(per_rail[1] >= 16);
  REQUIRE_FALSE(HomePath("a", "b", {}));
}

TEST_CASE("a failed path pins the peer to the healthy path with the lowest one-way delay", "[fabric]") {
  auto pin = ChoosePin({C(0, S::kDown), C(1, S::kUp, 80us), C(2, S::kUp, 30us), C(3, S::kUp)}, std::nullopt);
  REQUIRE(pin == R(2));
  // Up beats suspect whatever the delay; suspect beats recovering.
  REQUIRE(ChoosePin({C(0, S::kDown), C(1, S::kSuspect, 1us), C(2, S::kUp, 90us)}, std::nullopt) == R(2));
  REQUIRE(ChoosePin({C(0, S::kDown), C(1, S::kRecovering, 1us), C(2, S::kSuspect, 90us)}, std::nullopt) == R(2));
  // Equal delays: the lower rail, deterministically.
  REQUIRE(ChoosePin({C(0, S::kDown), C(2, S::kUp, 5us), C(1, S::kUp, 5us)}, std::nullopt) == R(1));
}

TEST_CASE("a pin sticks while its path delivers, even when another path gets faster", "[fabric]") {
  REQUIRE(ChoosePin({C(0, S::kDown), C(1, S::kUp, 90us), C(2, S::kUp, 10us)}, R(1)) == R(1));
  REQUIRE(ChoosePin({C(0, S::kRecovering), C(1, S::kSuspect, 90us), C(2, S::kUp, 10us)}, R(1)) == R(1));
  // It moves when its path fails.
  REQUIRE(ChoosePin({C(0, S::kDown), C(1, S::kDown), C(2, S::kUp, 10us)}, R(1)) == R(2));
}

TEST_CASE("a peer is unpinned only when all its paths are healthy again", "[fabric]") {
  REQUIRE(ChoosePin({C(0, S::kRecovering), C(1, S::kUp)}, R(1)) == R(1));  // not yet re-admitted
  REQUIRE(ChoosePin({C(0, S::kUnknown), C(1, S::kUp)}, R(1)) == R(1));     // no verdict yet
  REQUIRE_FALSE(ChoosePin({C(0, S::kUp), C(1, S::kUp)}, R(1)));
}

TEST_CASE("with no path delivering, a recovering one is the last resort, else no pin", "[fabric]") {
  REQUIRE(ChoosePin({C(0, S::kDown), C(1, S::kRecovering)}, R(0)) == R(1));
  REQUIRE(ChoosePin({C(0, S::kRecovering), C(1, S::kRecovering, 1us)}, R(0)) == R(0));  // stays
  // Nothing delivers: the pin stays (ECMP may hash onto a rail without carrier); no pin, none made.
  REQUIRE(ChoosePin({C(0, S::kDown), C(1, S::kDown)}, R(1)) == R(1));
  REQUIRE_FALSE(ChoosePin({C(0, S::kDown), C(1, S::kDown)}, std::nullopt));
  // A pin adopted at start whose path has no verdict yet is kept.
  REQUIRE(ChoosePin({C(0, S::kDown), C(1, S::kUnknown)}, R(1)) == R(1));
  // A pin to a path that is no longer listed is dropped.
  REQUIRE_FALSE(ChoosePin({C(0, S::kUp), C(1, S::kUnknown)}, R(5)));
}

TEST_CASE("PlanRoutes diffs the new pins against the current ones", "[fabric]") {
  std::map<std::string, std::vector<PathChoice>> peers = {
      {"a", {{R(0, "a"), S::kDown, {}}, {R(1, "a"), S::kUp, 5us}}},
      {"b", {{R(0, "b"), S::kUp, {}}, {R(1, "b"), S::kUp, {}}}},
      {"c", {{R(0, "c"), S::kUp, {}}, {R(1, "c"), S::kDown, {}}}},
  };
  std::map<std::string, PathKey> current = {{"b", R(1, "b")}, {"c", R(1, "c")}, {"gone", R(0, "gone")}};
  RoutePlan plan = PlanRoutes(peers, current);
  REQUIRE(plan.pins == std::map<std::string, PathKey>{{"a", R(1, "a")}, {"c", R(0, "c")}});
  REQUIRE(plan.actions == std::vector<RouteAction>{PinPeer{"a", R(1, "a")}, UnpinPeer{"b"}, PinPeer{"c", R(0, "c")},
                                                   UnpinPeer{"gone"}});
  REQUIRE(ToString(plan.actions[0]) == "pin a rail1/path0");
  REQUIRE(ToString(plan.actions[1]) == "unpin b");
  // Planning again from the result changes nothing.
  REQUIRE(PlanRoutes(peers, plan.pins).actions.empty());
  // Failover disabled: every pin goes.
  RoutePlan off = PlanRoutes(peers, plan.pins, false);
  REQUIRE(off.pins.empty());
  REQUIRE(off.actions == std::vector<RouteAction>{UnpinPeer{"a"}, UnpinPeer{"c"}});
  // Home pins: b goes home too.
  RoutePlan homes = PlanRoutes(peers, plan.pins, true, true);
  REQUIRE(homes.pins.at("b") == *HomePath("", "b", peers.at("b")));
  REQUIRE(homes.actions == std::vector<RouteAction>{PinPeer{"b", *HomePath("", "b", peers.at("b"))}});
}

}  // namespace
}  // namespace lockstep::fabric
