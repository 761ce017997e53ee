// CongestionPublisher and the --fabric-topology file: congestion localisation
// over one node's paths as the agent publishes it (gauges, status block,
// findings for Events), fed PathViews with synthetic one-way delays.
#include "lockstep/agent/runtime/congestion_publisher.h"

#include <catch2/catch.hpp>

#include "lockstep/agent/route.h"
#include "lockstep/agent/runtime/fabric_topology_file.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

FabricSetup Setup() {
  FabricSetup s;
  s.rails = {{"rail0", 1, 0, {*ParseIpv4("10.0.100.1"), "rail0", true}},
             {"rail1", 2, 0, {*ParseIpv4("10.0.100.2"), "rail1", true}}};
  return s;
}

const std::vector<std::string> kHosts{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"};

// 8 hosts x 2 rails striped over 4 leaves; h0's rail-0 paths to h1..h3 cross
// spine s0, to h5..h7 spine s1 (h4 shares h0's leaf l0).
fabric::FabricMap Topology() {
  fabric::FabricMap m = fabric::LayoutMap(kHosts, 2, 4, fabric::RailLayout::kStriped);
  for (int p = 1; p < 8; ++p) {
    m.SetSpine("h0", {0, kHosts[p], 0}, p <= 3 ? "s0" : "s1");
    m.SetSpine("h0", {1, kHosts[p], 0}, p % 2 ? "s0" : "s1");
  }
  return m;
}

// h0's 14 paths: 20 us p50, 30 us p99, plus `extra` on the listed ones.
std::vector<fabric::PathView> Views(const std::map<fabric::PathKey, Nanos>& extra = {}) {
  std::vector<fabric::PathView> out;
  for (const fabric::PathKey& k : fabric::EnumeratePaths(2, {"h1", "h2", "h3", "h4", "h5", "h6", "h7"})) {
    fabric::PathView v;
    v.path = k;
    v.state = fabric::PathState::kUp;
    const Nanos add = extra.count(k) ? extra.at(k) : 0ns;
    v.stats.owd_p50 = 20us + add;
    v.stats.owd_p99 = 30us + add;
    v.stats.owd_samples = 500;
    out.push_back(v);
  }
  return out;
}

double Get(metrics::Registry& r, const std::string& family, const metrics::LabelValues& lv) {
  return r.Gauge(family, "").Get(lv);
}

TEST_CASE("congestion publisher: a congested leaf-spine link is named in the gauge, the status and a finding",
          "[daemonset][fabric]") {
  metrics::Registry registry;
  CongestionPublisher pub("h0", Setup(), Topology(), {}, registry);
  REQUIRE(pub.LinksOf({0, "h1", 0}) ==
          std::vector<fabric::Link>{{"h0/rail0", "l0"}, {"l0", "s0"}, {"s0", "l1"}, {"l1", "h1/rail0"}});
  for (int i = 0; i < 5; ++i) REQUIRE(pub.Observe(Views())["congested_links"].empty());
  REQUIRE(pub.TakeFindings().empty());

  const std::map<fabric::PathKey, Nanos> queue{{{0, "h1", 0}, 2ms}, {{0, "h2", 0}, 2ms}, {{0, "h3", 0}, 2ms}};
  nlohmann::json s = pub.Observe(Views(queue));
  REQUIRE(s["topology"] == "given");
  REQUIRE(s["rising"] == 3);
  REQUIRE(s["congested_links"].size() == 1);
  CHECK(s["congested_links"][0]["links"] == nlohmann::json{"l0>s0"});
  CHECK(s["congested_links"][0]["rising"] == 3);
  CHECK(s["congested_links"][0]["paths"] == 3);
  CHECK(s["bad_paths"].empty());
  CHECK(Get(registry, "lockstep_fabric_link_congested", {"l0>s0"}) == 1);
  CHECK(Get(registry, "lockstep_fabric_paths_rising", {}) == 3);
  std::vector<CongestionFinding> found = pub.TakeFindings();
  REQUIRE(found.size() == 1);
  CHECK(found[0].kind == CongestionFinding::Kind::kLinkCongested);
  CHECK(found[0].links == std::vector<std::string>{"l0>s0"});
  // What the FabricCongested condition reads.
  CHECK(CongestionViewOf(s) == FabricCongestionView{.judged = 14, .links = {"l0>s0"}, .bad_paths = {}});
  // Still congested: no new finding; cleared: the gauge reads 0.
  pub.Observe(Views(queue));
  CHECK(pub.TakeFindings().empty());
  s = pub.Observe(Views());
  CHECK(s["congested_links"].empty());
  CHECK(Get(registry, "lockstep_fabric_link_congested", {"l0>s0"}) == 0);
}

TEST_CASE("congestion publisher: a path rising alone is a bad path, its gauge set then cleared",
          "[daemonset][fabric]") {
  metrics::Registry registry;
  CongestionPublisher pub("h0", Setup(), Topology(), {}, registry);
  for (int i = 0; i < 5; ++i) pub.Observe(Views());
  nlohmann::json s = pub.Observe(Views({{{1, "h6", 0}, 3ms}}));
  REQUIRE(s["congested_links"].empty());
  REQUIRE(s["bad_paths"].size() == 1);
  CHECK(s["bad_paths"][0]["path"] == "h6/rail1/path0");
  CHECK(s["bad_paths"][0]["baseline_p50_ns"] == 20'000);
  CHECK(CongestionViewOf(s) == FabricCongestionView{.judged = 14, .links = {}, .bad_paths = {"h6/rail1/path0"}});
  CHECK(Get(registry, "lockstep_fabric_path_bad", {"h6", "rail1"}) == 1);
  std::vector<CongestionFinding> found = pub.TakeFindings();
  REQUIRE(found.size() == 1);
  CHECK(found[0].kind == CongestionFinding::Kind::kBadPath);
  CHECK(found[0].path == "h6/rail1/path0");
  pub.Observe(Views());
  CHECK(Get(registry, "lockstep_fabric_path_bad", {"h6", "rail1"}) == 0);
}

TEST_CASE("congestion publisher: without a topology a rail's uplink is named by its gateway", "[daemonset][fabric]") {
  metrics::Registry registry;
  CongestionPublisher pub("h0", Setup(), {}, {}, registry);
  REQUIRE(pub.LinksOf({1, "h3", 0}) == std::vector<fabric::Link>{{"h0/rail1", "gw-10.0.100.2"}});
  for (int i = 0; i < 5; ++i) pub.Observe(Views());
  std::map<fabric::PathKey, Nanos> all_rail1;
  for (const auto& v : Views()) {
    if (v.path.rail == 1) all_rail1[v.path] = 1ms;
  }
  nlohmann::json s = pub.Observe(Views(all_rail1));
  REQUIRE(s["topology"] == "uplinks only");
  REQUIRE(s["congested_links"].size() == 1);
  CHECK(s["congested_links"][0]["links"] == nlohmann::json{"h0/rail1>gw-10.0.100.2"});
  CHECK(Get(registry, "lockstep_fabric_link_congested", {"h0/rail1>gw-10.0.100.2"}) == 1);
}

TEST_CASE("fabric topology file: leaves per rail and spines per path", "[daemonset][fabric]") {
  auto m = ParseFabricTopologyText(
      R"({"leaves": {"h0": ["l0", "l1"], "h1": ["l1", "l0"]},
          "spines": [{"from": "h0", "to": "h1", "rail": 0, "path": 0, "spine": "s1"}],
          "routes": [{"from": "h1", "to": "h0", "rail": 1, "nodes": ["h1/rail1", "l0", "s0", "l0", "h0/rail0"]}]})",
      "topo.json");
  REQUIRE(m.ok());
  CHECK(m->LeafOf("h1", 1) == "l0");
  CHECK(m->Route("h0", {0, "h1", 0}) ==
        std::vector<fabric::Link>{{"h0/rail0", "l0"}, {"l0", "s1"}, {"s1", "l1"}, {"l1", "h1/rail0"}});
  CHECK(m->Route("h1", {1, "h0", 0}) ==
        std::vector<fabric::Link>{{"h1/rail1", "l0"}, {"l0", "s0"}, {"s0", "l0"}, {"l0", "h0/rail0"}});
  // Rail 1: l1 to l0, no spine given: the spines as a group.
  CHECK(m->Route("h0", {1, "h1", 0}) ==
        std::vector<fabric::Link>{{"h0/rail1", "l1"}, {"l1", "*"}, {"*", "l0"}, {"l0", "h1/rail1"}});
}

