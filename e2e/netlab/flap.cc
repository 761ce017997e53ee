#include "netlab/flap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lockstep::netlab {
namespace {

using nlohmann::ordered_json;

std::string Text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// Milliseconds rounded to microseconds.
double Ms(double seconds) { return std::round(seconds * 1e6) / 1e3; }

// Seconds rounded to microseconds.
double Seconds(double seconds) { return std::round(seconds * 1e6) / 1e6; }

// {min, median, max} of durations in seconds, as ms; null when there are none.
ordered_json Spread(std::vector<double> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {{"min", Ms(v.front())}, {"median", Ms(median)}, {"max", Ms(v.back())}};
}

}  // namespace

Status ValidateFlapPlan(const FlapPlan& p) {
  if (p.count < 1 || p.count > 10000) {
    return InvalidArgument("flap: --count must be between 1 and 10000 (got " + std::to_string(p.count) + ")");
  }
  if (!(p.period_s > 0) || p.period_s > 3600) {
    return InvalidArgument("flap: --period-ms must be above 0 and at most 3600000 (got " +
                           Text(p.period_s * 1000) + ")");
  }
  if (!(p.down_s > 0) || p.down_s >= p.period_s) {
    return InvalidArgument("flap: --down-ms must be above 0 and below --period-ms (got " +
                           Text(p.down_s * 1000) + " of " + Text(p.period_s * 1000) + ")");
  }
  return Status::Ok();
}

std::vector<FlapStep> FlapSteps(const FlapPlan& p) {
  std::vector<FlapStep> steps;
  for (int k = 0; k < p.count; ++k) {
    steps.push_back({k, true, k * p.period_s});
    steps.push_back({k, false, k * p.period_s + p.down_s});
  }
  return steps;
}

ordered_json FlapReport(const std::vector<std::string>& links, const FlapPlan& p, bool silent,
                        const std::vector<FlapEvent>& events) {
  ordered_json ev = ordered_json::array();
  std::vector<double> down, up, cycle, late, change, converge;
  const FlapEvent* last_down = nullptr;
  const FlapEvent* last_up = nullptr;
  for (const auto& e : events) {
    ev.push_back({{"k", e.step.k},
                  {"action", e.step.down ? "down" : "up"},
                  {"planned", e.planned},
                  {"asked", e.asked},
                  {"changed", e.changed},
                  {"late_ms", Ms(e.asked - e.planned)},
                  {"change_ms", Ms(e.changed - e.asked)},
                  {"converge_ms", Ms(e.converged - e.changed)}});
    late.push_back(e.asked - e.planned);
    change.push_back(e.changed - e.asked);
    converge.push_back(e.converged - e.changed);
    if (e.step.down) {
      if (last_down != nullptr) cycle.push_back(e.asked - last_down->asked);
      if (last_up != nullptr) up.push_back(e.asked - last_up->asked);
      last_down = &e;
    } else {
      if (last_down != nullptr) down.push_back(e.asked - last_down->asked);
      last_up = &e;
    }
  }
  const auto max_of = [](const std::vector<double>& v) { return v.empty() ? 0.0 : Ms(*std::max_element(v.begin(), v.end())); };
  ordered_json j = {{"links", links},
                    {"count", p.count},
                    {"period_ms", Ms(p.period_s)},
                    {"down_ms", Ms(p.down_s)},
                    {"silent", silent},
                    {"events", ev}};
  j["achieved"] = {{"down_ms", Spread(down)},
                   {"up_ms", Spread(up)},
                   {"period_ms", Spread(cycle)},
                   {"late_ms_max", max_of(late)},
                   {"change_ms_max", max_of(change)},
                   {"converge_ms_max", max_of(converge)},
                   {"span_s", events.empty() ? 0.0 : Seconds(events.back().changed - events.front().asked)},
                   {"planned_span_s", Seconds((p.count - 1) * p.period_s + p.down_s)},
                   {"complete", events.size() == 2 * size_t(p.count)}};
  return j;
}

}  // namespace lockstep::netlab
