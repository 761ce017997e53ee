// CongestionLocator and FabricMap: a synthetic leaf-spine fleet whose paths'
// delays are the sum of a base, per-link queueing and seeded noise.
#include "lockstep/fabric/congestion.h"

#include <catch2/catch.hpp>
#include <random>

#include "lockstep/fabric/fabric_map.h"

namespace lockstep::fabric {
namespace {

using namespace std::chrono_literals;

Link L(const std::string& from, const std::string& to) { return {from, to}; }

// hosts x rails over leaves (striped) and spines; every host probes every
// peer on every rail; the spine a path crosses is known (as ECMP discovery
// would find it) unless `spines_known` is false.
struct Fleet {
  std::vector<std::string> hosts;
  FabricMap map;
  struct P {
    std::string source;
    PathKey key;
    std::string id;
    std::vector<Link> links;
  };
  std::vector<P> paths;
  std::mt19937 rng{7};

  Fleet(int n, int rails, int leaves, int spines, bool spines_known = true) {
    for (int h = 0; h < n; ++h) hosts.push_back("h" + std::to_string(h));
    map = LayoutMap(hosts, rails, leaves, RailLayout::kStriped);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        for (int r = 0; r < rails; ++r) {
          PathKey key{r, hosts[b], 0};
          if (spines_known) map.SetSpine(hosts[a], key, "s" + std::to_string((a * 3 + b + r) % spines));
          paths.push_back({hosts[a], key, hosts[a] + ">" + ToString(key), map.Route(hosts[a], key)});
        }
      }
    }
  }

  // One round: base 20 us p50 (+-30% noise), p99 = 1.5 x p50 (+-50%), plus
  // `queue` on every link in it, plus `extra` on the named paths.
  std::vector<PathDelays> Round(const std::map<Link, Nanos>& queue = {},
                                const std::map<std::string, Nanos>& extra = {}) {
    std::uniform_real_distribution<double> jitter(0.7, 1.3), tail(1.0, 2.25);
    std::vector<PathDelays> out;
    for (const P& p : paths) {
      double add = 0;
      for (const Link& l : p.links) {
        if (auto it = queue.find(l); it != queue.end()) add += static_cast<double>(it->second.count());
      }
      if (auto it = extra.find(p.id); it != extra.end()) add += static_cast<double>(it->second.count());
      const double p50 = 20'000 * jitter(rng) + add;
      const double p99 = 20'000 * tail(rng) + 1.5 * add;
      out.push_back({p.id, p.links, Nanos(static_cast<int64_t>(p50)), Nanos(static_cast<int64_t>(p99)), 200, 0.0});
    }
    return out;
  }
};

std::vector<Link> Links(const CongestionReport& r, size_t i) { return r.links.at(i).links; }

TEST_CASE("fabric map: striped and rail layouts put rails on netlab's leaves", "[fabric]") {
  const std::vector<std::string> hosts{"h0", "h1", "h2", "h3"};
  FabricMap striped = LayoutMap(hosts, 2, 2, RailLayout::kStriped);
  REQUIRE(striped.LeafOf("h0", 0) == "l0");
  REQUIRE(striped.LeafOf("h0", 1) == "l1");
  REQUIRE(striped.LeafOf("h3", 0) == "l1");
  REQUIRE(striped.LeafOf("h3", 1) == "l0");
  REQUIRE_FALSE(striped.LeafOf("h4", 0));
  // Rail layout, 4 leaves / 2 rails = 2 groups of 2 hosts: group g, rail r on leaf 2g + r.
  FabricMap rail = LayoutMap(hosts, 2, 4, RailLayout::kRail);
  REQUIRE(rail.LeafOf("h1", 0) == "l0");
  REQUIRE(rail.LeafOf("h1", 1) == "l1");
  REQUIRE(rail.LeafOf("h2", 0) == "l2");
  REQUIRE(rail.LeafOf("h3", 1) == "l3");
  // 3 leaves do not divide into 2 rails: striped instead.
  REQUIRE(LayoutMap(hosts, 2, 3, RailLayout::kRail).LeafOf("h2", 1) == "l0");
}

TEST_CASE("fabric map: a path's links, via its spine or the spines as a group", "[fabric]") {
  FabricMap map = LayoutMap({"h0", "h1", "h2", "h3"}, 2, 2, RailLayout::kStriped);
  // h0 and h2 share rail 0's leaf l0: one leaf hop.
  REQUIRE(map.Route("h0", {0, "h2", 0}) == std::vector<Link>{L("h0/rail0", "l0"), L("l0", "h2/rail0")});
  // h0 (l0) to h1 (l1) on rail 0: spine unknown.
  REQUIRE(map.Route("h0", {0, "h1", 0}) ==
          std::vector<Link>{L("h0/rail0", "l0"), L("l0", "*"), L("*", "l1"), L("l1", "h1/rail0")});
  map.SetSpine("h0", {0, "h1", 0}, "s1");
  REQUIRE(map.Route("h0", {0, "h1", 0}) ==
          std::vector<Link>{L("h0/rail0", "l0"), L("l0", "s1"), L("s1", "l1"), L("l1", "h1/rail0")});
  REQUIRE(map.Route("h0", {0, "h9", 0}) == std::vector<Link>{L("h0/rail0", "l0")});  // unknown peer: the uplink
  REQUIRE(map.Route("h9", {0, "h0", 0}).empty());                                    // unknown source: nothing
  REQUIRE(ToString(L("l0", "s1")) == "l0>s1");
  // A discovered route wins over the layout (arriving on the peer's other rail).
  const std::vector<Link> route{L("h0/rail0", "l0"), L("l0", "s0"), L("s0", "l0"), L("l0", "h1/rail1")};
  map.SetRoute("h0", {0, "h1", 0}, route);
  REQUIRE(map.Route("h0", {0, "h1", 0}) == route);
}

