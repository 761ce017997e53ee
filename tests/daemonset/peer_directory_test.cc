// Peers from FabricHealth objects: published probe addresses, the Node
// address fallback, staleness relative to the freshest report, other
// policies and deleting objects left out.
#include <catch2/catch.hpp>

#include "lockstep/agent/kube/peer_directory.h"

namespace lockstep::agent {
namespace {

using kube::Json;

Json Health(const std::string& name, const std::string& policy, Json addresses, const std::string& reported = "") {
  Json h = {{"apiVersion", "lockstep.dev/v1alpha1"},
            {"kind", "FabricHealth"},
            {"metadata", {{"name", name}, {"labels", {{"lockstep.dev/policy", policy}}}}},
            {"status", {{"nodeName", name}}}};
  if (!addresses.is_null()) h["status"]["probeAddresses"] = addresses;
  if (!reported.empty()) h["status"]["lastReportTime"] = reported;
  return h;
}

std::vector<std::string> Names(const std::vector<PeerTarget>& v) {
  std::vector<std::string> out;
  for (const auto& p : v) out.push_back(p.name);
  return out;
}

TEST_CASE("peer directory from FabricHealths of one policy", "[daemonset][kube]") {
  std::vector<Json> healths = {
      Health("n0", "default", {"10.0.0.10:7311"}, "2026-01-01T00:10:00Z"),  // self
      Health("n1", "default", {"10.0.0.11:7400", "10.1.0.11:7400"}, "2026-01-01T00:09:55Z"),
      Health("n2", "default", nullptr),                                      // never reported
      Health("n3", "other", {"10.0.0.13:7311"}, "2026-01-01T00:10:00Z"),     // another policy
      Health("n4", "default", {"10.0.0.14:7311"}, "2026-01-01T00:05:00Z"),   // stale (5 min behind)
      Health("n5", "default", {"10.0.0.15:7311"}, "2026-01-01T00:10:00Z"),   // being deleted
      Health("n6", "default", {"not-an-address"}, "2026-01-01T00:10:00Z"),   // bad address, no node yet
  };
  healths[5]["metadata"]["deletionTimestamp"] = "2026-01-01T00:10:00Z";
  DirectoryOptions o{.self = "n0", .policy = "default", .probe_port = 7311};

  PeerDirectory d = BuildPeerDirectory(healths, {}, o);
  REQUIRE(Names(d.candidates) == std::vector<std::string>{"n1"});
  REQUIRE(d.candidates[0].endpoint == *Endpoint::Parse("10.0.0.11", 7400));  // rail 0
  REQUIRE(d.candidates[0].id == NodeIdFromName("n1"));
  REQUIRE(Names(d.known) == std::vector<std::string>{"n1", "n2", "n4", "n5", "n6"});
  REQUIRE(d.known[1].endpoint.port == 0);  // n2: address unknown, probed back where it sends from
  REQUIRE(d.need_node_address == std::vector<std::string>{"n2", "n6"});

  // With the Nodes' InternalIPs, the fallback uses the policy's probe port.
  d = BuildPeerDirectory(healths, {{"n2", "10.0.0.12"}, {"n6", "10.0.0.16"}}, o);
  REQUIRE(Names(d.candidates) == std::vector<std::string>{"n1", "n2", "n6"});
  REQUIRE(d.candidates[1].endpoint == *Endpoint::Parse("10.0.0.12", 7311));
  REQUIRE(d.need_node_address.empty());

  // Fallback off: only published addresses count.
  o.node_address_fallback = false;
  d = BuildPeerDirectory(healths, {{"n2", "10.0.0.12"}}, o);
  REQUIRE(Names(d.candidates) == std::vector<std::string>{"n1"});
  REQUIRE(d.need_node_address.empty());
}

TEST_CASE("staleness is relative to the policy's median report", "[daemonset][kube]") {
  DirectoryOptions o{.self = "n0", .policy = "default", .node_address_fallback = false,
                     .stale_after = std::chrono::seconds(90)};
  std::vector<Json> healths = {Health("n1", "default", {"10.0.0.11:7311"}, "2026-01-01T00:00:00Z"),
                               Health("n2", "default", {"10.0.0.12:7311"}, "2026-01-01T00:00:30Z")};
  // A global reporting pause (API outage) keeps every peer, however old.
  REQUIRE(BuildPeerDirectory(healths, {}, o).candidates.size() == 2);
  for (const char* n : {"n0", "n3", "n4"}) {
    healths.push_back(Health(n, "default", {"10.0.0.13:7311"}, "2026-01-01T00:02:00Z"));
  }
  // Median 00:02:00: n1 is 120 s behind (gone), n2 90 s (not more than stale_after).
  REQUIRE(Names(BuildPeerDirectory(healths, {}, o).candidates) == std::vector<std::string>{"n2", "n3", "n4"});
  // One agent with a wall clock an hour ahead does not make the others stale.
  healths.push_back(Health("n5", "default", {"10.0.0.15:7311"}, "2026-01-01T01:02:00Z"));
  REQUIRE(Names(BuildPeerDirectory(healths, {}, o).candidates) == std::vector<std::string>{"n2", "n3", "n4", "n5"});
}

TEST_CASE("probe addresses and node addresses parse strictly", "[daemonset][kube]") {
  REQUIRE(ParseProbeAddress("10.0.0.1:7311").ok());
  REQUIRE_FALSE(ParseProbeAddress("10.0.0.1").ok());
  REQUIRE_FALSE(ParseProbeAddress("10.0.0.1:0").ok());
  REQUIRE_FALSE(ParseProbeAddress("host:7311").ok());
  Json node = Json::parse(R"({"status":{"addresses":[{"type":"Hostname","address":"n1"},
      {"type":"InternalIP","address":"fd00::1"},{"type":"InternalIP","address":"10.254.0.3"}]}})");
  REQUIRE(NodeInternalIp(node) == "10.254.0.3");
  REQUIRE_FALSE(NodeInternalIp(Json::object()).has_value());
}

}  // namespace
}  // namespace lockstep::agent
