#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "lockstep/agent/peer_selection.h"

namespace lockstep::agent {
namespace {

std::vector<PeerConfig> Cluster(int n) {
  std::vector<PeerConfig> out;
  for (int i = 0; i < n; ++i) out.push_back({"node-" + std::to_string(i), "10.0.0." + std::to_string(i % 250), 0});
  return out;
}

TEST_CASE("peer selection picks k distinct peers, never self, reproducibly", "[daemonset][peers]") {
  auto all = Cluster(1000);
  auto a = SelectPeers(all, "node-7", 16, 99);
  REQUIRE(a.size() == 16);
  std::set<std::string> names;
  for (const auto& p : a) names.insert(p.name);
  REQUIRE(names.size() == 16);
  REQUIRE_FALSE(names.contains("node-7"));
  REQUIRE(SelectPeers(all, "node-7", 16, 99) == a);
  // Input order does not matter; the seed does.
  std::reverse(all.begin(), all.end());
  REQUIRE(SelectPeers(all, "node-7", 16, 99) == a);
  REQUIRE(SelectPeers(all, "node-7", 16, 100) != a);
}

TEST_CASE("peer selection returns everyone in a small cluster", "[daemonset][peers]") {
  auto all = Cluster(5);
  auto a = SelectPeers(all, "node-0", 16, 1);
  REQUIRE(a.size() == 4);
  all.push_back(all[1]);  // duplicates collapse
  REQUIRE(SelectPeers(all, "node-0", 16, 1).size() == 4);
}

TEST_CASE("peer selection is stable: a node joining or leaving changes at most one choice", "[daemonset][peers]") {
  auto all = Cluster(200);
  const auto before = SelectPeers(all, "node-7", 16, 5);
  auto names = [](const std::vector<PeerConfig>& v) {
    std::set<std::string> s;
    for (const auto& p : v) s.insert(p.name);
    return s;
  };
  auto diff = [&](const std::vector<PeerConfig>& a, const std::vector<PeerConfig>& b) {
    std::set<std::string> x = names(a), y = names(b);
    size_t d = 0;
    for (const auto& n : x) d += y.contains(n) ? 0 : 1;
    return d;
  };
  auto joined = all;
  joined.push_back({"node-new", "10.0.1.1", 0});
  REQUIRE(diff(before, SelectPeers(joined, "node-7", 16, 5)) <= 1);
  for (const PeerConfig& gone : before) {
    auto left = all;
    std::erase(left, gone);
    auto after = SelectPeers(left, "node-7", 16, 5);
    REQUIRE(after.size() == 16);
    REQUIRE(diff(before, after) == 1);  // only the one that left is replaced
  }
  REQUIRE(SelectPeerNames({"b", "a", "c", "a"}, "b", 16, 1) == std::vector<std::string>{"a", "c"});
}

}  // namespace
}  // namespace lockstep::agent
