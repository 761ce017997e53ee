#include <catch2/catch.hpp>

#include "lockstep/api/agent_config.h"
#include "lockstep/api/fabric_health.h"
#include "lockstep/api/training_job.h"
#include "lockstep/api/validation.h"

namespace lockstep::api {
namespace {

TEST_CASE("label keys and values follow Kubernetes' rules", "[api]") {
  REQUIRE(IsLabelKey("nvidia.com/gpu.present"));
  REQUIRE(IsLabelKey("zone"));
  REQUIRE_FALSE(IsLabelKey("bad key"));
  REQUIRE_FALSE(IsLabelKey("example.com/-bad"));
  REQUIRE_FALSE(IsLabelKey("Example.com/x"));
  REQUIRE_FALSE(IsLabelKey(std::string(64, 'a')));
  REQUIRE(IsLabelKey(std::string(63, 'a')));
  REQUIRE(IsLabelValue(""));
  REQUIRE_FALSE(IsLabelValue("-a-"));
}

TEST_CASE("quantities must be non-negative", "[api]") {
  REQUIRE(IsNonNegativeQuantity("50m"));
  REQUIRE(IsNonNegativeQuantity("64Mi"));
  REQUIRE(IsNonNegativeQuantity("1e3"));
  REQUIRE_FALSE(IsNonNegativeQuantity("-1"));
  REQUIRE_FALSE(IsNonNegativeQuantity("lots"));
}

TEST_CASE("a node public key is canonical base64 of 32 bytes, as the CRD's pattern says", "[api]") {
  REQUIRE(IsBase64OfSize("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=", 32));
  REQUIRE_FALSE(IsBase64OfSize("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURp=", 32));  // non-zero padding bits
  REQUIRE_FALSE(IsBase64OfSize("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHUR==", 32));
  REQUIRE_FALSE(IsBase64OfSize("abc", 32));
}

TEST_CASE("FabricHealth status: probe addresses and the node key are checked", "[api]") {
  auto bad = ParseFabricHealthStatus("n", Json::parse(R"({"probeAddresses":["10.0.0.300:7311"]})"));
  REQUIRE(bad.error().message.find("status.probeAddresses[0] must be \"<IPv4>:<port>\" with port between 1 and 65535") !=
          std::string::npos);
  REQUIRE_FALSE(ParseFabricHealthStatus("n", Json::parse(R"({"probeAddresses":["10.0.0.1:0"]})")).ok());
  auto key = ParseFabricHealthStatus("n", Json::parse(R"({"nodePublicKey":"abc"})"));
  REQUIRE(key.error().message.find("32-byte Ed25519 public key") != std::string::npos);
  REQUIRE(ParseFabricHealthStatus("n", Json::parse(R"({"probeAddresses":["10.0.0.1:7311"]})")).ok());
}

TEST_CASE("FabricHealth: the agent replaces only its own keys", "[api]") {
  Json existing = {{"policy", "default"}, {"phase", "Pending"}, {"rails", "1/1"},
                   {"conditions", Json::array()}, {"clockErrorBoundNs", 5}};
  FabricHealthAgentStatus a;
  a.phase = "Healthy";
  Json s = MergeAgentStatus(existing, a);
  REQUIRE(s["policy"] == "default");
  REQUIRE(s["phase"] == "Healthy");
  REQUIRE_FALSE(s.contains("clockErrorBoundNs"));  // the agent's, and now absent
  REQUIRE(s.contains("conditions"));
}

TEST_CASE("failover: the hold-down cap may not be below the clean period, in the CRD and in agent.yaml", "[api]") {
  auto spec = ParseFabricPolicySpec("p", Json::parse(R"({"failover":{"readmitAfterSeconds":10,"maxHoldDownSeconds":5}})"));
  REQUIRE(spec.error().message ==
          "FabricPolicy \"p\": spec.failover.maxHoldDownSeconds must be greater than or equal to "
          "spec.failover.readmitAfterSeconds (got 5 < 10); raise maxHoldDownSeconds or lower readmitAfterSeconds");
  auto yaml = ParseAgentConfig("failover: {readmitAfterSeconds: 10, maxHoldDownSeconds: 5}\n", "agent.yaml");
  REQUIRE(yaml.error().message ==
          "agent.yaml: failover.maxHoldDownSeconds must be greater than or equal to failover.readmitAfterSeconds "
          "(got 5 < 10); raise maxHoldDownSeconds or lower readmitAfterSeconds");
  REQUIRE(ParseAgentConfig("failover: {readmitAfterSeconds: 0}\n", "agent.yaml").error().message ==
          "agent.yaml: failover.readmitAfterSeconds must be between 1 and 3600 (got 0)");
  REQUIRE(ParseAgentConfig("probe: {missThreshold: 0}\n", "agent.yaml").error().message ==
          "agent.yaml: probe.missThreshold must be between 1 and 100 (got 0)");
  auto ok = ParseAgentConfig("probe: {pathIntervalMs: 5, missThreshold: 4}\nfailover: {enabled: false}\n"
                             "flapAlertPerHour: 3\n", "agent.yaml");
  REQUIRE(ok.ok());
  REQUIRE(ok->probe.path_interval_ms == 5);
  REQUIRE(ok->probe.miss_threshold == 4);
  REQUIRE_FALSE(ok->failover.enabled);
  REQUIRE(ok->flap_alert_per_hour == 3);
}

TEST_CASE("probe tiers: the idle tick may not exceed half the idle interval, and the fields reach the spec", "[api]") {
  auto bad = ParseFabricPolicySpec("p", Json::parse(R"({"probe":{"idlePathIntervalMs":300,"idleTickMs":200}})"));
  REQUIRE(bad.error().message ==
          "FabricPolicy \"p\": spec.probe.idleTickMs must be at most half of spec.probe.idlePathIntervalMs (or 0) "
          "(got 200 and 300); lower idleTickMs or raise idlePathIntervalMs");
  for (const char* ok : {R"({"probe":{"idlePathIntervalMs":0,"idleTickMs":200}})",
                         R"({"probe":{"idlePathIntervalMs":400,"idleTickMs":0}})",
                         R"({"probe":{"idlePathIntervalMs":400,"idleTickMs":200,"trafficAware":false}})"}) {
    auto spec = ParseFabricPolicySpec("p", Json::parse(ok));
    REQUIRE(spec.ok());
    REQUIRE(spec->probe.idle_tick_ms == Json::parse(ok)["probe"]["idleTickMs"].get<int>());
  }
  auto defaults = ParseFabricPolicySpec("p", Json::object());
  REQUIRE(defaults->probe.idle_path_interval_ms == kIdlePathIntervalMs);
  REQUIRE(defaults->probe.idle_tick_ms == kIdleTickMs);
  REQUIRE(defaults->probe.traffic_aware);
  REQUIRE(ParseFabricPolicySpec("p", Json::parse(R"({"probe":{"idleTickMs":-1}})")).error().message ==
          "FabricPolicy \"p\": spec.probe.idleTickMs must be between 0 and 60000 (got -1)");
}

TEST_CASE("TrainingJob spec: one source of ranks, and a template with containers", "[api]") {
  auto neither = ParseTrainingJobSpec("j", Json::parse(R"({"replicas":2})"));
  REQUIRE(neither.error().message.find("exactly one of spec.template, spec.pytorchJobRef or spec.trainJobRef") != std::string::npos);
  auto empty = ParseTrainingJobSpec("j", Json::parse(R"({"replicas":2,"template":{"spec":{"containers":[]}}})"));
  REQUIRE(empty.error().message.find("spec.template.spec.containers must list at least one container") !=
          std::string::npos);
  auto missing = ParseTrainingJobSpec("j", Json::parse(R"({"pytorchJobRef":{"name":"x"}})"));
  REQUIRE(missing.error().message.find("spec.replicas is required") != std::string::npos);
  auto ok = ParseTrainingJobSpec("j", Json::parse(R"({"replicas":2,"pytorchJobRef":{"name":"x"}})"));
  REQUIRE(ok.ok());
  REQUIRE(ok->pytorch_job_ref == "x");
  auto train = ParseTrainingJobSpec("j", Json::parse(R"({"replicas":4,"trainJobRef":{"name":"llama"}})"));
  REQUIRE(train.ok());
  REQUIRE(train->train_job_ref == "llama");
  REQUIRE_FALSE(train->pytorch_job_ref);
  auto two_refs = ParseTrainingJobSpec(
      "j", Json::parse(R"({"replicas":4,"trainJobRef":{"name":"a"},"pytorchJobRef":{"name":"b"}})"));
  REQUIRE(two_refs.error().message.find("exactly one of spec.template, spec.pytorchJobRef or spec.trainJobRef") !=
          std::string::npos);
  auto no_name = ParseTrainingJobSpec("j", Json::parse(R"({"replicas":4,"trainJobRef":{}})"));
  REQUIRE(no_name.error().message.find("spec.trainJobRef.name is required") != std::string::npos);
  const Json one = Json::parse(R"({"replicas":1,"pytorchJobRef":{"name":"x"}})");
  REQUIRE(ParseTrainingJobSpec(std::string(45, 'j'), one).ok());
  auto long_name = ParseTrainingJobSpec(std::string(46, 'j'), one);
  REQUIRE_FALSE(long_name.ok());
  REQUIRE(long_name.error().message.find("metadata.name must be at most 45 characters") != std::string::npos);
  REQUIRE(long_name.error().message.find("-coordinator-state") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::api

namespace lockstep::api {
namespace {

TEST_CASE("rails: interface names, distinct, at most 16, hostInterface an interface name", "[api]") {
  auto ok = ParseFabricPolicySpec("p", Json::parse(R"({"rails":["eth2","eth3"],"hostInterface":"lo"})"));
  REQUIRE(ok.ok());
  REQUIRE(ok->rails == std::vector<std::string>{"eth2", "eth3"});
  REQUIRE(ok->host_interface == "lo");
  REQUIRE(ParseFabricPolicySpec("p", Json::parse(R"({"rails":["eth2","eth2"]})")).error().message ==
          "FabricPolicy \"p\": spec.rails[1] names \"eth2\" twice");
  REQUIRE(ParseFabricPolicySpec("p", Json::parse(R"({"rails":["eth/2"]})")).error().message ==
          "FabricPolicy \"p\": spec.rails[0] must be a network interface name (1 to 15 characters, no '/', ':' or "
          "whitespace; got \"eth/2\")");
  REQUIRE_FALSE(ParseFabricPolicySpec("p", Json::parse(R"({"rails":["a-name-longer-than-15"]})")).ok());
  Json many = Json::array();
  for (int i = 0; i < 17; ++i) many.push_back("eth" + std::to_string(i));
  REQUIRE(ParseFabricPolicySpec("p", Json{{"rails", many}}).error().message ==
          "FabricPolicy \"p\": spec.rails may list at most 16 interfaces (got 17)");
  REQUIRE_FALSE(ParseFabricPolicySpec("p", Json::parse(R"({"hostInterface":"a b"})")).ok());
  REQUIRE(ParseAgentConfig("fabric: {rails: [\"eth:1\"]}\n", "agent.yaml").error().message ==
          "agent.yaml: fabric.rails: \"eth:1\" is not an interface name (1 to 15 characters, no '/', ':' or whitespace)");
}

TEST_CASE("latency: bounded SLAs, each rail once and one of spec.rails", "[api]") {
  auto ok = ParseFabricPolicySpec("p", Json::parse(R"({"rails":["eth2","eth3"],"latency":{"oneWayDelayP99Micros":200,
      "rails":[{"name":"eth3","oneWayDelayP99Micros":1}]}})"));
  REQUIRE(ok.ok());
  REQUIRE(ok->latency.one_way_delay_p99_micros == 200);
  REQUIRE(ok->latency.rails == std::vector<RailLatencySla>{{"eth3", 1}});
  REQUIRE(ok->latency.min_samples == kLatencyMinSamples);
  REQUIRE_FALSE(FabricPolicySpec{}.latency.one_way_delay_p99_micros);
  auto msg = [](const char* spec) { return ParseFabricPolicySpec("p", Json::parse(spec)).error().message; };
  REQUIRE(msg(R"({"latency":{"oneWayDelayP99Micros":0}})") ==
          "FabricPolicy \"p\": spec.latency.oneWayDelayP99Micros must be between 1 and 10000000 (got 0)");
  REQUIRE(msg(R"({"latency":{"minSamples":10001}})") ==
          "FabricPolicy \"p\": spec.latency.minSamples must be between 1 and 10000 (got 10001)");
  REQUIRE(msg(R"({"rails":["eth2"],"latency":{"rails":[{"name":"eth2","oneWayDelayP99Micros":5},
      {"name":"eth2","oneWayDelayP99Micros":6}]}})") ==
          "FabricPolicy \"p\": spec.latency.rails names rail \"eth2\" twice");
  REQUIRE(msg(R"({"rails":["eth2"],"latency":{"rails":[{"name":"eth9","oneWayDelayP99Micros":5}]}})") ==
          "FabricPolicy \"p\": spec.latency.rails[0].name: \"eth9\" is not one of spec.rails; add it there or fix the "
          "name");
  REQUIRE(msg(R"({"rails":["eth2"],"latency":{"rails":[{"name":"eth2"}]}})") ==
          "FabricPolicy \"p\": spec.latency.rails[0] needs name and oneWayDelayP99Micros");
}

TEST_CASE("gpu: a known mode, bounded thresholds and distinct Xids, in the CRD's parser and in agent.yaml", "[api]") {
  auto ok = ParseFabricPolicySpec(
      "p", Json::parse(R"({"gpu":{"mode":"Required","earlyWarning":{"gpuTempCelsius":85,"xids":[79,48]}}})"));
  REQUIRE(ok.ok());
  REQUIRE(ok->gpu.mode == "Required");
  REQUIRE(ok->gpu.poll_interval_seconds == kGpuPollIntervalSeconds);
  REQUIRE(ok->gpu.early_warning.gpu_temp_celsius == 85);
  REQUIRE(ok->gpu.early_warning.slowdown_margin_celsius == kGpuSlowdownMarginCelsius);
  REQUIRE(ok->gpu.early_warning.xids == std::vector<int>{79, 48});
  auto err = [](const char* spec) { return ParseFabricPolicySpec("p", Json::parse(spec)).error().message; };
  REQUIRE(err(R"({"gpu":{"mode":"on"}})") ==
          "FabricPolicy \"p\": spec.gpu.mode must be one of Auto, Required, Disabled (got \"on\")");
  REQUIRE(err(R"({"gpu":{"mode":true}})").find("spec.gpu.mode must be one of") != std::string::npos);
  REQUIRE(err(R"({"gpu":{"pollIntervalSeconds":0}})").find("spec.gpu.pollIntervalSeconds must be between 1 and 3600") !=
          std::string::npos);
  REQUIRE(err(R"({"gpu":{"earlyWarning":{"slowdownMarginCelsius":51}}})")
              .find("spec.gpu.earlyWarning.slowdownMarginCelsius must be between 0 and 50") != std::string::npos);
  REQUIRE(err(R"({"gpu":{"earlyWarning":{"xids":[79,79]}}})") ==
          "FabricPolicy \"p\": spec.gpu.earlyWarning.xids lists 79 twice");
  REQUIRE(err(R"({"gpu":{"earlyWarning":{"xids":[70000]}}})").find("spec.gpu.earlyWarning.xids[0]") !=
          std::string::npos);
  REQUIRE(ParseAgentConfig("gpu: {mode: Off}\n", "agent.yaml").error().message ==
          "agent.yaml: gpu.mode must be one of Auto, Required, Disabled (got \"Off\")");
}

TEST_CASE("FabricHealth status.gpu: devices need an index, values are bounded, and it is the agent's key", "[api]") {
  auto ok = ParseFabricHealthStatus(
      "n", Json::parse(R"({"gpu":{"state":"Warning","warnings":1,"devices":[{"index":1,"temperatureCelsius":93,"xids":[79]}]}})"));
  REQUIRE(ok.ok());
  REQUIRE(ok->agent.gpu->devices.at(0).temperature_celsius == 93);
  REQUIRE(ok->agent.gpu->devices.at(0).xids == std::vector<int>{79});
  REQUIRE(ParseFabricHealthStatus("n", Json::parse(R"({"gpu":{"devices":[{"uuid":"GPU-1"}]}})"))
              .error()
              .message.find("status.gpu.devices[0].index is required") != std::string::npos);
  REQUIRE(ParseFabricHealthStatus("n", Json::parse(R"({"gpu":{"state":"Hot"}})")).error().message.find(
              "status.gpu.state must be one of") != std::string::npos);
  Json existing = {{"gpu", {{"state", "Warning"}}}, {"policy", "default"}};
  Json s = MergeAgentStatus(existing, FabricHealthAgentStatus{});  // mode Disabled: the key goes
  REQUIRE_FALSE(s.contains("gpu"));
  REQUIRE(s["policy"] == "default");
}

}  // namespace
}  // namespace lockstep::api
