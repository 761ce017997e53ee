#include <catch2/catch.hpp>

#include "lockstep/agent/config.h"

namespace lockstep::agent {
namespace {

const char* kExample = R"(
policy: default
nodeName: ""
probe: {port: 7400, intervalMs: 25, peersPerNode: 12}
clockSync: {enabled: true, windowSeconds: 3, disciplineHostClock: false, maxErrorBoundNs: 900, asymmetryAllowanceNs: 40}
probeKeyFile: /run/key
healthAddr: 0.0.0.0:9700
timeApiAddr: 127.0.0.1:9701
peers:
  - {name: node-b, address: 10.0.0.2}
  - {name: node-c, address: "10.0.0.3:7400"}
)";

std::string ErrorOf(const std::string& yaml) {
  auto r = ParseAgentConfig(yaml, "agent.yaml");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.code() == ErrorCode::kInvalidArgument);
  return r.error().message;
}

TEST_CASE("the documented agent.yaml parses", "[daemonset][config]") {
  auto c = ParseAgentConfig(kExample, "agent.yaml");
  REQUIRE(c.ok());
  REQUIRE(c->policy == "default");
  REQUIRE(c->node_name.empty());
  REQUIRE(c->probe.port == 7400);
  REQUIRE(c->probe.interval_ms == 25);
  REQUIRE(c->probe.peers_per_node == 12);
  REQUIRE(c->clock_sync.window_seconds == 3);
  REQUIRE(c->clock_sync.max_error_bound_ns == 900);
  REQUIRE(c->clock_sync.asymmetry_allowance_ns == 40);
  REQUIRE(c->probe_key_file == "/run/key");
  REQUIRE(c->health_addr == HostPort{"0.0.0.0", 9700});
  REQUIRE(c->time_api_addr == HostPort{"127.0.0.1", 9701});
  REQUIRE(c->peers.size() == 2);
  REQUIRE(c->peers[0] == PeerConfig{"node-b", "10.0.0.2", 0});
  REQUIRE(c->peers[1] == PeerConfig{"node-c", "10.0.0.3", 7400});
}

TEST_CASE("an empty config gives the defaults", "[daemonset][config]") {
  auto c = ParseAgentConfig("", "agent.yaml");
  REQUIRE(c.ok());
  REQUIRE(*c == AgentConfig{});
}

TEST_CASE("unknown keys are errors that list the allowed keys", "[daemonset][config]") {
  std::string e = ErrorOf("probe: {intervalMS: 20}\n");
  REQUIRE(e ==
          "agent.yaml: unknown key probe.intervalMS (allowed: port, intervalMs, peersPerNode, pathIntervalMs, "
          "missThreshold, idlePathIntervalMs, idleTickMs, trafficAware)");
  REQUIRE(ErrorOf("colour: blue\n").find("unknown key colour") != std::string::npos);
  REQUIRE(ErrorOf("peers: [{name: a, address: 10.0.0.1, zone: x}]\n").find("unknown key peers[0].zone") !=
          std::string::npos);
}

TEST_CASE("bad values name the key and the allowed range", "[daemonset][config]") {
  REQUIRE(ErrorOf("probe: {intervalMs: 0}\n") == "agent.yaml: probe.intervalMs must be between 1 and 60000 (got 0)");
  REQUIRE(ErrorOf("probe: {intervalMs: fast}\n") ==
          "agent.yaml: probe.intervalMs must be an integer between 1 and 60000 (got \"fast\")");
  REQUIRE(ErrorOf("probe: {port: 70000}\n").find("probe.port must be between 0 and 65535") != std::string::npos);
  REQUIRE(ErrorOf("clockSync: {enabled: maybe}\n") == "agent.yaml: clockSync.enabled must be true or false (got \"maybe\")");
  REQUIRE(ErrorOf("clockSync: {windowSeconds: 61}\n").find("clockSync.windowSeconds must be between 1 and 60") !=
          std::string::npos);
  REQUIRE(ErrorOf("healthAddr: localhost:80\n").find("healthAddr must be \"<IPv4>:<port>\"") != std::string::npos);
  REQUIRE(ErrorOf("probe: 5\n").find("probe must be a map") != std::string::npos);
  REQUIRE(ErrorOf("peers: [{name: a, address: db.example}]\n").find("peers[0].address must be an IPv4 address") !=
          std::string::npos);
  REQUIRE(ErrorOf("probe: {port: [1]}\n").find("probe.port must be an integer") != std::string::npos);
  REQUIRE(ErrorOf("probe: {\n").find("not valid YAML") != std::string::npos);
}

