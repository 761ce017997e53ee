#include "lockstep/fabric/config.h"

namespace lockstep::fabric {

Result<FabricOptions> FabricOptionsFromConfig(const api::AgentConfig& config) {
  FabricOptions o;
  o.probe_interval = std::chrono::milliseconds(config.probe.path_interval_ms);
  o.reply_timeout = AckTimeout(o.probe_interval, o.jitter);
  o.miss_threshold = config.probe.miss_threshold;
  // An idle rotation no slower than two fast intervals saves nothing: off.
  o.idle_interval = std::chrono::milliseconds(config.probe.idle_path_interval_ms);
  if (o.idle_interval < 2 * o.probe_interval) o.idle_interval = Nanos(0);
  // Idle ticks no slower than two fast intervals save nothing: off (as is
  // any idle tick without tiers).
  o.idle_tick = std::chrono::milliseconds(config.probe.idle_tick_ms);
  if (o.idle_interval.count() == 0 || o.idle_tick < 2 * o.probe_interval) o.idle_tick = Nanos(0);
  o.failover_enabled = config.failover.enabled;
  o.readmit_after = std::chrono::seconds(config.failover.readmit_after_seconds);
  o.max_hold_down = std::chrono::seconds(config.failover.max_hold_down_seconds);
  o.hold_down_decay = std::chrono::seconds(config.failover.hold_down_decay_seconds);
  o.flap_alert_per_hour = config.flap_alert_per_hour;
  if (Status s = Validate(o); !s.ok()) {
    return InvalidArgument("agent.yaml probe/failover settings: " + s.error().message);
  }
  return o;
}

LatencySlaOptions LatencySlaOptionsFromConfig(const api::AgentConfig& config) {
  LatencySlaOptions o;
  const api::LatencySpec& l = config.latency;
  if (l.one_way_delay_p99_micros) o.all_rails = std::chrono::microseconds(*l.one_way_delay_p99_micros);
  for (const api::RailLatencySla& r : l.rails) {
    const auto& rails = config.fabric.rails;
    for (size_t i = 0; i < rails.size(); ++i) {
      if (rails[i] == r.name) o.per_rail[static_cast<int>(i)] = std::chrono::microseconds(r.one_way_delay_p99_micros);
    }
  }
  o.min_samples = l.min_samples;
  return o;
}

}  // namespace lockstep::fabric