TEST_CASE("fabric topology file: a bad file is rejected with the field named", "[daemonset][fabric]") {
  const auto message = [](const std::string& text) {
    auto m = ParseFabricTopologyText(text, "topo.json");
    REQUIRE_FALSE(m.ok());
    return m.error().message;
  };
  CHECK(message("{") == "topo.json: not valid JSON");
  CHECK(message("{}").find("leaves must be an object") != std::string::npos);
  CHECK(message(R"({"leaves": {}, "links": 1})").find("unknown field \"links\"") != std::string::npos);
  CHECK(message(R"({"leaves": {"h0": []}})").find("leaves.h0 must be a list") != std::string::npos);
  CHECK(message(R"({"leaves": {"h0": ["l 0"]}})").find("leaves.h0[0] is not a leaf name") != std::string::npos);
  CHECK(message(R"({"leaves": {"h0": ["l0"]}, "spines": [{"from": "h0", "to": "h1"}]})")
            .find("spines[0] needs a spine name") != std::string::npos);
  CHECK(message(R"({"leaves": {"h0": ["l0"]}, "spines": [{"from": "h0", "spine": "s0"}]})")
            .find("spines[0] needs from and to") != std::string::npos);
  CHECK(message(R"({"leaves": {"h0": ["l0"]}, "routes": [{"from": "h0", "to": "h1", "nodes": ["h0/rail0"]}]})")
            .find("routes[0].nodes must list 2 to 16") != std::string::npos);
  CHECK(message(R"({"leaves": {"h0": ["l0"]}, "spines": [{"from": "h0", "to": "h1", "spine": "s0", "rail": -1}]})")
            .find("spines[0]: rail must be") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::agent
