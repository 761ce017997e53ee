#include <catch2/catch.hpp>

#include "netlab/state.h"
#include "netlab/topology.h"

namespace lockstep::netlab {
namespace {

Topology Lab4() { return BuildTopology("lab", 0, "10.77.0.0/16", {4, 2, 2, 2}, "striped", "/run/netlab/lab"); }

TEST_CASE("striped layout: rail r of host h on leaf (h + r) % leaves", "[netlab]") {
  const Params p{8, 2, 3, 2};
  CHECK(LeafOf(0, 0, p, "striped") == 0);
  CHECK(LeafOf(0, 1, p, "striped") == 1);
  CHECK(LeafOf(2, 1, p, "striped") == 0);
  CHECK(LeafOf(7, 0, p, "striped") == 1);
}

TEST_CASE("rail layout: contiguous host groups, one leaf per (group, rail)", "[netlab]") {
  const Params p{8, 2, 4, 2};  // 2 groups of 4 hosts
  CHECK(LeafOf(0, 0, p, "rail") == 0);
  CHECK(LeafOf(3, 1, p, "rail") == 1);
  CHECK(LeafOf(4, 0, p, "rail") == 2);
  CHECK(LeafOf(7, 1, p, "rail") == 3);
  const Params one_group{5, 2, 2, 1};
  for (int h = 0; h < 5; ++h) CHECK(LeafOf(h, 1, one_group, "rail") == 1);
}

TEST_CASE("addressing: hosts, gateways and leaf-spine /31s", "[netlab]") {
  const Topology t = Lab4();
  REQUIRE(t.hosts.size() == 4);
  REQUIRE(t.links.size() == 12);  // 8 host rails + 4 leaf-spine
  const HostRail& h1r1 = t.hosts[1].rails[1];
  CHECK(h1r1.ip == "10.77.1.2");
  CHECK(h1r1.subnet == "10.77.1.0/24");
  CHECK(h1r1.leaf == "l0");  // (1 + 1) % 2
  CHECK(h1r1.gateway == "10.77.100.1");
  CHECK(h1r1.ifname == "rail1");
  CHECK(h1r1.link == "h1r1");
  CHECK(t.leaves[1].gateway == "10.77.100.2");
  const Link* l1s1 = FindLink(t, "l1s1");
  REQUIRE(l1s1 != nullptr);
  CHECK(l1s1->kind == "fabric");
  CHECK(l1s1->a.ns == "lab-l1");
  CHECK(l1s1->a.ifname == "s1");
  CHECK(l1s1->a.ip == "10.77.129.3");
  CHECK(l1s1->b.ns == "lab-s1");
  CHECK(l1s1->b.ifname == "l1");
  CHECK(l1s1->b.ip == "10.77.129.2");
  CHECK(AllNamespaces(t) ==
        std::vector<std::string>{"lab-h0", "lab-h1", "lab-h2", "lab-h3", "lab-l0", "lab-l1", "lab-s0", "lab-s1"});
}

TEST_CASE("topology.json has the netlab/v1 layout, field for field", "[netlab]") {
  // As the Python netlab wrote it for a 1x1x1x1 lab.
  const char* expected = R"({
  "schema": "netlab/v1",
  "name": "lab",
  "index": 0,
  "subnet": "10.77.0.0/16",
  "layout": "striped",
  "dir": "/run/netlab/lab",
  "params": {
    "hosts": 1,
    "rails": 1,
    "leaves": 1,
    "spines": 1
  },
  "rails": [
    {
      "rail": 0,
      "subnet": "10.77.0.0/24"
    }
  ],
  "hosts": [
    {
      "name": "h0",
      "ns": "lab-h0",
      "rails": [
        {
          "rail": 0,
          "if": "rail0",
          "ip": "10.77.0.1",
          "subnet": "10.77.0.0/24",
          "gateway": "10.77.100.1",
          "leaf": "l0",
          "leaf_if": "h0r0",
          "link": "h0r0"
        }
      ],
      "addr": "10.77.200.1",
      "addr_if": "host0"
    }
  ],
  "leaves": [
    {
      "name": "l0",
      "ns": "lab-l0",
      "gateway": "10.77.100.1"
    }
  ],
  "spines": [
    {
      "name": "s0",
      "ns": "lab-s0"
    }
  ],
  "links": [
    {
      "name": "h0r0",
      "kind": "host",
      "a": {
        "node": "h0",
        "ns": "lab-h0",
        "if": "rail0",
        "ip": "10.77.0.1"
      },
      "b": {
        "node": "l0",
        "ns": "lab-l0",
        "if": "h0r0",
        "ip": "10.77.100.1"
      }
    },
    {
      "name": "l0s0",
      "kind": "fabric",
      "a": {
        "node": "l0",
        "ns": "lab-l0",
        "if": "s0",
        "ip": "10.77.128.1"
      },
      "b": {
        "node": "s0",
        "ns": "lab-s0",
        "if": "l0",
        "ip": "10.77.128.0"
      }
    }
  ],
  "host_subnet": "10.77.200.0/24",
  "hash_policy": 3,
  "hash_seed": 1
})";
  const Topology t = BuildTopology("lab", 0, "10.77.0.0/16", {1, 1, 1, 1}, "striped", "/run/netlab/lab");
  CHECK(ToJson(t).dump(2) == expected);
}

