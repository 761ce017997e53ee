#include <catch2/catch.hpp>

#include "lockstep/operator/selector.h"

namespace lockstep::op {
namespace {

using Json = nlohmann::json;

TEST_CASE("matchLabels and matchExpressions select nodes", "[operator]") {
  Json gpu = {{"nvidia.com/gpu.present", "true"}, {"zone", "a"}};
  Json cpu = {{"zone", "b"}};
  Json sel = Json::parse(R"({"matchLabels":{"nvidia.com/gpu.present":"true"}})");
  REQUIRE(*SelectorMatches(sel, gpu));
  REQUIRE_FALSE(*SelectorMatches(sel, cpu));
  REQUIRE_FALSE(*SelectorMatches(sel, nullptr));

  Json expr = Json::parse(R"({"matchExpressions":[{"key":"zone","operator":"In","values":["a","c"]},
                                                   {"key":"drain","operator":"DoesNotExist"}]})");
  REQUIRE(*SelectorMatches(expr, gpu));
  REQUIRE_FALSE(*SelectorMatches(expr, cpu));
  REQUIRE(*SelectorMatches(Json::parse(R"({"matchExpressions":[{"key":"zone","operator":"NotIn","values":["a"]}]})"), cpu));
  REQUIRE(*SelectorMatches(Json::parse(R"({"matchExpressions":[{"key":"zone","operator":"Exists"}]})"), cpu));
  REQUIRE(*SelectorMatches(Json::object(), cpu));
}

TEST_CASE("a malformed selector is an error, not a match", "[operator]") {
  auto r = SelectorMatches(Json::parse(R"({"matchExpressions":[{"key":"a","operator":"Near"}]})"), Json::object());
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().message.find("Near") != std::string::npos);
}

TEST_CASE("a selector becomes required node affinity", "[operator]") {
  Json a = SelectorToNodeAffinity(Json::parse(R"({"matchLabels":{"k":"v"},"matchExpressions":[{"key":"x","operator":"Exists"}]})"));
  const Json& exprs =
      a["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"];
  REQUIRE(exprs.size() == 2);
  REQUIRE(exprs[0] == Json::parse(R"({"key":"k","operator":"In","values":["v"]})"));
  REQUIRE(exprs[1] == Json::parse(R"({"key":"x","operator":"Exists"})"));
  REQUIRE(SelectorToNodeAffinity(Json::object()).is_null());
}

}  // namespace
}  // namespace lockstep::op
