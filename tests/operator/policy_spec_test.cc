#include <catch2/catch.hpp>

#include "lockstep/operator/policy_spec.h"

namespace lockstep::op {
namespace {

TEST_CASE("an empty spec takes the CRD defaults", "[operator]") {
  auto p = ParsePolicySpec("default", nullptr);
  REQUIRE(p.ok());
  REQUIRE(p->probe.interval_ms == 20);
  REQUIRE(p->probe.peers_per_node == 16);
  REQUIRE(p->flap_alert_per_hour == 8);
  REQUIRE(p->node_selector["matchLabels"]["nvidia.com/gpu.present"] == "true");
  REQUIRE_FALSE(p->clock_sync.discipline_host_clock);
}

TEST_CASE("fields are read and bounds are enforced with clear messages", "[operator]") {
  auto p = ParsePolicySpec("p", Json::parse(R"({"probe":{"intervalMs":50,"missThreshold":5},"flapAlertPerHour":3})"));
  REQUIRE(p.ok());
  REQUIRE(p->probe.interval_ms == 50);
  REQUIRE(p->probe.miss_threshold == 5);
  REQUIRE(p->flap_alert_per_hour == 3);

  auto bad = ParsePolicySpec("default", Json::parse(R"({"probe":{"intervalMs":0}})"));
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.error().message == "FabricPolicy \"default\": spec.probe.intervalMs must be between 1 and 60000 (got 0)");

  auto type = ParsePolicySpec("x", Json::parse(R"({"failover":{"enabled":"yes"}})"));
  REQUIRE_FALSE(type.ok());
  REQUIRE(type.error().message.find("spec.failover.enabled must be true or false") != std::string::npos);
}

TEST_CASE("cross-field rules match the CRD's CEL rules", "[operator]") {
  auto hold = ParsePolicySpec("x", Json::parse(R"({"failover":{"readmitAfterSeconds":10,"maxHoldDownSeconds":5}})"));
  REQUIRE_FALSE(hold.ok());
  REQUIRE(hold.error().message.find("maxHoldDownSeconds must be at least") != std::string::npos);
  auto detect = ParsePolicySpec("x", Json::parse(R"({"probe":{"intervalMs":30000,"missThreshold":3}})"));
  REQUIRE_FALSE(detect.ok());
  REQUIRE(detect.error().message.find("at most 60000 ms") != std::string::npos);
}

TEST_CASE("a nodeSelector the API server would reject is reported with its field", "[operator]") {
  auto bad = ParsePolicySpec("x", Json::parse(R"({"nodeSelector":{"matchExpressions":[{"key":"zone","operator":"In"}]}})"));
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.error().message.find("spec.nodeSelector: matchExpressions[0].values must not be empty") !=
          std::string::npos);
  REQUIRE(ParsePolicySpec("x", Json::parse(R"({"nodeSelector":{"matchLabels":{"zone":"a"}}})")).ok());
}

}  // namespace
}  // namespace lockstep::op
