// The agent's start-up decisions: mode, static peers, clock-sync options.
#include <catch2/catch.hpp>

#include "lockstep/agent/app/agent_plan.h"

namespace lockstep::agent {
namespace {

TEST_CASE("agent mode: explicit credentials, static peers, in a pod", "[daemonset]") {
  CHECK(*ChooseAgentMode(true, false, false) == AgentMode::kKubernetesExplicit);
  CHECK(*ChooseAgentMode(true, false, true) == AgentMode::kKubernetesExplicit);
  auto both = ChooseAgentMode(true, true, false);
  REQUIRE_FALSE(both.ok());
  CHECK(both.error().message.find("exclusive") != std::string::npos);
  CHECK(*ChooseAgentMode(false, true, true) == AgentMode::kStandalone);
  CHECK(*ChooseAgentMode(false, false, false) == AgentMode::kStandalone);
  CHECK(*ChooseAgentMode(false, false, true) == AgentMode::kKubernetesInCluster);
}

AgentConfig Config() {
  AgentConfig c;
  c.node_name = "n0";
  c.probe.port = 7311;
  c.probe.peers_per_node = 2;
  c.peers = {{"n0", "10.0.0.1", 0}, {"n1", "10.0.0.2", 0}, {"n2", "10.0.0.3", 9000}, {"n3", "10.0.0.4", 0}};
  return c;
}

TEST_CASE("static peers resolve to probe targets, own node skipped", "[daemonset]") {
  auto known = ResolvePeers(Config());
  REQUIRE(known.ok());
  REQUIRE(known->size() == 3);
  CHECK((*known)[0].name == "n1");
  CHECK((*known)[0].endpoint.port == 7311);
  CHECK((*known)[1].endpoint.port == 9000);

  AgentConfig c = Config();
  c.probe.port = 0;
  auto no_port = ResolvePeers(c);
  REQUIRE_FALSE(no_port.ok());
  CHECK(no_port.error().message.find("\"n1\"") != std::string::npos);
  c = Config();
  c.peers[1].address = "not-an-ip";
  CHECK_FALSE(ResolvePeers(c).ok());
}

TEST_CASE("clock-sync options: the selected subset is seeded and known", "[daemonset]") {
  AgentConfig c = Config();
  auto known = *ResolvePeers(c);
  ClockSyncOptions a = MakeClockSyncOptions(c, known, 7), b = MakeClockSyncOptions(c, known, 7);
  CHECK(a.selected == b.selected);
  CHECK(a.selected.size() == 2);
  for (const auto& t : a.selected) CHECK(t.name != "n0");
  CHECK(a.known == known);
  CHECK(a.seed == 7);
  CHECK(a.interval == std::chrono::milliseconds(c.probe.interval_ms));
}

}  // namespace
}  // namespace lockstep::agent
