#include "lockstep/fabric/latency_sla.h"

#include <algorithm>

namespace lockstep::fabric {

std::optional<Nanos> SlaFor(const LatencySlaOptions& options, int rail) {
  if (auto it = options.per_rail.find(rail); it != options.per_rail.end()) return it->second;
  return options.all_rails;
}

const char* ToString(LatencyVerdict v) {
  switch (v) {
    case LatencyVerdict::kNoSla:
      return "NoSLA";
    case LatencyVerdict::kClockNotLocked:
      return "ClockNotLocked";
    case LatencyVerdict::kNotEnoughSamples:
      return "NotEnoughSamples";
    case LatencyVerdict::kWithin:
      return "WithinSLA";
    case LatencyVerdict::kBreach:
      return "SLABreached";
  }
  return "unknown";
}

namespace {

// p99 / sla, for ranking breaches.
double Ratio(const PathLatency& p) {
  return static_cast<double>(p.owd_p99->count()) / static_cast<double>(std::max<int64_t>(1, p.sla->count()));
}

}  // namespace

LatencyDecisions LatencySla::Judge(Time now, bool clock_locked, const std::vector<LatencySample>& paths) {
  LatencyDecisions d;
  std::map<PathKey, State> next;
  for (const LatencySample& s : paths) {
    State st = state_.count(s.path) ? state_[s.path] : State{};
    PathLatency p{.path = s.path, .sla = SlaFor(options_, s.path.rail), .owd_p99 = s.owd_p99, .samples = s.samples};
    if (!p.sla) {
      p.verdict = LatencyVerdict::kNoSla;
      st.breached = false;
    } else if (!clock_locked) {
      p.verdict = LatencyVerdict::kClockNotLocked;
      st.breached = false;
    } else if (!s.owd_p99 || s.samples < options_.min_samples) {
      p.verdict = LatencyVerdict::kNotEnoughSamples;
      st.breached = false;
    } else {
      const Nanos sla = *p.sla;
      const bool above = *s.owd_p99 > sla;
      const bool below_clear = static_cast<double>(s.owd_p99->count()) < options_.clear_ratio * sla.count();
      if (!st.breached && above) {
        st.breached = true;
        LatencyBreach b{.path = s.path, .owd_p99 = *s.owd_p99, .sla = sla, .samples = s.samples};
        auto last = last_event_.find({s.path.peer, s.path.rail});
        if (last == last_event_.end() || now - last->second >= options_.event_gap) {
          b.notify = true;
          last_event_[{s.path.peer, s.path.rail}] = now;
        }
        d.breaches.push_back(b);
      } else if (st.breached && below_clear) {
        st.breached = false;
      }
      p.verdict = st.breached ? LatencyVerdict::kBreach : LatencyVerdict::kWithin;
    }
    next[s.path] = st;
    d.paths.push_back(p);
  }
  state_ = std::move(next);
  // A (peer, rail) with no path left (the peer went away) forgets its Event.
  std::erase_if(last_event_, [&](const auto& e) {
    return std::none_of(paths.begin(), paths.end(), [&](const LatencySample& s) {
      return s.path.peer == e.first.first && s.path.rail == e.first.second;
    });
  });

  LatencySummary& sum = d.summary;
  for (const PathLatency& p : d.paths) {
    if (!p.sla) continue;
    ++sum.with_sla;
    if (p.verdict == LatencyVerdict::kWithin || p.verdict == LatencyVerdict::kBreach) ++sum.judged;
    if (p.breach()) {
      ++sum.breaches;
      if (!sum.worst || Ratio(p) > Ratio(*sum.worst)) sum.worst = p;
    }
  }
  if (!enabled()) {
    sum.verdict = LatencyVerdict::kNoSla;
  } else if (!clock_locked) {
    sum.verdict = LatencyVerdict::kClockNotLocked;
  } else if (sum.breaches > 0) {
    sum.verdict = LatencyVerdict::kBreach;
  } else if (sum.judged > 0) {
    sum.verdict = LatencyVerdict::kWithin;
  } else {
    sum.verdict = LatencyVerdict::kNotEnoughSamples;  // no path with an SLA has enough delays (or none yet)
  }
  return d;
}

}  // namespace lockstep::fabric
