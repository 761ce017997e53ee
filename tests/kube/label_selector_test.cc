#include <catch2/catch.hpp>

#include "lockstep/kube/label_selector.h"

namespace lockstep::kube {
namespace {

TEST_CASE("metav1.LabelSelector matchLabels and matchExpressions select nodes", "[kube][selector]") {
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
  // NotIn also matches an object without the label, as in Kubernetes.
  REQUIRE(*SelectorMatches(Json::parse(R"({"matchExpressions":[{"key":"rack","operator":"NotIn","values":["a"]}]})"), cpu));
  REQUIRE(*SelectorMatches(Json::parse(R"({"matchExpressions":[{"key":"zone","operator":"Exists"}]})"), cpu));
  REQUIRE(*SelectorMatches(Json::object(), cpu));
  REQUIRE(*SelectorMatches(nullptr, cpu));
}

TEST_CASE("the object form and the string form are one engine", "[kube][selector]") {
  auto from_json = LabelSelector::FromJson(Json::parse(
      R"({"matchLabels":{"app":"x"},"matchExpressions":[{"key":"env","operator":"In","values":["a","b"]},
                                                         {"key":"legacy","operator":"DoesNotExist"}]})"));
  auto from_text = LabelSelector::Parse("app=x,env in (a,b),!legacy");
  REQUIRE(from_json.ok());
  REQUIRE(from_text.ok());
  for (const Json& labels : {Json{{"app", "x"}, {"env", "a"}}, Json{{"app", "x"}, {"env", "c"}},
                             Json{{"app", "x"}, {"env", "b"}, {"legacy", ""}}, Json{{"env", "a"}}}) {
    CHECK(from_json->Matches(labels) == from_text->Matches(labels));
  }
}

TEST_CASE("a malformed selector is an error naming the field, not a match", "[kube][selector]") {
  auto r = SelectorMatches(Json::parse(R"({"matchExpressions":[{"key":"a","operator":"Near"}]})"), Json::object());
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().message.find("Near") != std::string::npos);
  REQUIRE(r.error().message.find("matchExpressions[0].operator") != std::string::npos);

  // What the API server rejects is rejected here too, rather than silently
  // matching nothing (In without values) or ignoring values (Exists).
  auto empty_in = LabelSelector::FromJson(Json::parse(R"({"matchExpressions":[{"key":"a","operator":"In","values":[]}]})"));
  REQUIRE_FALSE(empty_in.ok());
  REQUIRE(empty_in.error().message.find("must not be empty") != std::string::npos);
  REQUIRE_FALSE(LabelSelector::FromJson(Json::parse(R"({"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]})")).ok());
  REQUIRE_FALSE(LabelSelector::FromJson(Json::parse(R"({"matchExpressions":[{"operator":"Exists"}]})")).ok());
  REQUIRE_FALSE(LabelSelector::FromJson(Json::parse(R"({"matchLabels":{"a":1}})")).ok());
  REQUIRE_FALSE(LabelSelector::FromJson(Json::parse(R"({"matchLabels":{"bad key":"v"}})")).ok());
  REQUIRE_FALSE(LabelSelector::FromJson(Json::parse(R"("app=x")")).ok());
}

TEST_CASE("a selector becomes required node affinity", "[kube][selector]") {
  auto sel = LabelSelector::FromJson(
      Json::parse(R"({"matchLabels":{"k":"v"},"matchExpressions":[{"key":"x","operator":"Exists"},
                                                                  {"key":"y","operator":"NotIn","values":["n"]}]})"));
  REQUIRE(sel.ok());
  Json a = sel->ToNodeAffinity();
  const Json& exprs =
      a["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"];
  REQUIRE(exprs.size() == 3);
  REQUIRE(exprs[0] == Json::parse(R"({"key":"k","operator":"In","values":["v"]})"));
  REQUIRE(exprs[1] == Json::parse(R"({"key":"x","operator":"Exists"})"));
  REQUIRE(exprs[2] == Json::parse(R"({"key":"y","operator":"NotIn","values":["n"]})"));
  REQUIRE(LabelSelector::FromJson(Json::object())->ToNodeAffinity().is_null());
  // The string form renders too ("!k" is DoesNotExist, "k!=v" is NotIn).
  Json b = LabelSelector::Parse("!gone,zone!=a")->ToNodeAffinity();
  REQUIRE(b["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
           ["matchExpressions"] == Json::parse(R"([{"key":"gone","operator":"DoesNotExist"},
                                                  {"key":"zone","operator":"NotIn","values":["a"]}])"));
}

}  // namespace
}  // namespace lockstep::kube
