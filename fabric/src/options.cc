#include "lockstep/fabric/options.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace lockstep::fabric {
namespace {

std::string Ms(Nanos d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + "ms"; }

}  // namespace

Status Validate(const FabricOptions& o) {
  auto range = [](const char* name, Nanos v, Nanos lo, Nanos hi) -> Status {
    if (v < lo || v > hi) {
      return InvalidArgument(std::string("fabric options: ") + name + " must be between " + Ms(lo) + " and " + Ms(hi) +
                             " (got " + Ms(v) + ")");
    }
    return Status::Ok();
  };
  for (const Status& s : {range("probe_interval", o.probe_interval, 1ms, 60s),
                          range("reply_timeout", o.reply_timeout, 1ms, 60s),
                          range("urgent_timeout", o.urgent_timeout, 1ms, 60s),
                          range("readmit_after", o.readmit_after, 0ms, 24h),
                          range("max_hold_down", o.max_hold_down, 0ms, 24h * 7),
                          range("hold_down_decay", o.hold_down_decay, 1ms, 24h * 7),
                          range("flap_window", o.flap_window, 1s, 24h * 7),
                          range("stats_window", o.stats_window, 1ms, 1h),
                          range("stall_window", o.stall_window, 1s, 1h),
                          range("promote_for", o.promote_for, 0ms, 1h)}) {
    if (!s.ok()) return s;
  }
  if (o.idle_interval.count() != 0 && (o.idle_interval < 2 * o.probe_interval || o.idle_interval > 60s)) {
    return InvalidArgument("fabric options: idle_interval must be 0 (no tiers) or between 2 x probe_interval (" +
                           Ms(2 * o.probe_interval) + ") and 60000ms (got " + Ms(o.idle_interval) + ")");
  }
  if (o.idle_interval.count() != 0 && o.idle_tick.count() != 0 &&
      (o.idle_tick < 2 * o.probe_interval || 2 * o.idle_tick > o.idle_interval)) {
    return InvalidArgument("fabric options: idle_tick must be 0 (tick every probe_interval) or between 2 x "
                           "probe_interval (" +
                           Ms(2 * o.probe_interval) + ") and idle_interval / 2 (" + Ms(o.idle_interval / 2) +
                           ") (got " + Ms(o.idle_tick) + ")");
  }
  if (!(o.jitter >= 0 && o.jitter < 1)) {
    return InvalidArgument("fabric options: jitter must be in [0, 1) (got " + std::to_string(o.jitter) + ")");
  }
  if (o.miss_threshold < 1 || o.miss_threshold > 100) {
    return InvalidArgument("fabric options: miss_threshold must be between 1 and 100 (got " +
                           std::to_string(o.miss_threshold) + ")");
  }
  if (o.stall_excuses < 0 || o.stall_excuses > 1000) {
    return InvalidArgument("fabric options: stall_excuses must be between 0 and 1000 (got " +
                           std::to_string(o.stall_excuses) + ")");
  }
  if (o.flap_alert_per_hour < 1) {
    return InvalidArgument("fabric options: flap_alert_per_hour must be at least 1 (got " +
                           std::to_string(o.flap_alert_per_hour) + ")");
  }
  return Status::Ok();
}

Nanos WorstCaseDetection(const FabricOptions& o) {
  const double gap = static_cast<double>(o.probe_interval.count()) * (1 + o.jitter);
  return Nanos(std::llround(gap)) + o.reply_timeout + (o.miss_threshold - 1) * o.urgent_timeout;
}

bool IdleTicks(const FabricOptions& o) { return o.idle_interval.count() > 0 && o.idle_tick.count() > 0; }

Nanos IdleAckTimeout(const FabricOptions& o) {
  if (!IdleTicks(o) || o.idle_tick <= o.probe_interval) return o.reply_timeout;
  const double extra = static_cast<double>((o.idle_tick - o.probe_interval).count()) * (1 + o.jitter);
  return o.reply_timeout + Nanos(std::llround(extra));
}

Nanos WorstCaseDetectionIdle(const FabricOptions& o) {
  if (o.idle_interval.count() == 0) return WorstCaseDetection(o);
  return o.idle_interval + IdleAckTimeout(o) + (o.miss_threshold - 1) * o.urgent_timeout;
}

Nanos WorstCaseDetectionStalled(const FabricOptions& o, Nanos lateness) {
  return WorstCaseDetection(o) + (o.miss_threshold + 1) * lateness + o.stall_excuses * (lateness + o.reply_timeout);
}

Nanos AckTimeout(Nanos probe_interval, double jitter) {
  return probe_interval + Nanos(std::llround(static_cast<double>(probe_interval.count()) * jitter)) + kAckSlack;
}

Nanos RequiredCleanPeriod(const FabricOptions& o, int level) {
  const Nanos cap = std::max(o.readmit_after, o.max_hold_down);
  Nanos d = o.readmit_after;
  for (int i = 1; i < level && d < cap; ++i) d *= 2;
  return std::min(d, cap);
}

int HoldDownLevelCap(const FabricOptions& o) {
  const Nanos cap = std::max(o.readmit_after, o.max_hold_down);
  int level = 1;
  while (RequiredCleanPeriod(o, level) < cap) ++level;
  return level;
}

}  // namespace lockstep::fabric