TEST_CASE("values of the wrong kind are errors, not exceptions", "[daemonset][config]") {
  REQUIRE(ErrorOf("probe: {port: 99999999999999999999}\n") ==
          "agent.yaml: probe.port must be an integer between 0 and 65535 (0 picks a free port) "
          "(got \"99999999999999999999\")");
  REQUIRE(ErrorOf("probe: {intervalMs: 2.5}\n") ==
          "agent.yaml: probe.intervalMs must be an integer between 1 and 60000 (got \"2.5\")");
  REQUIRE(ErrorOf("probe: {intervalMs: {a: 1}}\n") ==
          "agent.yaml: probe.intervalMs must be an integer between 1 and 60000 (got \"<map>\")");
  REQUIRE(ErrorOf("clockSync: {enabled: [true]}\n") == "agent.yaml: clockSync.enabled must be true or false (got \"list\")");
  REQUIRE(ErrorOf("clockSync: {enabled: }\n") == "agent.yaml: clockSync.enabled must be true or false (got \"null\")");
  REQUIRE(ErrorOf("- a\n") == "agent.yaml: the top level must be a map");
  REQUIRE(ErrorOf("peers: [5]\n") == "agent.yaml: peers[0] must be a map");
  auto p = ParsePeers("peers: 5\n", "peers.yaml");
  REQUIRE_FALSE(p.ok());
  REQUIRE(p.error().message == "peers.yaml: peers must be a list of {name, address[, port]}");
  auto q = ParsePeers("[{name: x\n", "peers.yaml");
  REQUIRE_FALSE(q.ok());
  REQUIRE(q.error().message.find("peers.yaml: not valid YAML") == 0);
}

TEST_CASE("loadBalancing is rejected until contention handling exists, failover keys are typed", "[daemonset][config]") {
  REQUIRE(ErrorOf("loadBalancing: true\n") ==
          "agent.yaml: loadBalancing is not supported by this agent version (load balancing is not implemented yet); "
          "remove it");
  REQUIRE(ErrorOf("failover: {enabled: maybe}\n") == "agent.yaml: failover.enabled must be true or false (got \"maybe\")");
  REQUIRE(ErrorOf("failover: {holdDown: 3}\n").find("unknown key failover.holdDown") != std::string::npos);
  REQUIRE(ErrorOf("flapAlertPerHour: 0\n") == "agent.yaml: flapAlertPerHour must be between 1 and 10000 (got 0)");
}

TEST_CASE("a peers file is a list or a map with peers", "[daemonset][config]") {
  auto a = ParsePeers("- {name: x, address: 10.0.0.9}\n", "peers.yaml");
  REQUIRE(a.ok());
  REQUIRE(a->size() == 1);
  auto b = ParsePeers("peers:\n  - {name: y, address: 10.0.0.8, port: 9000}\n", "peers.yaml");
  REQUIRE(b.ok());
  REQUIRE((*b)[0].port == 9000);
  auto c = ParsePeers("nodes: []\n", "peers.yaml");
  REQUIRE_FALSE(c.ok());
  REQUIRE(c.error().message == "peers.yaml: unknown key nodes (allowed: peers)");
}

TEST_CASE("validation after flags needs a node name and distinct peers", "[daemonset][config]") {
  AgentConfig c;
  auto v = ValidateAgentConfig(c);
  REQUIRE_FALSE(v.ok());
  REQUIRE(v.error().message.find("--node-name") != std::string::npos);
  c.node_name = "node-a";
  c.peers = {{"node-a", "10.0.0.1", 0}, {"node-b", "10.0.0.2", 0}};
  REQUIRE(ValidateAgentConfig(c).ok());  // a shared list may include us
  c.peers.push_back({"node-b", "10.0.0.3", 0});
  REQUIRE(ValidateAgentConfig(c).error().message.find("duplicate peer name \"node-b\"") != std::string::npos);
  c.peers.pop_back();
  c.bind_address = "eth0";
  REQUIRE_FALSE(ValidateAgentConfig(c).ok());
}

}  // namespace
}  // namespace lockstep::agent
