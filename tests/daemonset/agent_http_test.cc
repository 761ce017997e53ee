#include <catch2/catch.hpp>

#include <atomic>

#include <nlohmann/json.hpp>

#include "lockstep/agent/runtime/agent_http.h"
#include "lockstep/agent/net/http_get.h"
#include "lockstep/agent/net/time_client.h"

namespace lockstep::agent {
namespace {

TEST_CASE("GET /time answers the ClockBound-style JSON", "[daemonset][http]") {
  HttpServer server;
  TimeApiSource src;
  src.node_name = "node-a";
  src.status = [](std::optional<int64_t> local) {
    ClockStatus s;
    s.reading = {local.value_or(1000), 900, 850, 950, 50, 100.0, ClockSyncState::kLocked};
    s.peers = {"node-b"};
    s.estimate.peers = 1;
    s.estimate.pure_fraction = 0.75;
    return s;
  };
  src.truth = [] { return std::optional<GroundTruth>(GroundTruth{1234, 99, 1.5}); };
  RegisterTimeRoutes(server, src);
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  auto r = HttpGet("127.0.0.1", server.port(), "/time");
  REQUIRE(r.ok());
  REQUIRE(r->status == 200);
  auto j = nlohmann::json::parse(r->body);
  REQUIRE(j["earliest_ns"] == 850);
  REQUIRE(j["latest_ns"] == 950);
  REQUIRE(j["now_ns"] == 900);
  REQUIRE(j["state"] == "LOCKED");
  REQUIRE(j["error_bound_ns"] == 50);

  auto client = GetFabricTime("127.0.0.1", server.port());
  REQUIRE(client.ok());
  REQUIRE(client->now_ns == 900);
  REQUIRE(client->error_bound_ns == 50);
  REQUIRE(client->state == "LOCKED");

  auto s = nlohmann::json::parse(HttpGet("127.0.0.1", server.port(), "/status")->body);
  REQUIRE(s["node"] == "node-a");
  REQUIRE(s["local_ns"] == 1234);  // status is taken at the ground truth's reading
  REQUIRE(s["virtual_clock"]["true_offset_ns"] == 99);
  REQUIRE(s["pure_probe_fraction"] == 0.75);
  REQUIRE(s["probe_targets"][0] == "node-b");
  server.Stop();
}

TEST_CASE("health routes report readiness and metrics", "[daemonset][http]") {
  HttpServer server;
  metrics::Registry registry;
  registry.Counter("lockstep_probe_sent_total", "sent", {"type"}).Inc({"probe"}, 2);
  std::atomic<bool> ready{false};
  std::atomic<int> refreshed{0};
  RegisterHealthRoutes(server, registry, [&] { return ready.load(); }, [&] { ++refreshed; });
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  REQUIRE(HttpGet("127.0.0.1", server.port(), "/healthz")->status == 200);
  REQUIRE(HttpGet("127.0.0.1", server.port(), "/readyz")->status == 503);
  ready = true;
  REQUIRE(HttpGet("127.0.0.1", server.port(), "/readyz")->status == 200);
  auto m = HttpGet("127.0.0.1", server.port(), "/metrics");
  REQUIRE(m->body.find("lockstep_probe_sent_total{type=\"probe\"} 2") != std::string::npos);
  REQUIRE(refreshed == 1);
  server.Stop();
  REQUIRE_FALSE(HttpGet("127.0.0.1", server.port(), "/healthz", std::chrono::milliseconds(200)).ok());
}

}  // namespace
}  // namespace lockstep::agent
