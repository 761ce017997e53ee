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
  REQUIRE(ChoosePin({C(0, S::kUp), C(1, S::kDown)}, R(1), home) == R(0));                // home failed
  REQUIRE(ChoosePin({C(0, S::kUp), C(1, S::kRecovering)}, R(0), home) == R(0));          // not re-admitted
  REQUIRE(ChoosePin({C(0, S::kUp), C(1, S::kUp)}, R(0), home) == R(1));                  // re-admitted: reused
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

// Several paths per rail: rail r through fabric path i (a spine, by its
// probes' UDP source port).
PathKey P(int rail, int index) { return {rail, "b", index}; }
PathChoice C(int rail, int index, S s, std::optional<Nanos> delay = std::nullopt) { return {P(rail, index), s, delay}; }

TEST_CASE("one of a rail's paths down moves the peer off that rail: the kernel may hash a flow onto it", "[fabric]") {
  // fabric-gray: the peer is home on rail 1; its flow hashes onto rail 1's
  // path 1 (one spine), which drops everything; path 0 (the other spine) is up.
  const std::vector<PathChoice> gray = {C(0, 0, S::kUp), C(0, 1, S::kUp), C(1, 0, S::kUp), C(1, 1, S::kDown)};
  REQUIRE(ChoosePin(gray, P(1, 0), P(1, 0)) == P(0, 0));
  REQUIRE(ChoosePin(gray, std::nullopt) == P(0, 0));  // without home pins too
  // Unpinned (home) again only once every path of every rail delivers.
  std::vector<PathChoice> recovering = gray;
  recovering[3].state = S::kRecovering;
  REQUIRE(ChoosePin(recovering, P(0, 0), P(1, 0)) == P(0, 0));
  std::vector<PathChoice> healed = gray;
  healed[3].state = S::kUp;
  REQUIRE(ChoosePin(healed, P(0, 0), P(1, 0)) == P(1, 0));
  // A pin naming another path of the same rail is that rail: kept while it delivers.
  REQUIRE(ChoosePin(gray, P(0, 1)) == P(0, 1));
}

TEST_CASE("a rail whose paths all deliver beats a partly failed one, which beats a dead one", "[fabric]") {
  // Rail 0 partly failed, rail 1 all up (slower), rail 2 dead: rail 1.
  REQUIRE(ChoosePin({C(0, 0, S::kUp, 1us), C(0, 1, S::kDown), C(1, 0, S::kUp, 90us), C(1, 1, S::kSuspect, 80us),
                     C(2, 0, S::kDown), C(2, 1, S::kDown)},
                    P(2, 0)) == P(1, 0));
  // No rail whose paths all deliver: a partly failed rail is the last
  // resort (some of the peer's flows get through), not a dead one.
  REQUIRE(ChoosePin({C(0, 0, S::kDown), C(0, 1, S::kDown), C(1, 0, S::kUp), C(1, 1, S::kDown)}, P(0, 0)) == P(1, 0));
  // Delays: a rail is as slow as its slowest path.
  REQUIRE(ChoosePin({C(0, 0, S::kDown), C(1, 0, S::kUp, 10us), C(1, 1, S::kUp, 90us), C(2, 0, S::kUp, 50us),
                     C(2, 1, S::kUp, 40us)},
                    std::nullopt) == P(2, 0));
}

TEST_CASE("RailChoices folds each rail's paths into its worst", "[fabric]") {
  const auto rails = RailChoices({C(1, 1, S::kUp, 7us), C(0, 0, S::kUp), C(0, 1, S::kSuspect, 3us), C(1, 0, S::kUp),
                                  C(2, 0, S::kDown), C(2, 1, S::kUnknown), C(3, 0, S::kUnknown), C(3, 1, S::kUp)});
  REQUIRE(rails.size() == 4);
  REQUIRE(rails[0].path == P(0, 0));
  REQUIRE(rails[0].state == S::kSuspect);
  REQUIRE(rails[0].delay == 3us);
  REQUIRE(rails[1].path == P(1, 0));
  REQUIRE(rails[1].state == S::kUp);
  REQUIRE(rails[1].delay == 7us);
  REQUIRE(rails[2].state == S::kDown);  // no path delivers
  REQUIRE(rails[3].state == S::kUnknown);
  // One path per rail: the paths themselves.
  const std::vector<PathChoice> one = {C(0, S::kDown), C(1, S::kUp, 4us)};
  const auto same = RailChoices(one);
  REQUIRE(same.size() == 2);
  REQUIRE(same[0].path == one[0].path);
  REQUIRE(same[0].state == S::kDown);
  REQUIRE(same[1].delay == 4us);
}

TEST_CASE("HomePath picks a rail whatever the paths per rail, the same from both ends", "[fabric]") {
  for (int i = 0; i < 32; ++i) {
    const std::string peer = "node-" + std::to_string(i);
    std::vector<PathChoice> one = {{{0, peer, 0}, S::kUp, {}}, {{1, peer, 0}, S::kUp, {}}};
    std::vector<PathChoice> four;
    for (int rail = 0; rail < 2; ++rail) {
      for (int index = 0; index < 4; ++index) four.push_back({{rail, peer, index}, S::kUp, {}});
    }
    const auto home = HomePath("self", peer, one);
    REQUIRE(HomePath("self", peer, four) == home);
    REQUIRE(home->index == 0);
  }
}

}  // namespace
}  // namespace lockstep::fabric
