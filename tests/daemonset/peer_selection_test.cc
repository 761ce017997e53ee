#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace lockstep::agent
