#include <catch2/catch.hpp>

#include "lockstep/kube/conditions.h"

namespace lockstep::kube {
namespace {

TEST_CASE("SetCondition moves lastTransitionTime only when the status changes", "[kube][conditions]") {
  Json c = SetCondition(nullptr, {"Ready", "False", "Starting", "starting"}, 1, "t1");
  REQUIRE(c.size() == 1);
  REQUIRE(c[0]["lastTransitionTime"] == "t1");
  REQUIRE(c[0]["observedGeneration"] == 1);

  // Same status, new reason and generation: the transition time stays, so a
  // re-run with the same outcome writes the same list.
  c = SetCondition(c, {"Ready", "False", "Waiting", "still waiting"}, 2, "t2");
  REQUIRE(c[0]["lastTransitionTime"] == "t1");
  REQUIRE(c[0]["reason"] == "Waiting");
  REQUIRE(c[0]["observedGeneration"] == 2);
  REQUIRE(SetCondition(c, {"Ready", "False", "Waiting", "still waiting"}, 2, "t3") == c);

  c = SetCondition(c, {"Ready", "True", "Locked", "locked"}, 2, "t4");
  REQUIRE(c[0]["lastTransitionTime"] == "t4");
  REQUIRE(c[0]["status"] == "True");
}

TEST_CASE("SetCondition keeps other conditions, their order and fields it does not set", "[kube][conditions]") {
  Json c = Json::parse(R"([{"type":"PolicyConflict","status":"False","reason":"SinglePolicy","message":"",
                            "lastTransitionTime":"t0"},
                           {"type":"Ready","status":"Unknown","reason":"AgentNotReporting","message":"",
                            "observedGeneration":0,"lastTransitionTime":"t0"},
                           "not an object"])");
  // The agent writes Ready without a generation: the operator's stays.
  Json out = SetCondition(c, {"Ready", "True", "ClockLocked", "locked"}, std::nullopt, "t1");
  REQUIRE(out.size() == 3);
  REQUIRE(out[0] == c[0]);
  REQUIRE(out[1]["status"] == "True");
  REQUIRE(out[1]["observedGeneration"] == 0);
  REQUIRE(out[1]["lastTransitionTime"] == "t1");
  REQUIRE(out[2] == "not an object");

  REQUIRE(FindCondition({{"conditions", out}}, "Ready") != nullptr);
  REQUIRE((*FindCondition({{"conditions", out}}, "Ready"))["reason"] == "ClockLocked");
  REQUIRE(FindCondition({{"conditions", out}}, "Degraded") == nullptr);
  REQUIRE(FindCondition(nullptr, "Ready") == nullptr);
}

}  // namespace
}  // namespace lockstep::kube
