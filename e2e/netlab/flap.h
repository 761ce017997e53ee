// A flap train (`netlab link L flap --count N --period-ms P --down-ms D`): its
// timetable and the report of the timing it achieved. Pure: the train itself
// runs in flap_train.cc, on one clock, with the link changes done over
// netlink sockets it keeps open, so a train keeps its timetable where one
// `netlab link` process per change (~340 ms each under load) stretched
// "10 flaps in 10 s" to ~27 s.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"

namespace lockstep::netlab {

struct FlapPlan {
  int count = 10;          // down/up cycles
  double period_s = 1;     // from one down to the next
  double down_s = 0.5;     // from a down to its up (< period_s)
};

// Count 1..10000, period up to an hour, 0 < down < period.
Status ValidateFlapPlan(const FlapPlan& p);

// One change of the train: cycle k's down (or up) at offset_s after the start.
struct FlapStep {
  int k = 0;
  bool down = true;
  double offset_s = 0;
};

// down, up, down, up...: 2 x count steps in time order.
std::vector<FlapStep> FlapSteps(const FlapPlan& p);

// What one step did, in wall-clock seconds: planned (start + offset), asked
// (just before the link change), changed (just after it), converged (routes
// recomputed; for a silent down, = changed).
struct FlapEvent {
  FlapStep step;
  double planned = 0, asked = 0, changed = 0, converged = 0;
};

// One JSON object: the plan, every event (with late_ms = asked - planned,
// change_ms = changed - asked, converge_ms = converged - changed) and what
// the train achieved: down and up periods and cycle lengths measured between
// the `asked` times (min / median / max, ms), the worst lateness, and
// span_s from the first down to the last up (the plan's is planned_span_s).
nlohmann::ordered_json FlapReport(const std::vector<std::string>& links, const FlapPlan& p, bool silent,
                                  const std::vector<FlapEvent>& events);

}  // namespace lockstep::netlab
