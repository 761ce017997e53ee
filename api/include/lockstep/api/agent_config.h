// AgentConfig: the node agent's configuration file (agent.yaml). The operator
// derives it from a FabricPolicy (AgentConfigForPolicy) and renders it
// (RenderAgentConfigYaml) into the agent's ConfigMap; the agent parses it
// (ParseAgentConfig); standalone installs write it by hand. One type, one
// emitter, one parser: tests/api/round_trip_test.cc keeps them in step.
// Parsing is strict: unknown keys and out-of-range values are InvalidArgument
// errors naming the key and the allowed range. Pure (no file access);
// thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/api/defaults.h"
#include "lockstep/api/fabric_policy.h"
#include "lockstep/api/validation.h"
#include "lockstep/common/result.h"

namespace lockstep::api {

struct PeerConfig {
  std::string name;
  std::string address;  // IPv4 literal
  int port = 0;         // 0 = the agent's probe.port
  std::string public_key{};  // optional: its Ed25519 node key, base64 (verifies its gossip)
  // Its stable host address (IPv4 on its host0, advertised on every live rail
  // link): where fabric probes and the pins for its traffic go. "" = no
  // fabric failover towards this peer.
  std::string host_address{};
  bool operator==(const PeerConfig&) const = default;
};

struct AgentConfig {
  std::string policy = "default";
  std::string node_name;
  struct Probe {
    int port = kProbePort;  // 0 = pick a free port (tests)
    int interval_ms = kProbeIntervalMs;
    int peers_per_node = kPeersPerNode;
    int path_interval_ms = kPathProbeIntervalMs;  // health probes on each path (rail x peer)
    int miss_threshold = kMissThreshold;          // consecutive misses that make a path down
    // Tiered probing: paths without traffic probed at least this often (0:
    // every path every path_interval_ms); traffic_aware: a peer carries
    // traffic while its TCP connections move bytes (sock_diag), else every
    // peer's pinned path counts as carrying traffic.
    int idle_path_interval_ms = kIdlePathIntervalMs;
    int idle_tick_ms = kIdleTickMs;  // a node with no fast path ticks this often (0: every path_interval_ms)
    bool traffic_aware = true;
    bool operator==(const Probe&) const = default;
  } probe;
  struct ClockSync {
    bool enabled = true;
    int window_seconds = kClockSyncWindowSeconds;
    bool discipline_host_clock = false;
    int64_t max_error_bound_ns = kMaxErrorBoundNs;
    int64_t asymmetry_allowance_ns = kAsymmetryAllowanceNs;  // added to every error bound (see the CRD)
    bool operator==(const ClockSync&) const = default;
  } clock_sync;
  struct Failover {
    bool enabled = true;  // false: monitor and report paths, never steer routes
    int readmit_after_seconds = kReadmitAfterSeconds;
    int max_hold_down_seconds = kMaxHoldDownSeconds;  // >= readmit_after_seconds
    int hold_down_decay_seconds = kHoldDownDecaySeconds;
    bool operator==(const Failover&) const = default;
  } failover;
  int flap_alert_per_hour = kFlapAlertPerHour;
  // Fabric failover on this host (agent.yaml `fabric:`). Empty rails: no
  // path probing, no route steering (clock sync only).
  struct Fabric {
    std::vector<std::string> rails;  // interface names in rail order (rail0, rail1, ...)
    // This host's address: host_address if set, else the first IPv4 address
    // of host_interface (read from the kernel at start).
    std::string host_interface = kFabricHostInterface;
    std::string host_address;
    int port = kFabricProbePort;  // UDP path probes; 0 = pick a free port (tests)
    // Paths probed per (rail, peer), each from its own UDP source port
    // (kFabricPathsPerRail): port + 1 + i for path i > 0.
    int paths_per_rail = kFabricPathsPerRail;
    bool operator==(const Fabric&) const = default;
  } fabric;
  // GPU health (agent.yaml `gpu:`, the FabricPolicy's spec.gpu): the mode,
  // how often NVML is read and the early-warning thresholds.
  GpuSpec gpu;
  // Latency SLAs of the fabric paths (agent.yaml `latency:`, the
  // FabricPolicy's spec.latency); rail names must be in fabric.rails.
  LatencySpec latency;
  std::string probe_key_file = kProbeKeyFile;
  // This node's Ed25519 signing key (a 32-byte seed); "" = a fresh key pair at
  // every start (published in FabricHealth status.nodePublicKey).
  std::string node_key_file;
  HostPort health_addr{kHealthHost, kHealthPort};
  HostPort time_api_addr{kTimeApiHost, kTimeApiPort};
  std::string bind_address = "0.0.0.0";  // probe socket; flag only, not in agent.yaml
  std::vector<PeerConfig> peers;
  bool operator==(const AgentConfig&) const = default;
};

// The agent.yaml the operator writes for a policy's agents. nodeName stays
// empty (each agent gets --node-name from the downward API); the health
// endpoints listen on health_port, the time API on loopback at health_port + 1.
AgentConfig AgentConfigForPolicy(const std::string& policy_name, const FabricPolicySpec& spec, int health_port);

// agent.yaml text for a config (every key but the flag-only bind_address).
std::string RenderAgentConfigYaml(const AgentConfig& config);

// Parses agent.yaml text. `source` names the file in error messages.
Result<AgentConfig> ParseAgentConfig(const std::string& yaml_text, const std::string& source);

// Parses a peers file: either a YAML list of {name, address[, port]} or a map
// with a single `peers:` key holding that list.
Result<std::vector<PeerConfig>> ParsePeers(const std::string& yaml_text, const std::string& source);

}  // namespace lockstep::api
