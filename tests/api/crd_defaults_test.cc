// The CRDs keep their literal defaults (the API server applies them); the C++
// defaults live in lockstep/api. They must agree.
#include <catch2/catch.hpp>

#include "crd_schema.h"
#include "lockstep/api/agent_config.h"
#include "lockstep/api/fabric_policy.h"
#include "lockstep/api/training_job.h"

namespace lockstep::api {
namespace {

using testing::ApplyDefaults;
using testing::KeyDiff;
using testing::LoadCrdSchema;

TEST_CASE("FabricPolicy: the CRD's defaults are the C++ defaults", "[api]") {
  const Json schema = LoadCrdSchema("lockstep.dev_fabricpolicies.yaml");
  // spec defaults to {}, then every nested default applies.
  Json defaulted = ApplyDefaults(schema, Json::object())["spec"];
  INFO("CRD: " << defaulted.dump());
  REQUIRE(defaulted == ToJson(FabricPolicySpec{}));
  REQUIRE(*ParseFabricPolicySpec("p", defaulted) == FabricPolicySpec{});
  const Json& probe = schema["properties"]["spec"]["properties"]["probe"]["properties"];
  REQUIRE(probe["port"]["default"] == kProbePort);
  REQUIRE(probe["port"]["minimum"] == kMinProbePort);
  REQUIRE(probe["intervalMs"]["maximum"] == kMaxProbeIntervalMs);
  const Json& cs = schema["properties"]["spec"]["properties"]["clockSync"]["properties"];
  REQUIRE(cs["maxErrorBoundNs"]["maximum"] == kMaxMaxErrorBoundNs);
  REQUIRE(cs["asymmetryAllowanceNs"]["maximum"] == kMaxAsymmetryAllowanceNs);
  REQUIRE(probe["pathIntervalMs"]["maximum"] == kMaxProbeIntervalMs);
  REQUIRE(probe["missThreshold"]["maximum"] == kMaxMissThreshold);
  REQUIRE(probe["idlePathIntervalMs"]["default"] == kIdlePathIntervalMs);
  REQUIRE(probe["idlePathIntervalMs"]["maximum"] == kMaxProbeIntervalMs);
  REQUIRE(probe["idleTickMs"]["default"] == kIdleTickMs);
  REQUIRE(probe["idleTickMs"]["maximum"] == kMaxProbeIntervalMs);
  REQUIRE(probe["trafficAware"]["default"] == true);
  const Json& fo = schema["properties"]["spec"]["properties"]["failover"]["properties"];
  REQUIRE(fo["readmitAfterSeconds"]["maximum"] == kMaxReadmitAfterSeconds);
  REQUIRE(fo["maxHoldDownSeconds"]["maximum"] == kMaxMaxHoldDownSeconds);
  REQUIRE(fo["holdDownDecaySeconds"]["maximum"] == kMaxHoldDownDecaySeconds);
  REQUIRE(schema["properties"]["spec"]["properties"]["flapAlertPerHour"]["maximum"] == kMaxFlapAlertPerHour);
  const Json& gpu = schema["properties"]["spec"]["properties"]["gpu"]["properties"];
  REQUIRE(gpu["mode"]["enum"] == Json(GpuModes()));
  REQUIRE(gpu["pollIntervalSeconds"]["maximum"] == kMaxGpuPollIntervalSeconds);
  const Json& ew = gpu["earlyWarning"]["properties"];
  REQUIRE(ew["gpuTempCelsius"]["minimum"] == kMinGpuTempCelsius);
  REQUIRE(ew["gpuTempCelsius"]["maximum"] == kMaxGpuTempCelsius);
  REQUIRE(ew["slowdownMarginCelsius"]["maximum"] == kMaxGpuSlowdownMarginCelsius);
  REQUIRE(ew["eccSingleBitPerHour"]["maximum"] == kMaxEccSingleBitPerHour);
  REQUIRE(ew["xids"]["maxItems"] == kMaxEarlyWarningXids);
}

TEST_CASE("FabricPolicy spec.gpu.earlyWarning shares the TrainingJob's earlyWarning names, defaults and bounds",
          "[api]") {
  const Json node = LoadCrdSchema("lockstep.dev_fabricpolicies.yaml")["properties"]["spec"]["properties"]["gpu"]
                                                                        ["properties"]["earlyWarning"]["properties"];
  const Json job =
      LoadCrdSchema("lockstep.dev_trainingjobs.yaml")["properties"]["spec"]["properties"]["earlyWarning"]["properties"];
  for (const auto& [name, field] : job.items()) {
    INFO(name);
    REQUIRE(node.contains(name));
    auto get = [](const Json& j, const char* k) { return j.contains(k) ? j[k] : Json(); };
    for (const char* k : {"type", "default", "minimum", "maximum", "maxItems"}) {
      INFO(k);
      REQUIRE(get(node[name], k) == get(field, k));
    }
  }
  const GpuEarlyWarningSpec n;
  const EarlyWarningSpec j;
  REQUIRE(n.gpu_temp_celsius == j.gpu_temp_celsius);
  REQUIRE(n.ecc_single_bit_per_hour == j.ecc_single_bit_per_hour);
  REQUIRE(n.xids == j.xids);
}

TEST_CASE("TrainingJob: the CRD's defaults are the C++ defaults", "[api]") {
  const Json schema = LoadCrdSchema("lockstep.dev_trainingjobs.yaml");
  Json defaulted = ApplyDefaults(schema["properties"]["spec"], Json{{"replicas", 1}});
  INFO("CRD: " << defaulted.dump());
  REQUIRE(defaulted == ToJson(TrainingJobSpec{}));
}

TEST_CASE("the operator's agent.yaml for a default policy is the agent's default config", "[api]") {
  AgentConfig rendered = AgentConfigForPolicy("default", FabricPolicySpec{}, kHealthPort);
  REQUIRE(rendered == AgentConfig{});
}

}  // namespace
}  // namespace lockstep::api
