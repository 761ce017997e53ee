// The operator renders agent.yaml, the agent parses it: the values must be
// the policy's, for the default spec and for specs with every field changed.
#include <catch2/catch.hpp>

#include <random>

#include "lockstep/agent/config.h"
#include "lockstep/operator/agent_objects.h"

namespace lockstep::api {
namespace {

// What the agent reads from what the operator wrote.
AgentConfig AgentReads(const op::PolicyRef& ref, const op::PolicySpec& spec, const op::OperatorSettings& s) {
  Json cm = op::RenderAgentConfigMap(ref, spec, s);
  REQUIRE(cm["data"][kAgentConfigKey] == op::RenderAgentConfig(ref, spec, s));
  auto parsed = agent::ParseAgentConfig(cm["data"][kAgentConfigKey].get<std::string>(), kAgentConfigKey);
  if (!parsed.ok()) FAIL(parsed.error().message);
  return *parsed;
}

void RequireCarries(const AgentConfig& c, const std::string& policy, const FabricPolicySpec& spec, int health_port) {
  REQUIRE(c.policy == policy);
  REQUIRE(c.node_name.empty());
  REQUIRE(c.probe.port == spec.probe.port);
  REQUIRE(c.probe.interval_ms == spec.probe.interval_ms);
  REQUIRE(c.probe.peers_per_node == spec.probe.peers_per_node);
  REQUIRE(c.clock_sync.enabled == spec.clock_sync.enabled);
  REQUIRE(c.clock_sync.window_seconds == spec.clock_sync.window_seconds);
  REQUIRE(c.clock_sync.discipline_host_clock == spec.clock_sync.discipline_host_clock);
  REQUIRE(c.clock_sync.max_error_bound_ns == spec.clock_sync.max_error_bound_ns);
  REQUIRE(c.clock_sync.asymmetry_allowance_ns == spec.clock_sync.asymmetry_allowance_ns);
  REQUIRE(c.probe.path_interval_ms == spec.probe.path_interval_ms);
  REQUIRE(c.probe.miss_threshold == spec.probe.miss_threshold);
  REQUIRE(c.probe.idle_path_interval_ms == spec.probe.idle_path_interval_ms);
  REQUIRE(c.probe.idle_tick_ms == spec.probe.idle_tick_ms);
  REQUIRE(c.probe.traffic_aware == spec.probe.traffic_aware);
  REQUIRE(c.failover.enabled == spec.failover.enabled);
  REQUIRE(c.failover.readmit_after_seconds == spec.failover.readmit_after_seconds);
  REQUIRE(c.failover.max_hold_down_seconds == spec.failover.max_hold_down_seconds);
  REQUIRE(c.failover.hold_down_decay_seconds == spec.failover.hold_down_decay_seconds);
  REQUIRE(c.flap_alert_per_hour == spec.flap_alert_per_hour);
  REQUIRE(c.fabric.rails == spec.rails);
  REQUIRE(c.fabric.host_interface == spec.host_interface);
  REQUIRE(c.gpu == spec.gpu);
  REQUIRE(c.latency == spec.latency);
  REQUIRE(c.health_addr.port == health_port);
  REQUIRE(c.probe_key_file == kProbeKeyFile);
  REQUIRE(c == AgentConfigForPolicy(policy, spec, health_port));
}

TEST_CASE("operator renders, agent parses: the default policy", "[api]") {
  op::OperatorSettings s;
  FabricPolicySpec spec = *op::ParsePolicySpec("default", nullptr);
  RequireCarries(AgentReads({"default", "u"}, spec, s), "default", spec, s.agent_health_port);
}

TEST_CASE("operator renders, agent parses: specs with every field changed", "[api]") {
  std::mt19937_64 rng(7);  // seeded: the same specs every run
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 50; ++i) {
    Json j = {{"probe", {{"intervalMs", pick(1, kMaxProbeIntervalMs)},
                         {"peersPerNode", pick(1, kMaxPeersPerNode)},
                         {"port", pick(kMinProbePort, 65535)},
                         {"pathIntervalMs", pick(1, kMaxProbeIntervalMs)},
                         {"missThreshold", pick(1, kMaxMissThreshold)}}},
              {"clockSync", {{"enabled", pick(0, 1) == 1},
                             {"windowSeconds", pick(1, kMaxWindowSeconds)},
                             {"disciplineHostClock", pick(0, 1) == 1},
                             {"maxErrorBoundNs", pick(1, kMaxMaxErrorBoundNs)},
                             {"asymmetryAllowanceNs", pick(0, kMaxAsymmetryAllowanceNs)}}},
              {"flapAlertPerHour", pick(1, kMaxFlapAlertPerHour)}};
    const int64_t readmit = pick(1, kMaxReadmitAfterSeconds);
    j["failover"] = {{"enabled", pick(0, 1) == 1},
                     {"readmitAfterSeconds", readmit},
                     {"maxHoldDownSeconds", pick(readmit, kMaxMaxHoldDownSeconds)},
                     {"holdDownDecaySeconds", pick(1, kMaxHoldDownDecaySeconds)}};
    Json rails = Json::array();
    for (int64_t r = 0, n = pick(0, kMaxRails); r < n; ++r) rails.push_back("ens" + std::to_string(r) + "f" + std::to_string(i));
    j["rails"] = rails;
    j["hostInterface"] = "lo" + std::to_string(pick(0, 99));
    Json xids = Json::array();
    for (int64_t x = 0, n = pick(0, 8); x < n; ++x) xids.push_back(100 * x + pick(1, 99));  // distinct
    j["gpu"] = {{"mode", GpuModes()[static_cast<size_t>(pick(0, 2))]},
                {"pollIntervalSeconds", pick(1, kMaxGpuPollIntervalSeconds)},
                {"earlyWarning", {{"gpuTempCelsius", pick(kMinGpuTempCelsius, kMaxGpuTempCelsius)},
                                  {"slowdownMarginCelsius", pick(0, kMaxGpuSlowdownMarginCelsius)},
                                  {"eccSingleBitPerHour", pick(1, kMaxEccSingleBitPerHour)},
                                  {"pendingRowRemaps", pick(0, 1) == 1},
                                  {"xids", xids}}}};
    const int64_t idle = pick(0, kMaxProbeIntervalMs);
    j["probe"]["idlePathIntervalMs"] = idle;
    j["probe"]["idleTickMs"] = pick(0, idle > 0 ? idle / 2 : kMaxProbeIntervalMs);
    j["probe"]["trafficAware"] = pick(0, 1) == 1;
    const std::string name = "policy-" + std::to_string(i);
    auto spec = op::ParsePolicySpec(name, j);
    REQUIRE(spec.ok());
    op::OperatorSettings s;
    Json lat_rails = Json::array();
    for (const Json& r : rails) {
      if (pick(0, 1) == 1)
        lat_rails.push_back({{"name", r}, {"oneWayDelayP99Micros", pick(1, kMaxOneWayDelayP99Micros)}});
    }
    j["latency"] = {{"minSamples", pick(1, kMaxLatencyMinSamples)}, {"rails", lat_rails}};
    if (pick(0, 1) == 1) j["latency"]["oneWayDelayP99Micros"] = pick(1, kMaxOneWayDelayP99Micros);
    s.agent_health_port = static_cast<int>(pick(1024, 65000));
    RequireCarries(AgentReads({name, "u"}, *spec, s), name, *spec, s.agent_health_port);
  }
}

TEST_CASE("agent.yaml with peers survives render and parse", "[api]") {
  AgentConfig c;
  c.node_name = "n0";
  c.peers = {{"n1", "10.0.0.1", 0}, {"n2", "10.0.0.2", 7400}};
  auto back = ParseAgentConfig(RenderAgentConfigYaml(c), "agent.yaml");
  REQUIRE(back.ok());
  REQUIRE(*back == c);
}

TEST_CASE("agent.yaml with a fabric section and peer host addresses survives render and parse", "[api]") {
  AgentConfig c;
  c.node_name = "n0";
  c.fabric.rails = {"rail0", "rail1"};
  c.fabric.host_address = "10.0.200.1";
  c.fabric.host_interface = "lo0";
  c.fabric.port = 0;
  c.peers = {{"n1", "10.0.0.2", 0, "", "10.0.200.2"}, {"n2", "10.0.0.3", 0}};
  auto back = ParseAgentConfig(RenderAgentConfigYaml(c), "agent.yaml");
  REQUIRE(back.ok());
  REQUIRE(*back == c);
}

TEST_CASE("agent.yaml with a gpu section survives render and parse", "[api]") {
  AgentConfig c;
  c.node_name = "n0";
  c.gpu.mode = kGpuModeRequired;
  c.gpu.poll_interval_seconds = 3;
  c.gpu.early_warning = {.gpu_temp_celsius = 80,
                         .slowdown_margin_celsius = 0,
                         .ecc_single_bit_per_hour = 7,
                         .pending_row_remaps = false,
                         .xids = {79, 13}};
  auto back = ParseAgentConfig(RenderAgentConfigYaml(c), "agent.yaml");
  REQUIRE(back.ok());
  REQUIRE(*back == c);
  c.gpu.early_warning.xids.clear();  // an empty list is not the default list
  back = ParseAgentConfig(RenderAgentConfigYaml(c), "agent.yaml");
  REQUIRE(back.ok());
  REQUIRE(back->gpu.early_warning.xids.empty());
}

TEST_CASE("agent.yaml gpu mistakes are errors that name the key", "[api]") {
  auto err = [](const std::string& yaml) {
    auto r = ParseAgentConfig(yaml, "agent.yaml");
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK(err("gpu: {mode: on}\n").find("gpu.mode must be one of Auto, Required, Disabled (got \"on\")") !=
        std::string::npos);
  CHECK(err("gpu: {pollIntervalSeconds: 0}\n").find("gpu.pollIntervalSeconds must be between 1 and 3600") !=
        std::string::npos);
  CHECK(err("gpu: {earlyWarning: {gpuTempCelsius: 20}}\n").find("gpu.earlyWarning.gpuTempCelsius must be between 30") !=
        std::string::npos);
  CHECK(err("gpu: {earlyWarning: {xids: [79, 79]}}\n").find("gpu.earlyWarning.xids lists 79 twice") !=
        std::string::npos);
  CHECK(err("gpu: {earlyWarning: {xids: [0]}}\n").find("gpu.earlyWarning.xids[0] must be an integer between 1") !=
        std::string::npos);
  CHECK(err("gpu: {earlyWarning: {xid: [79]}}\n").find("unknown key gpu.earlyWarning.xid") != std::string::npos);
  CHECK(err("gpu: {enabled: true}\n").find("unknown key gpu.enabled") != std::string::npos);
  AgentConfig defaults = *ParseAgentConfig("nodeName: a\n", "agent.yaml");
  CHECK(defaults.gpu == GpuSpec{});
  CHECK(defaults.gpu.mode == "Auto");
}

TEST_CASE("agent.yaml with a latency section survives render and parse", "[api]") {
  AgentConfig c;
  c.fabric.rails = {"rail0", "rail1"};
  auto back = ParseAgentConfig(RenderAgentConfigYaml(c), "agent.yaml");
  REQUIRE(back.ok());
  REQUIRE(back->latency == LatencySpec{});
  REQUIRE_FALSE(back->latency.one_way_delay_p99_micros);
  c.latency.one_way_delay_p99_micros = 250;
  c.latency.min_samples = 7;
  c.latency.rails = {{"rail1", 1}};
  back = ParseAgentConfig(RenderAgentConfigYaml(c), "agent.yaml");
  REQUIRE(back.ok());
  REQUIRE(*back == c);
  REQUIRE(back->latency.rails[0].one_way_delay_p99_micros == 1);
}

TEST_CASE("agent.yaml latency mistakes are errors that name the key", "[api]") {
  auto err = [](const std::string& yaml) {
    auto r = ParseAgentConfig(yaml, "agent.yaml");
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  const std::string rails = "fabric: {rails: [rail0, rail1]}\n";
  CHECK(err(rails + "latency: {oneWayDelayP99Micros: 0}\n")
            .find("latency.oneWayDelayP99Micros must be between 1 and 10000000") != std::string::npos);
  CHECK(err(rails + "latency: {minSamples: 0}\n").find("latency.minSamples must be between 1 and 10000") !=
        std::string::npos);
  CHECK(err(rails +
            "latency: {rails: [{name: rail0, oneWayDelayP99Micros: 5}, {name: rail0, oneWayDelayP99Micros: 6}]}\n")
            .find("latency.rails names rail \"rail0\" twice") != std::string::npos);
  CHECK(err(rails + "latency: {rails: [{name: rail9, oneWayDelayP99Micros: 5}]}\n")
            .find("latency.rails[0].name: \"rail9\" is not one of fabric.rails") != std::string::npos);
  CHECK(
      err(rails + "latency: {rails: [{name: rail0}]}\n").find("latency.rails[0] needs name and oneWayDelayP99Micros") !=
      std::string::npos);
  CHECK(err(rails + "latency: {rails: {name: rail0}}\n").find("latency.rails must be a list") != std::string::npos);
  CHECK(err(rails + "latency: {p99: 5}\n").find("unknown key latency.p99") != std::string::npos);
  CHECK(err(rails + "latency: {rails: [{name: rail0, oneWayDelayP99Micros: 5, x: 1}]}\n")
            .find("unknown key latency.rails[0].x") != std::string::npos);
}

TEST_CASE("agent.yaml fabric mistakes are errors that name the key", "[api]") {
  auto err = [](const std::string& yaml) {
    auto r = ParseAgentConfig(yaml, "agent.yaml");
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK(err("fabric: {rails: rail0}\n").find("fabric.rails must be a list") != std::string::npos);
  CHECK(err("fabric: {rails: [rail0, rail0]}\n").find("names \"rail0\" twice") != std::string::npos);
  CHECK(err("fabric: {hostAddress: host0}\n").find("fabric.hostAddress must be an IPv4") != std::string::npos);
  CHECK(err("fabric: {rail: [rail0]}\n").find("unknown key fabric.rail") != std::string::npos);
  CHECK(err("peers: [{name: a, address: 10.0.0.1, hostAddress: x}]\n").find("peers[0].hostAddress") !=
        std::string::npos);
  AgentConfig defaults = *ParseAgentConfig("nodeName: a\n", "agent.yaml");
  CHECK(defaults.fabric.rails.empty());
  CHECK(defaults.fabric.port == kFabricProbePort);
  CHECK(defaults.fabric.host_interface == "host0");
  // Paths per rail and peer: 1 to 16, each path's source port port + i within 65535; rendered back.
  CHECK(defaults.fabric.paths_per_rail == kFabricPathsPerRail);
  CHECK(err("fabric: {pathsPerRail: 0}\n").find("fabric.pathsPerRail must be between 1 and 16") != std::string::npos);
  CHECK(err("fabric: {pathsPerRail: 17}\n").find("fabric.pathsPerRail") != std::string::npos);
  CHECK(err("fabric: {port: 65530, pathsPerRail: 8}\n").find("fabric.port + fabric.pathsPerRail") != std::string::npos);
  AgentConfig two = *ParseAgentConfig("fabric: {rails: [rail0], pathsPerRail: 2}\n", "agent.yaml");
  CHECK(two.fabric.paths_per_rail == 2);
  CHECK(ParseAgentConfig(RenderAgentConfigYaml(two), "rendered")->fabric.paths_per_rail == 2);
}

}  // namespace
}  // namespace lockstep::api