TEST_CASE("congestion: noise alone flags nothing over many rounds", "[fabric]") {
  Fleet fleet(8, 2, 4, 2);
  CongestionLocator locator;
  int judged = 0;
  for (int round = 0; round < 200; ++round) {
    CongestionReport r = locator.Judge(fleet.Round());
    REQUIRE(r.links.empty());
    REQUIRE(r.bad_paths.empty());
    REQUIRE(r.rising == 0);
    judged = r.judged;
  }
  REQUIRE(judged == static_cast<int>(fleet.paths.size()));
}

TEST_CASE("congestion: a path is learnt before it is judged, and needs its samples", "[fabric]") {
  Fleet fleet(4, 1, 2, 1);
  CongestionLocator locator({.baseline_rounds = 3});
  // Congested from the start: learnt as its baseline, never judged rising.
  const std::map<Link, Nanos> queue{{L("l0", "s0"), 500us}};
  for (int round = 0; round < 3; ++round) {
    CongestionReport r = locator.Judge(fleet.Round(queue));
    REQUIRE(r.judged == 0);
    for (const auto& [id, t] : r.trends) REQUIRE(t == PathTrend::kLearning);
  }
  REQUIRE(locator.Judge(fleet.Round(queue)).links.empty());
  std::vector<PathDelays> few = fleet.Round();
  few[0].samples = 10;
  CongestionReport r = locator.Judge(few);
  REQUIRE(r.trends.at(few[0].id) == PathTrend::kNotJudged);
  REQUIRE(r.judged == static_cast<int>(few.size()) - 1);
}

TEST_CASE("congestion: a leaf-spine link whose paths rise together is named, alone", "[fabric]") {
  Fleet fleet(8, 2, 4, 2);
  CongestionLocator locator;
  for (int round = 0; round < 5; ++round) REQUIRE(locator.Judge(fleet.Round()).links.empty());
  const std::map<Link, Nanos> queue{{L("l0", "s0"), 300us}};
  CongestionReport r = locator.Judge(fleet.Round(queue));
  REQUIRE(r.links.size() == 1);
  REQUIRE(Links(r, 0) == std::vector<Link>{L("l0", "s0")});
  REQUIRE(r.links[0].share() == 1.0);
  REQUIRE(r.bad_paths.empty());
  int crossing = 0;
  for (const auto& p : fleet.paths) { crossing += std::count(p.links.begin(), p.links.end(), L("l0", "s0")) > 0; }
  REQUIRE(static_cast<int>(r.links[0].rising_paths.size()) == crossing);
  REQUIRE(r.rising == crossing);
  // Congestion over: cleared, and the baseline did not follow it up.
  for (int round = 0; round < 2; ++round) {
    CongestionReport calm = locator.Judge(fleet.Round());
    REQUIRE(calm.links.empty());
    REQUIRE(calm.rising == 0);
  }
  REQUIRE(Links(locator.Judge(fleet.Round(queue)), 0) == std::vector<Link>{L("l0", "s0")});
}

TEST_CASE("congestion: in a two-leaf fabric both hops of the spine are named as one", "[fabric]") {
  Fleet fleet(8, 2, 2, 2);
  CongestionLocator locator;
  for (int round = 0; round < 5; ++round) locator.Judge(fleet.Round());
  CongestionReport r = locator.Judge(fleet.Round({{L("l0", "s1"), 200us}}));
  REQUIRE(r.links.size() == 1);
  // Every path through l0>s1 goes on to l1 and no other path crosses s1>l1.
  REQUIRE(Links(r, 0) == std::vector<Link>{L("l0", "s1"), L("s1", "l1")});
  REQUIRE(r.bad_paths.empty());
}

TEST_CASE("congestion: a host's uplink is named, not the links beyond it", "[fabric]") {
  Fleet fleet(8, 2, 4, 2);
  CongestionLocator locator;
  for (int round = 0; round < 5; ++round) locator.Judge(fleet.Round());
  CongestionReport r = locator.Judge(fleet.Round({{L("h3/rail1", "l0"), 400us}}));
  REQUIRE(r.links.size() == 1);
  REQUIRE(Links(r, 0) == std::vector<Link>{L("h3/rail1", "l0")});
  REQUIRE(r.links[0].rising_paths.size() == 7);  // h3 to each of its 7 peers on rail 1
  REQUIRE(r.bad_paths.empty());
}

