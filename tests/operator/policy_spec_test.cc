#include <catch2/catch.hpp>

#include "lockstep/operator/policy_spec.h"

namespace lockstep::op {
namespace {

TEST_CASE("an empty spec takes the defaults of the typed contract", "[operator]") {
  auto p = ParsePolicySpec("default", nullptr);
  REQUIRE(p.ok());
  REQUIRE(*p == PolicySpec{});
  REQUIRE(*ParsePolicySpec("default", Json::object()) == PolicySpec{});
}

TEST_CASE("fields are read and bounds are enforced with clear messages", "[operator]") {
  auto p = ParsePolicySpec("p", Json::parse(R"({"probe":{"intervalMs":50},"clockSync":{"maxErrorBoundNs":5000}})"));
  REQUIRE(p.ok());
  REQUIRE(p->probe.interval_ms == 50);
  REQUIRE(p->clock_sync.max_error_bound_ns == 5000);

  auto bad = ParsePolicySpec("default", Json::parse(R"({"probe":{"intervalMs":0}})"));
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.error().message == "FabricPolicy \"default\": spec.probe.intervalMs must be between 1 and 60000 (got 0)");

  auto type = ParsePolicySpec("x", Json::parse(R"({"clockSync":{"enabled":"yes"}})"));
  REQUIRE_FALSE(type.ok());
  REQUIRE(type.error().message.find("spec.clockSync.enabled must be true or false") != std::string::npos);

  auto bound = ParsePolicySpec("x", Json::parse(R"({"clockSync":{"maxErrorBoundNs":1000000001}})"));
  REQUIRE(bound.error().message.find("spec.clockSync.maxErrorBoundNs must be between 1 and 1000000000") !=
          std::string::npos);
}

TEST_CASE("the rules of the CRD's schema hold in the operator too", "[operator]") {
  auto err = [](const std::string& name, const char* spec) {
    auto p = ParsePolicySpec(name, Json::parse(spec));
    REQUIRE_FALSE(p.ok());
    return p.error().message;
  };
  REQUIRE(err(std::string(64, 'a'), "{}").find("metadata.name must be at most 63 characters") != std::string::npos);
  REQUIRE(ParsePolicySpec(std::string(63, 'a'), nullptr).ok());
  REQUIRE(err("x", R"({"nodeSelector":{"matchLabels":{"bad key!":"x"}}})").find("is not a valid label key") !=
          std::string::npos);
  REQUIRE(err("x", R"({"nodeSelector":{"matchExpressions":[{"key":"-a","operator":"Exists"}]}})")
              .find("spec.nodeSelector.matchExpressions[0].key") != std::string::npos);
  REQUIRE(err("x", R"({"nodeSelector":{"matchExpressions":[{"key":"a","operator":"In"}]}})")
              .find("need a non-empty values list") != std::string::npos);
  REQUIRE(err("x", R"({"tolerations":[{"operator":"Exists","value":"v"}]})").find("takes no value") !=
          std::string::npos);
  REQUIRE(err("x", R"({"agent":{"resources":{"requests":{"cpu":"-1"}}}})")
              .find("spec.agent.resources.requests.cpu must be a non-negative quantity") != std::string::npos);
  REQUIRE(err("x", R"({"agent":{"resources":{"limits":{"memory":-5}}}})").find("non-negative") !=
          std::string::npos);
  REQUIRE(err("x", R"({"agent":{"imagePullPolicy":"Sometimes"}})")
              .find("spec.agent.imagePullPolicy must be one of Always, IfNotPresent, Never") != std::string::npos);
}

TEST_CASE("a selector given replaces the default selector whole", "[operator]") {
  auto p = ParsePolicySpec("x", Json::parse(R"({"nodeSelector":{"matchLabels":{"zone":"a"}}})"));
  REQUIRE(p.ok());
  REQUIRE(p->node_selector.match_labels == std::map<std::string, std::string>{{"zone", "a"}});
  auto all = ParsePolicySpec("x", Json::parse(R"({"nodeSelector":{}})"));
  REQUIRE(all->node_selector == api::LabelSelector{});
}

TEST_CASE("a nodeSelector the API server would reject is reported with its field", "[operator]") {
  auto bad = ParsePolicySpec("x", Json::parse(R"({"nodeSelector":{"matchExpressions":[{"key":"zone","operator":"In"}]}})"));
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.error().message.find("spec.nodeSelector.matchExpressions[0].values: operators In and NotIn need a non-empty values list") !=
          std::string::npos);
  REQUIRE(ParsePolicySpec("x", Json::parse(R"({"nodeSelector":{"matchLabels":{"zone":"a"}}})")).ok());
}

}  // namespace
}  // namespace lockstep::op
