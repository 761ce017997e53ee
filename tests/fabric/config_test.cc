// The typed settings (agent.yaml, from a FabricPolicy) become the core's options.
#include <catch2/catch.hpp>

#include "lockstep/fabric/config.h"

namespace lockstep::fabric {
namespace {

using namespace std::chrono_literals;

TEST_CASE("the default policy's settings are the core's defaults and meet the detection goal", "[fabric]") {
  auto o = FabricOptionsFromConfig(api::AgentConfig{});
  REQUIRE(o.ok());
  const FabricOptions d;
  REQUIRE(o->probe_interval == d.probe_interval);
  REQUIRE(o->reply_timeout == d.reply_timeout);
  REQUIRE(o->urgent_timeout == d.urgent_timeout);
  REQUIRE(o->miss_threshold == d.miss_threshold);
  REQUIRE(o->readmit_after == d.readmit_after);
  REQUIRE(o->max_hold_down == d.max_hold_down);
  REQUIRE(o->hold_down_decay == d.hold_down_decay);
  REQUIRE(o->flap_alert_per_hour == d.flap_alert_per_hour);
  REQUIRE(o->failover_enabled);
  REQUIRE(WorstCaseDetection(*o) <= 50ms);
}

TEST_CASE("every failover setting reaches the options", "[fabric]") {
  auto c = api::ParseAgentConfig(
      "probe: {pathIntervalMs: 25, missThreshold: 5}\n"
      "failover: {enabled: false, readmitAfterSeconds: 7, maxHoldDownSeconds: 70, holdDownDecaySeconds: 9}\n"
      "flapAlertPerHour: 3\n",
      "agent.yaml");
  REQUIRE(c.ok());
  auto o = FabricOptionsFromConfig(*c);
  REQUIRE(o.ok());
  REQUIRE(o->probe_interval == 25ms);
  REQUIRE(o->reply_timeout == 30500us);  // the peer acks with its next probe, <= 27.5 ms later; + 3 ms slack
  REQUIRE(o->miss_threshold == 5);
  REQUIRE_FALSE(o->failover_enabled);
  REQUIRE(o->readmit_after == 7s);
  REQUIRE(o->max_hold_down == 70s);
  REQUIRE(o->hold_down_decay == 9s);
  REQUIRE(o->flap_alert_per_hour == 3);
}

TEST_CASE("tiered probing settings reach the options, and an idle interval under two fast ones turns it off",
          "[fabric]") {
  auto o = FabricOptionsFromConfig(api::AgentConfig{});
  REQUIRE(o.ok());
  REQUIRE(o->idle_interval == 500ms);
  REQUIRE(o->idle_tick == 100ms);
  REQUIRE(WorstCaseDetectionIdle(*o) == 623ms);
  auto c = api::ParseAgentConfig("probe: {idlePathIntervalMs: 2000, trafficAware: false}\n", "agent.yaml");
  REQUIRE(c.ok());
  REQUIRE_FALSE(c->probe.traffic_aware);
  o = FabricOptionsFromConfig(*c);
  REQUIRE(o.ok());
  REQUIRE(o->idle_interval == 2s);
  for (const char* off : {"probe: {idlePathIntervalMs: 0}\n", "probe: {pathIntervalMs: 300, idlePathIntervalMs: 500}\n"}) {
    c = api::ParseAgentConfig(off, "agent.yaml");
    REQUIRE(c.ok());
    o = FabricOptionsFromConfig(*c);
    REQUIRE(o.ok());
    REQUIRE(o->idle_interval == 0ms);
    REQUIRE(WorstCaseDetectionIdle(*o) == WorstCaseDetection(*o));
  }
  // Idle ticks: idleTickMs, off at 0, under two fast intervals, or without tiers.
  c = api::ParseAgentConfig("probe: {idleTickMs: 200}\n", "agent.yaml");
  REQUIRE(c.ok());
  o = FabricOptionsFromConfig(*c);
  REQUIRE(o.ok());
  REQUIRE(o->idle_tick == 200ms);
  REQUIRE(IdleAckTimeout(*o) == 18400us + 204600us);  // + (200 - 14) x 1.1
  for (const char* off : {"probe: {idleTickMs: 0}\n", "probe: {idleTickMs: 27}\n", "probe: {idlePathIntervalMs: 0}\n"}) {
    c = api::ParseAgentConfig(off, "agent.yaml");
    REQUIRE(c.ok());
    o = FabricOptionsFromConfig(*c);
    REQUIRE(o.ok());
    REQUIRE(o->idle_tick == 0ms);
    REQUIRE_FALSE(IdleTicks(*o));
  }
  // More than half the idle interval: refused, saying so.
  c = api::ParseAgentConfig("probe: {idleTickMs: 300}\n", "agent.yaml");
  REQUIRE(c.ok());
  o = FabricOptionsFromConfig(*c);
  REQUIRE_FALSE(o.ok());
  REQUIRE(o.error().message.find("idle_tick") != std::string::npos);
  // Rendered (FabricPolicy fields since 2026-11-29) and read back.
  api::AgentConfig a;
  a.probe.idle_path_interval_ms = 0;
  a.probe.idle_tick_ms = 0;
  a.probe.traffic_aware = false;
  auto back = api::ParseAgentConfig(api::RenderAgentConfigYaml(a), "agent.yaml");
  REQUIRE(back.ok());
  REQUIRE(back->probe == a.probe);
  REQUIRE(api::RenderAgentConfigYaml(api::AgentConfig{}).find("idleTickMs: 100") != std::string::npos);
}

TEST_CASE("latency SLAs reach the options, per-rail ones by the rail's index", "[fabric]") {
  const LatencySlaOptions none = LatencySlaOptionsFromConfig(api::AgentConfig{});
  REQUIRE_FALSE(none.all_rails);
  REQUIRE(none.per_rail.empty());
  REQUIRE(none.min_samples == api::kLatencyMinSamples);
  auto c = api::ParseAgentConfig(
      "fabric: {rails: [rail0, rail1]}\n"
      "latency: {oneWayDelayP99Micros: 250, minSamples: 80, rails: [{name: rail1, oneWayDelayP99Micros: 3}]}\n",
      "agent.yaml");
  REQUIRE(c.ok());
  const LatencySlaOptions o = LatencySlaOptionsFromConfig(*c);
  REQUIRE(o.all_rails == 250us);
  REQUIRE(o.per_rail == std::map<int, Nanos>{{1, 3us}});
  REQUIRE(o.min_samples == 80);
  REQUIRE(SlaFor(o, 0) == 250us);
  REQUIRE(SlaFor(o, 1) == 3us);
}

}  // namespace
}  // namespace lockstep::fabric