TEST_CASE("topology.json reads back to the same topology", "[netlab]") {
  Topology t = Lab4();
  t.hash_policy = 1;
  t.hash_seed = 42;
  const auto back = TopologyFromJson(nlohmann::json::parse(ToJson(t).dump()));
  REQUIRE(back.ok());
  CHECK(ToJson(*back) == ToJson(t));
  CHECK_FALSE(TopologyFromJson(nlohmann::json{{"schema", "netlab/v1"}}).ok());
}

TEST_CASE("host addresses: 10.B.200.(h+1) on host0, found by name or address", "[netlab]") {
  const Topology t = Lab4();
  CHECK(t.host_subnet == "10.77.200.0/24");
  CHECK(t.hosts[2].addr == "10.77.200.3");
  CHECK(t.hosts[2].addr_if == "host0");
  CHECK((*FindHostAddr(t, "h2a"))->name == "h2");
  CHECK((*FindHostAddr(t, "10.77.200.4"))->name == "h3");
  CHECK_FALSE(FindHostAddr(t, "h9a").ok());
  CHECK_FALSE(FindHostAddr(t, "10.77.0.1").ok());  // a rail address
}

TEST_CASE("lab parameters are checked", "[netlab]") {
  CHECK(ValidateLab("lab", {8, 2, 2, 2}, "striped").ok());
  CHECK(ValidateLab("a123456789", {200, 16, 64, 64}, "striped").ok());
  CHECK(ValidateLab("Lab", {8, 2, 2, 2}, "striped").error().message ==
        "--name must match [a-z][a-z0-9]{0,9} (namespace names are NAME-h12 etc.)");
  CHECK_FALSE(ValidateLab("a1234567890", {8, 2, 2, 2}, "striped").ok());
  CHECK_FALSE(ValidateLab("1lab", {8, 2, 2, 2}, "striped").ok());
  CHECK(ValidateLab("lab", {201, 2, 2, 2}, "striped").error().message == "--hosts must be 1..200");
  CHECK(ValidateLab("lab", {8, 0, 2, 2}, "striped").error().message == "--rails must be 1..16");
  CHECK(ValidateLab("lab", {8, 2, 65, 2}, "striped").error().message == "--leaves must be 1..64");
  CHECK(ValidateLab("lab", {8, 2, 2, 0}, "striped").error().message == "--spines must be 1..64");
  CHECK(ValidateLab("lab", {8, 2, 3, 2}, "rail").error().message ==
        "--layout rail needs --leaves to be a multiple of --rails");
}

TEST_CASE("subnet: a private /16 only", "[netlab]") {
  CHECK(*ParseLabSubnet("10.77.0.0/16") == "10.77.0.0/16");
  CHECK(ParseLabSubnet("172.20.0.0/16").ok());
  CHECK(ParseLabSubnet("192.168.0.0/16").ok());
  for (const char* bad : {"8.8.0.0/16", "10.77.1.0/16", "10.77.0.0/24", "10.77.0.0", "10.077.0.0/16",
                          "10.77.0.0/16x", "10.256.0.0/16", "fc00::/16", "192.169.0.0/16"}) {
    INFO(bad);
    CHECK(ParseLabSubnet(bad).error().message == "--subnet must be a private /16, e.g. 10.77.0.0/16");
  }
}

TEST_CASE("lab namespaces are NAME-h<k>, NAME-l<k>, NAME-s<k>", "[netlab]") {
  CHECK(IsLabNamespace("lab", "lab-h0"));
  CHECK(IsLabNamespace("lab", "lab-s12"));
  CHECK_FALSE(IsLabNamespace("lab", "lab-x0"));
  CHECK_FALSE(IsLabNamespace("lab", "lab-h"));
  CHECK_FALSE(IsLabNamespace("lab", "lab-h0b"));
  CHECK_FALSE(IsLabNamespace("lab", "lab2-h0"));
  CHECK_FALSE(IsLabNamespace("la", "lab-h0"));
}