TEST_CASE("congestion: a single path rising alone is a bad path, not a link", "[fabric]") {
  Fleet fleet(8, 2, 4, 2);
  CongestionLocator locator;
  for (int round = 0; round < 5; ++round) locator.Judge(fleet.Round());
  const std::string bad = "h2>h5/rail1/path0";
  CongestionReport r = locator.Judge(fleet.Round({}, {{bad, 1ms}}));
  REQUIRE(r.links.empty());
  REQUIRE(r.bad_paths.size() == 1);
  REQUIRE(r.bad_paths[0].id == bad);
  REQUIRE(*r.bad_paths[0].p50 > 1ms);
  REQUIRE(*r.bad_paths[0].base_p50 < 30us);
}

TEST_CASE("congestion: two congested links at once are both named, with a bad path besides", "[fabric]") {
  Fleet fleet(8, 2, 4, 2);
  CongestionLocator locator;
  for (int round = 0; round < 5; ++round) locator.Judge(fleet.Round());
  const std::string bad = "h1>h6/rail0/path0";
  CongestionReport r = locator.Judge(fleet.Round({{L("l0", "s0"), 300us}, {L("s1", "l2"), 300us}}, {{bad, 800us}}));
  REQUIRE(r.links.size() == 2);
  std::vector<Link> named{Links(r, 0).at(0), Links(r, 1).at(0)};
  std::sort(named.begin(), named.end());
  REQUIRE(named == std::vector<Link>{L("l0", "s0"), L("s1", "l2")});
  // The bad path crosses neither congested link (else it would be explained).
  const auto& p = *std::find_if(fleet.paths.begin(), fleet.paths.end(), [&](const auto& q) { return q.id == bad; });
  const bool crosses = std::count(p.links.begin(), p.links.end(), L("l0", "s0")) +
                           std::count(p.links.begin(), p.links.end(), L("s1", "l2")) >
                       0;
  if (crosses) {
    REQUIRE(r.bad_paths.empty());
  } else {
    REQUIRE(r.bad_paths.size() == 1);
    REQUIRE(r.bad_paths[0].id == bad);
  }
}

TEST_CASE("congestion: loss is judged only when asked for (it is a round trip's)", "[fabric]") {
  Fleet fleet(8, 2, 4, 2);
  CongestionLocator ignores;
  for (int round = 0; round < 5; ++round) ignores.Judge(fleet.Round());
  std::vector<PathDelays> lossy = fleet.Round();
  for (PathDelays& p : lossy) p.loss = 0.5;
  CongestionReport quiet = ignores.Judge(lossy);
  REQUIRE(quiet.rising == 0);
  REQUIRE(quiet.links.empty());
}

TEST_CASE("congestion: loss rising on a link's paths names it too", "[fabric]") {
  Fleet fleet(8, 2, 4, 2);
  CongestionLocator locator({.loss_rise = 0.05});
  for (int round = 0; round < 5; ++round) locator.Judge(fleet.Round());
  std::vector<PathDelays> round = fleet.Round();
  for (PathDelays& p : round) {
    if (std::count(p.links.begin(), p.links.end(), L("s1", "l3"))) p.loss = 0.2;
  }
  CongestionReport r = locator.Judge(round);
  REQUIRE(r.links.size() == 1);
  REQUIRE(Links(r, 0) == std::vector<Link>{L("s1", "l3")});
}

TEST_CASE("congestion: with spines unknown, a leaf's uplinks as a group are named when most of its paths rise",
          "[fabric]") {
  Fleet fleet(8, 2, 4, 2, /*spines_known=*/false);
  CongestionLocator locator;
  for (int round = 0; round < 5; ++round) locator.Judge(fleet.Round());
  // Every path leaving l2 for another leaf rises (both its spine links).
  CongestionReport r = locator.Judge(fleet.Round({{L("l2", "*"), 300us}}));
  REQUIRE(r.links.size() == 1);
  REQUIRE(Links(r, 0) == std::vector<Link>{L("l2", "*")});
}

TEST_CASE("congestion: Locate needs min_paths rising and min_share of a link's paths", "[fabric]") {
  const Link a = L("x", "y"), b = L("y", "z");
  CongestionOptions o{.min_paths = 2, .min_share = 0.6};
  // 2 of 4 paths over a rise: share 0.5 < 0.6, both bad paths.
  std::vector<PathRise> paths{{"p0", {a}, true}, {"p1", {a}, true}, {"p2", {a}, false}, {"p3", {a}, false}};
  CongestionReport r = Locate(paths, o);
  REQUIRE(r.links.empty());
  REQUIRE(r.bad_paths.size() == 2);
  paths[2].rising = true;  // 3 of 4
  r = Locate(paths, o);
  REQUIRE(r.links.size() == 1);
  REQUIRE(r.links[0].links == std::vector<Link>{a});
  REQUIRE(r.links[0].paths == 4);
  REQUIRE(r.bad_paths.empty());
  // One path alone on its link: never a congested link.
  r = Locate({{"q", {b}, true}}, o);
  REQUIRE(r.links.empty());
  REQUIRE(r.bad_paths.size() == 1);
}

}  // namespace
}  // namespace lockstep::fabric
