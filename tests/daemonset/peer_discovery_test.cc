// PeerDiscovery against the in-memory API server: the peer set follows the
// FabricHealths of our policy as agents publish addresses, nodes come and go,
// and falls back to Node InternalIPs. Synchronous: ListOnce() fills the
// informer's store on the test's thread (no list/watch thread), then Tick().
#include <catch2/catch.hpp>

#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/agent/kube/peer_discovery.h"

namespace lockstep::agent {
namespace {

using kube::Json;

using kube::gvr::kFabricHealths;

struct Fixture {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  metrics::Registry registry;
  std::vector<PeerSet> changes;

  PeerDiscovery Make(bool fallback, int peers = 16) {
    return PeerDiscovery(api, clock,
                         PeerDiscoveryOptions{.directory = {.self = "n0",
                                                            .policy = "default",
                                                            .probe_port = 7311,
                                                            .node_address_fallback = fallback},
                                              .peers_per_node = peers,
                                              .seed = 3},
                         [this](const PeerSet& s) { changes.push_back(s); },
                         registry);
  }
  void Health(const std::string& name, const std::string& address, const std::string& policy = "default") {
    Json obj = {{"apiVersion", "lockstep.dev/v1alpha1"},
                {"kind", "FabricHealth"},
                {"metadata", {{"name", name}, {"labels", {{"lockstep.dev/policy", policy}}}}}};
    REQUIRE(api.Create(kFabricHealths, "", obj).ok());
    if (address.empty()) return;
    Json st = {{"probeAddresses", {address}}, {"lastReportTime", "2026-01-01T00:00:00Z"}};
    REQUIRE(api.MergePatch(kFabricHealths, "", name, {{"status", st}}, "status").ok());
  }
  // Lists the API server's FabricHealths once and ticks; returns the selected
  // peers of the last set handed over ("name@endpoint").
  std::vector<std::string> ListAndTick(PeerDiscovery& d) {
    REQUIRE(d.ListOnce().ok());
    d.Tick();
    std::vector<std::string> got;
    if (changes.empty()) return got;
    for (const auto& p : changes.back().selected) got.push_back(p.name + "@" + p.endpoint.ToString());
    return got;
  }
};

TEST_CASE("discovery follows FabricHealths of the policy as nodes come and go", "[daemonset][kube]") {
  Fixture f;
  f.Health("n0", "127.0.0.1:40000");  // ourselves
  f.Health("n1", "127.0.0.1:40001");
  f.Health("n2", "127.0.0.1:40002");
  f.Health("x1", "127.0.0.1:40009", "other");
  PeerDiscovery d = f.Make(/*fallback=*/false);
  using Names = std::vector<std::string>;
  REQUIRE(f.ListAndTick(d) == Names{"n1@127.0.0.1:40001", "n2@127.0.0.1:40002"});
  REQUIRE(f.changes.back().known.size() == 2);

  // A node joins; its agent publishes later.
  f.Health("n3", "");
  REQUIRE(f.ListAndTick(d) == Names{"n1@127.0.0.1:40001", "n2@127.0.0.1:40002"});  // no address yet, no fallback
  REQUIRE(f.changes.back().known.size() == 3);
  REQUIRE(f.api.MergePatch(kFabricHealths, "", "n3",
                           {{"status", {{"probeAddresses", {"127.0.0.1:40003"}},
                                        {"lastReportTime", "2026-01-01T00:00:05Z"}}}},
                           "status")
              .ok());
  REQUIRE(f.ListAndTick(d) == Names{"n1@127.0.0.1:40001", "n2@127.0.0.1:40002", "n3@127.0.0.1:40003"});

  // A restarted agent publishes a new port; a node goes away.
  REQUIRE(f.api.MergePatch(kFabricHealths, "", "n1", {{"status", {{"probeAddresses", {"127.0.0.1:40011"}}}}},
                           "status")
              .ok());
  REQUIRE(f.api.Delete(kFabricHealths, "", "n2").ok());
  REQUIRE(f.ListAndTick(d) == Names{"n1@127.0.0.1:40011", "n3@127.0.0.1:40003"});

  // Nothing changes, nothing is handed over again.
  const size_t n = f.changes.size();
  for (int i = 0; i < 20; ++i) d.Tick();
  REQUIRE(f.changes.size() == n);
  REQUIRE(f.registry.Render().find("lockstep_agent_discovered_peers 2") != std::string::npos);
}

TEST_CASE("discovery falls back to the Node's InternalIP and the policy's probe port", "[daemonset][kube]") {
  Fixture f;
  f.Health("n1", "");
  f.Health("n2", "");
  Json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", "n1"}}},
               {"status", {{"addresses", {{{"type", "InternalIP"}, {"address", "10.254.0.1"}}}}}}};
  REQUIRE(f.api.Create(kube::gvr::kNodes, "", node).ok());
  PeerDiscovery d = f.Make(/*fallback=*/true);
  using Names = std::vector<std::string>;
  REQUIRE(f.ListAndTick(d) == Names{"n1@10.254.0.1:7311"});  // n2 has no Node (yet)
  // Failed lookups are not repeated on every tick.
  const uint64_t gets = f.api.CallCount(kube::Verb::kGet);
  for (int i = 0; i < 10; ++i) d.Tick();
  REQUIRE(f.api.CallCount(kube::Verb::kGet) == gets);
  node["metadata"]["name"] = "n2";
  node["status"]["addresses"][0]["address"] = "10.254.0.2";
  REQUIRE(f.api.Create(kube::gvr::kNodes, "", node).ok());
  f.clock.Advance(std::chrono::seconds(61));
  d.Tick();  // the retry is due: no new list needed
  REQUIRE(f.changes.back().selected.size() == 2);
  REQUIRE(f.changes.back().selected[1].endpoint.ToString() == "10.254.0.2:7311");
}

}  // namespace
}  // namespace lockstep::agent
