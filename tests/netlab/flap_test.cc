#include <catch2/catch.hpp>

#include "netlab/flap.h"

namespace lockstep::netlab {
namespace {

TEST_CASE("flap: the timetable alternates down and up", "[netlab]") {
  const auto steps = FlapSteps({.count = 3, .period_s = 1.0, .down_s = 0.25});
  REQUIRE(steps.size() == 6);
  CHECK(steps[0].down);
  CHECK(steps[0].offset_s == 0);
  CHECK_FALSE(steps[1].down);
  CHECK(steps[1].offset_s == 0.25);
  CHECK(steps[4].k == 2);
  CHECK(steps[4].offset_s == 2.0);
  CHECK(steps[5].offset_s == 2.25);
}

TEST_CASE("flap: the plan is checked", "[netlab]") {
  CHECK(ValidateFlapPlan({.count = 10, .period_s = 1, .down_s = 0.5}).ok());
  CHECK(ValidateFlapPlan({.count = 0, .period_s = 1, .down_s = 0.5}).error().message ==
        "flap: --count must be between 1 and 10000 (got 0)");
  CHECK_FALSE(ValidateFlapPlan({.count = 1, .period_s = 0, .down_s = 0}).ok());
  CHECK(ValidateFlapPlan({.count = 1, .period_s = 0.1, .down_s = 0.1}).error().message ==
        "flap: --down-ms must be above 0 and below --period-ms (got 100 of 100)");
  CHECK_FALSE(ValidateFlapPlan({.count = 1, .period_s = 1, .down_s = -1}).ok());
}

TEST_CASE("flap: the report gives what the train achieved", "[netlab]") {
  const FlapPlan plan{.count = 2, .period_s = 1.0, .down_s = 0.5};
  const auto steps = FlapSteps(plan);
  const double t0 = 1000;
  // Late by 1, 2, 30 (the second down waited for slow routes) and 3 ms.
  const double late[] = {0.001, 0.002, 0.030, 0.003};
  std::vector<FlapEvent> events;
  for (size_t i = 0; i < steps.size(); ++i) {
    const double asked = t0 + steps[i].offset_s + late[i];
    events.push_back({steps[i], t0 + steps[i].offset_s, asked, asked + 0.0001, asked + 0.0201});
  }
  const auto j = FlapReport({"h1r0"}, plan, false, events);
  CHECK(j["events"].size() == 4);
  CHECK(j["events"][1]["action"] == "up");
  CHECK(j["events"][2]["late_ms"] == 30.0);
  CHECK(j["events"][0]["change_ms"] == 0.1);
  CHECK(j["events"][0]["converge_ms"] == 20.0);
  const auto& a = j["achieved"];
  CHECK(a["down_ms"]["min"] == 473.0);   // 0.5 s + (3 - 30) ms
  CHECK(a["down_ms"]["max"] == 501.0);   // 0.5 s + (2 - 1) ms
  CHECK(a["up_ms"]["max"] == 528.0);     // 0.5 s + (30 - 2) ms
  CHECK(a["period_ms"]["median"] == 1029.0);
  CHECK(a["late_ms_max"] == 30.0);
  CHECK(a["complete"] == true);
  CHECK(a["planned_span_s"] == 1.5);
  CHECK(FlapReport({"h1r0"}, plan, false, {})["achieved"]["down_ms"].is_null());
}

}  // namespace
}  // namespace lockstep::netlab