TEST_CASE("links by name or by node", "[netlab]") {
  const Topology t = Lab4();
  CHECK(*ResolveLinks(t, "h1r0") == std::vector<std::string>{"h1r0"});
  CHECK(*ResolveLinks(t, "h2") == std::vector<std::string>{"h2r0", "h2r1"});
  CHECK(*ResolveLinks(t, "s1") == std::vector<std::string>{"l0s1", "l1s1"});
  CHECK(ResolveLinks(t, "l0")->size() == 6);  // 4 host rails + 2 spines
  CHECK(ResolveLinks(t, "h9").error().message ==
        "no link or node 'h9'; links look like h0r1 (host 0 rail 1) or l0s1 (leaf 0 - spine 1)");
  CHECK(*NodeNamespace(t, "s0") == "lab-s0");
  CHECK(NodeNamespace(t, "x").error().message == "no node 'x'");
}

TEST_CASE("endpoints: h3, h3r1 or an IP", "[netlab]") {
  const Topology t = Lab4();
  CHECK(FindEndpoint(t, "h3")->rail->ip == "10.77.0.4");
  CHECK(FindEndpoint(t, "h3r1")->rail->ip == "10.77.1.4");
  CHECK(FindEndpoint(t, "h3r01")->rail->ip == "10.77.1.4");
  CHECK(FindEndpoint(t, "10.77.1.2")->host->name == "h1");
  CHECK(FindEndpoint(t, "h03").error().message == "no host rail 'h03' (use h3, h3r1 or an IP)");
  CHECK_FALSE(FindEndpoint(t, "h3r2").ok());
  CHECK_FALSE(FindEndpoint(t, "h3r99999999999999999999").ok());
}

TEST_CASE("state.json round trip", "[netlab]") {
  LabState s;
  s.links["l0s1"] = "silent";
  s.shapes["l0s0:up"] = {"lab-l0", "s0", "tbf", 10000000, 3028, "20ms"};
  s.shapes["l0s0:down"] = {"lab-s0", "l0", "htb", 10000000, 3028, std::nullopt};
  const auto j = ToJson(s);
  CHECK(j.dump() ==
        R"({"links":{"l0s1":"silent"},"shapes":{"l0s0:down":{"ns":"lab-s0","if":"l0","qdisc":"htb","rate_bps":10000000,)"
        R"("burst_bytes":3028,"latency":null},"l0s0:up":{"ns":"lab-l0","if":"s0","qdisc":"tbf","rate_bps":10000000,)"
        R"("burst_bytes":3028,"latency":"20ms"}}})");
  const auto back = StateFromJson(nlohmann::json::parse(j.dump()));
  REQUIRE(back.ok());
  CHECK(ToJson(*back) == j);
  CHECK(LinkUp(*back, "l0s1"));  // silent keeps its routes
  CHECK(LinkUp(*back, "h0r0"));
  CHECK_FALSE(LinkUp(LabState{{{"h0r0", "down"}}, {}}, "h0r0"));
  CHECK(StateFromJson(nlohmann::json::object())->links.empty());
  CHECK_FALSE(back->napi_threads);
  CHECK_FALSE(j.contains("napi_threads"));  // unchanged for labs without it
}

TEST_CASE("state.json remembers --napi-threads", "[netlab]") {
  LabState s;
  s.napi_threads = true;
  const auto j = ToJson(s);
  CHECK(j.dump() == R"({"links":{},"shapes":{},"napi_threads":true})");
  const auto back = StateFromJson(nlohmann::json::parse(j.dump()));
  REQUIRE(back.ok());
  CHECK(back->napi_threads);
  CHECK_FALSE(StateFromJson(nlohmann::json::parse(R"({"napi_threads":"yes"})")).ok());
}

TEST_CASE("miswire: cables a host link to another leaf, addresses and all", "[netlab]") {
  Topology t = BuildTopology("lab", 0, "10.77.0.0/16", {4, 2, 2, 2}, "rail", "/run/netlab/lab");
  REQUIRE(t.hosts[2].rails[0].leaf == "l0");
  REQUIRE(Miswire(t, "h2r0:l1").ok());
  const HostRail& r = t.hosts[2].rails[0];
  CHECK(r.leaf == "l1");
  CHECK(r.gateway == "10.77.100.2");
  CHECK(r.ip == "10.77.0.3");
  for (const Link& lk : t.links) {
    if (lk.name == "h2r0") {
      CHECK(lk.b.node == "l1");
      CHECK(lk.b.ns == "lab-l1");
      CHECK(lk.b.ifname == "h2r0");
    }
  }
  CHECK(t.hosts[1].rails[0].leaf == "l0");
  CHECK_FALSE(Miswire(t, "h9r0:l1").ok());
  CHECK_FALSE(Miswire(t, "h2r0:l7").ok());
  CHECK_FALSE(Miswire(t, "h2r0").ok());
}

}  // namespace
}  // namespace lockstep::netlab
