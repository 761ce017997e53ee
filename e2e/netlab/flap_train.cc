// `netlab link --name N LINK flap --count C --period-ms P [--down-ms D]`: a
// whole flap train in one process, on a timetable of absolute deadlines on
// the monotonic clock (a late step does not delay the ones after it), with
// the admin up/down done over netlink sockets opened once. Logs each change
// as `link` does; prints the timing achieved as one JSON line (flap.h).
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "netlab/commands.h"
#include "netlab/flap.h"
#include "netlab/lab.h"
#include "netlab/links.h"
#include "netlab/parse.h"
#include "netlab/shell.h"

namespace lockstep::netlab {
namespace {

// Sleeps until `deadline` on CLOCK_MONOTONIC; false when a signal (Ctrl-C) cut it short.
bool SleepUntil(const timespec& deadline) {
  return ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) == 0;
}

timespec MonotonicPlus(const timespec& t0, double seconds) {
  const double whole = std::floor(seconds);
  timespec t{t0.tv_sec + time_t(whole), t0.tv_nsec + long((seconds - whole) * 1e9)};
  if (t.tv_nsec >= 1'000'000'000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1'000'000'000L;
  }
  return t;
}

std::string Fixed6(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6f", v);
  return b;
}

}  // namespace

Result<int> RunFlapTrain(const Args& a, const Topology& t, const LabState& before,
                         const std::vector<std::string>& names) {
  FlapPlan plan;
  plan.count = int(std::clamp(a.Int("count"), -1LL, 1'000'000LL));
  plan.period_s = a.Float("period-ms") / 1000;
  plan.down_s = a.Has("down-ms") ? a.Float("down-ms") / 1000 : plan.period_s / 2;
  if (Status s = ValidateFlapPlan(plan); !s.ok()) return s.error();
  const bool silent = a.Flag("silent");
  LinkChange change{.down = true, .silent = silent, .delay_s = a.Float("delay-ms") / 1000, .clear_silent = silent};
  NetnsRtnl rtnl;
  for (const auto& n : names) {
    const Link* lk = FindLink(t, n);
    if (lk == nullptr) return NotFound("no link " + Quoted(n));
    // A link left silent before the train: its first up clears that too.
    if (before.links.contains(n) && before.links.at(n).starts_with("silent")) change.clear_silent = true;
    for (const Endpoint* e : {&lk->a, &lk->b}) {
      if (Status s = rtnl.Open(e->ns); !s.ok()) return s.error();
    }
  }
  const SetAdmin set_admin = [&rtnl](const Endpoint& e, bool up) { return rtnl.SetAdmin(e.ns, e.ifname, up); };
  const std::string name = a.Get("name");
  const std::vector<FlapStep> steps = FlapSteps(plan);
  std::vector<FlapEvent> events;
  timespec t0{};
  ::clock_gettime(CLOCK_MONOTONIC, &t0);
  const double wall0 = WallSeconds();
  bool down = false;
  Status failed = Status::Ok();
  for (const auto& step : steps) {
    if (!SleepUntil(MonotonicPlus(t0, step.offset_s)) || InterruptSeen()) break;
    change.down = step.down;
    ChangeTimes times;
    const auto warnings = ChangeLinks(name, names, change, set_admin, times);
    if (!warnings.ok()) {  // the links may be half-changed: bring them up below
      failed = warnings.error();
      down = true;
      break;
    }
    for (const auto& w : *warnings) Log("warning: " + w);
    down = step.down;
    Log(Join(names, ", ") + ": " + (step.down ? "down" : "up") + (step.down && silent ? " (silent)" : "") +
        " (changed at " + Fixed6(times.changed) + ", after " + Fixed6(times.asked) + ") flap " +
        std::to_string(step.k + 1) + "/" + std::to_string(plan.count));
    events.push_back({step, wall0 + step.offset_s, times.asked, times.changed, times.converged});
    if (change.clear_silent && !step.down) change.clear_silent = silent;
  }
  if (down) {  // stopped half-way (Ctrl-C or an error): leave the links up
    change.down = false;
    ChangeTimes times;
    const auto up = ChangeLinks(name, names, change, set_admin, times);
    if (!up.ok()) Log("could not bring " + Join(names, ", ") + " back up: " + up.error().message);
    if (up.ok()) Log(Join(names, ", ") + ": up (the train stopped after " + std::to_string(events.size()) + " changes)");
  }
  std::printf("%s\n", FlapReport(names, plan, silent, events).dump().c_str());
  std::fflush(stdout);
  if (!failed.ok()) return failed.error();
  return events.size() == steps.size() ? 0 : 1;
}

}  // namespace lockstep::netlab
