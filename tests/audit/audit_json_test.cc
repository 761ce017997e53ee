#include <catch2/catch.hpp>

#include "good_node.h"
#include "lockstep/audit/audit_json.h"
#include "lockstep/audit/checks.h"

namespace lockstep::audit {
namespace {

TEST_CASE("checks round-trip through JSON", "[audit]") {
  NodeFacts f = testing::GoodNode();
  f.pcie[0].width = 4;
  auto checks = RunChecks(f);
  auto back = ChecksFromJson(nlohmann::json::parse(ChecksToJson(checks).dump()));
  REQUIRE(back.ok());
  REQUIRE(*back == checks);
}

TEST_CASE("malformed checks are refused with the entry and field", "[audit]") {
  auto bad = ChecksFromJson(nlohmann::json::parse(R"([{"id":"a","verdict":"Pass"},{"id":"b","verdict":"Maybe"}])"));
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.error().message == "checks[1].verdict: expected Pass, Fail or NotPresent (got \"Maybe\")");
  REQUIRE_FALSE(ChecksFromJson(nlohmann::json::parse(R"([{"verdict":"Pass"}])")).ok());
  REQUIRE_FALSE(ChecksFromJson(nlohmann::json::parse(R"({"id":"a"})")).ok());
  REQUIRE_FALSE(ChecksFromJson(nlohmann::json::parse(R"([{"id":"a","verdict":"Pass","rule":"min"}])")).ok());
}

TEST_CASE("the text view lists failures first with what was expected", "[audit]") {
  NodeFacts f = testing::GoodNode();
  f.rails[0].operstate = "down";
  NodeVerdict v = JudgeAlone({"h0", "", RunChecks(f)});
  std::string text = FormatText(v);
  REQUIRE(text.rfind("Fail       backend.up[rail0]", 0) == 0);
  REQUIRE(text.find("down (expected up): rail NIC rail0 is down\n") != std::string::npos);
  REQUIRE(text.find("audit h0 Fail (1 failed, ") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::audit
