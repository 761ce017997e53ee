#include "lockstep/api/agent_config.h"

namespace lockstep::api {

AgentConfig AgentConfigForPolicy(const std::string& policy_name, const FabricPolicySpec& spec, int health_port) {
  AgentConfig c;
  c.policy = policy_name;
  c.node_name.clear();
  c.probe.port = spec.probe.port;
  c.probe.interval_ms = spec.probe.interval_ms;
  c.probe.peers_per_node = spec.probe.peers_per_node;
  c.probe.path_interval_ms = spec.probe.path_interval_ms;
  c.probe.miss_threshold = spec.probe.miss_threshold;
  c.probe.idle_path_interval_ms = spec.probe.idle_path_interval_ms;
  c.probe.idle_tick_ms = spec.probe.idle_tick_ms;
  c.probe.traffic_aware = spec.probe.traffic_aware;
  c.clock_sync.enabled = spec.clock_sync.enabled;
  c.clock_sync.window_seconds = spec.clock_sync.window_seconds;
  c.clock_sync.discipline_host_clock = spec.clock_sync.discipline_host_clock;
  c.clock_sync.max_error_bound_ns = spec.clock_sync.max_error_bound_ns;
  c.clock_sync.asymmetry_allowance_ns = spec.clock_sync.asymmetry_allowance_ns;
  c.failover.enabled = spec.failover.enabled;
  c.failover.readmit_after_seconds = spec.failover.readmit_after_seconds;
  c.failover.max_hold_down_seconds = spec.failover.max_hold_down_seconds;
  c.failover.hold_down_decay_seconds = spec.failover.hold_down_decay_seconds;
  c.flap_alert_per_hour = spec.flap_alert_per_hour;
  c.fabric.rails = spec.rails;
  c.fabric.host_interface = spec.host_interface;
  c.gpu = spec.gpu;
  c.latency = spec.latency;
  c.probe_key_file = kProbeKeyFile;
  c.health_addr = {kHealthHost, health_port};
  c.time_api_addr = {kTimeApiHost, health_port + 1};
  return c;
}

}  // namespace lockstep::api
