// FabricPolicy (lockstep.dev/v1alpha1, crds/lockstep.dev_fabricpolicies.yaml):
// its spec and status as plain values with the CRD's defaults, and their JSON
// conversions. Parsing enforces the same bounds and rules as the CRD schema
// (the API server applies them too; parsing again keeps the operator safe
// against objects written under an older schema). Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/api/condition.h"
#include "lockstep/api/defaults.h"
#include "lockstep/common/result.h"

namespace lockstep::api {

using Json = nlohmann::json;

// metav1.LabelSelectorRequirement.
struct LabelSelectorRequirement {
  std::string key;
  std::string op;  // "operator": In, NotIn, Exists, DoesNotExist
  std::vector<std::string> values;
  bool operator==(const LabelSelectorRequirement&) const = default;
};

// metav1.LabelSelector: the requirements are ANDed; empty selects everything.
struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;
  bool operator==(const LabelSelector&) const = default;
};

// corev1.Toleration; absent fields stay absent.
struct Toleration {
  std::optional<std::string> key, op, value, effect;  // op: "operator"
  std::optional<int64_t> toleration_seconds;
  bool operator==(const Toleration&) const = default;
};

// corev1.ResourceRequirements without claims. Quantities are int-or-string.
struct ResourceRequirements {
  std::map<std::string, Json> requests{{"cpu", "50m"}, {"memory", "64Mi"}};
  std::map<std::string, Json> limits{{"memory", "128Mi"}};
  bool operator==(const ResourceRequirements&) const = default;
};

struct ProbeSpec {
  int interval_ms = kProbeIntervalMs;  // 1..60000: clock-sync probes to each selected peer
  int peers_per_node = kPeersPerNode;  // 1..64
  int port = kProbePort;               // 1024..65535
  int path_interval_ms = kPathProbeIntervalMs;  // 1..60000: health probes on each path (rail x peer)
  int miss_threshold = kMissThreshold;          // 1..100: consecutive misses that make a path down
  // Tiered probing (fabric/include/lockstep/fabric/probe_tiers.h): paths
  // without traffic probed at least every idle_path_interval_ms (0..60000;
  // 0: every path every path_interval_ms); a node with no fast path ticks
  // every idle_tick_ms (0..60000, at most half of idle_path_interval_ms; 0:
  // every path_interval_ms); traffic_aware: a peer carries traffic while its
  // TCP connections move bytes.
  int idle_path_interval_ms = kIdlePathIntervalMs;
  int idle_tick_ms = kIdleTickMs;
  bool traffic_aware = true;
  bool operator==(const ProbeSpec&) const = default;
};

// Moving traffic off failed paths (spec.failover).
struct FailoverSpec {
  bool enabled = true;  // false: monitor and report only, never steer routes
  int readmit_after_seconds = kReadmitAfterSeconds;  // 1..3600
  int max_hold_down_seconds = kMaxHoldDownSeconds;   // 1..86400, >= readmit_after_seconds
  int hold_down_decay_seconds = kHoldDownDecaySeconds;  // 1..86400
  bool operator==(const FailoverSpec&) const = default;
};

struct ClockSyncSpec {
  bool enabled = true;
  int window_seconds = kClockSyncWindowSeconds;  // 1..60
  bool discipline_host_clock = false;
  int64_t max_error_bound_ns = kMaxErrorBoundNs;            // 1..1e9
  int64_t asymmetry_allowance_ns = kAsymmetryAllowanceNs;  // 0..1e6
  bool operator==(const ClockSyncSpec&) const = default;
};

// The Xids that warn by default (the TrainingJob's spec.earlyWarning.xids
// default too; defined in training_job.cc): 48, 63, 64, 74, 79, 92, 94, 95.
std::vector<int> DefaultEarlyWarningXids();

// The node's GPU early-warning thresholds (spec.gpu.earlyWarning). The
// fields the TrainingJob's spec.earlyWarning also has carry its names and
// defaults, so the controller compares a node's published values with a
// job's thresholds key for key.
struct GpuEarlyWarningSpec {
  int gpu_temp_celsius = kGpuTempCelsius;                        // 30..150: warn at or above
  int slowdown_margin_celsius = kGpuSlowdownMarginCelsius;       // 0..50: warn within this of the slowdown threshold
  int ecc_single_bit_per_hour = kEccSingleBitPerHour;            // 1..1e6: corrected ECC errors in the trailing hour
  bool pending_row_remaps = true;                                // warn while a row remap waits for a GPU reset
  std::vector<int> xids = DefaultEarlyWarningXids();             // each 1..65535, a set, at most 128
  bool operator==(const GpuEarlyWarningSpec&) const = default;
};

// GPU health in the node agent (spec.gpu; agent.yaml gpu:).
//   Auto      read GPUs through NVML where the driver is; without one the
//             GPUHealthy condition is Unknown (NvmlUnavailable)
//   Required  as Auto, but a node where NVML cannot be read is reported
//             False (NvmlUnavailable): GPU nodes that must be watched
//   Disabled  no NVML, no GPU metrics, no GPUHealthy condition
// (Not on/off: YAML 1.1, which kubectl's parser speaks, reads those as booleans.)
struct GpuSpec {
  std::string mode = kGpuModeAuto;
  int poll_interval_seconds = kGpuPollIntervalSeconds;  // 1..3600
  GpuEarlyWarningSpec early_warning;
  bool operator==(const GpuSpec&) const = default;
};
const std::vector<std::string>& GpuModes();  // Auto, Required, Disabled

// One rail's latency SLA (spec.latency.rails[]): overrides the policy-wide one.
struct RailLatencySla {
  std::string name;                      // one of spec.rails
  int64_t one_way_delay_p99_micros = 1;  // 1..kMaxOneWayDelayP99Micros
  bool operator==(const RailLatencySla&) const = default;
};

// Latency SLAs (spec.latency; agent.yaml latency:): the p99 one-way delay
// each path (local rail -> peer) should stay below. A path's SLA is its
// rail's entry in `rails`, else one_way_delay_p99_micros, else none.
struct LatencySpec {
  std::optional<int64_t> one_way_delay_p99_micros;  // 1..kMaxOneWayDelayP99Micros; absent: no policy-wide SLA
  std::vector<RailLatencySla> rails;                // distinct names, at most kMaxRails
  int min_samples = kLatencyMinSamples;             // 1..kMaxLatencyMinSamples: delays in the window before judging
  bool operator==(const LatencySpec&) const = default;
};

struct AgentSpec {
  std::string image = kAgentImage;
  std::string image_pull_policy = kAgentImagePullPolicy;  // Always, IfNotPresent, Never
  std::string priority_class_name = kAgentPriorityClassName;
  ResourceRequirements resources;
  // Host directories for the NCCL plugin (absolute paths; "": off). Plugin:
  // an init container copies libnccl-net-lockstep.so there. Socket: mounted
  // at /run/lockstep in the agent, which serves nccl.sock in it ("": the
  // agent runs with --nccl-socket "").
  std::string nccl_plugin_host_path = kNcclPluginHostPath;
  std::string nccl_socket_host_path = kNcclSocketHostPath;
  bool operator==(const AgentSpec&) const = default;
};

LabelSelector DefaultNodeSelector();        // matchLabels {nvidia.com/gpu.present: "true"}
std::vector<Toleration> DefaultTolerations();  // tolerate the nvidia.com/gpu taint

struct FabricPolicySpec {
  LabelSelector node_selector = DefaultNodeSelector();
  std::vector<Toleration> tolerations = DefaultTolerations();
  ProbeSpec probe;
  ClockSyncSpec clock_sync;
  FailoverSpec failover;
  int flap_alert_per_hour = kFlapAlertPerHour;  // 1..10000
  // The selected nodes' rail interfaces in rail order (the same names on
  // every node, as on rail-optimized GPU nodes); empty: no fabric probing or
  // failover. At most kMaxRails, interface names (1-15 characters), distinct.
  std::vector<std::string> rails;
  std::string host_interface = kFabricHostInterface;  // holds each node's host address
  GpuSpec gpu;
  LatencySpec latency;
  AgentSpec agent;
  bool operator==(const FabricPolicySpec&) const = default;
};

// Written by the operator.
struct FabricPolicyStatus {
  std::optional<int64_t> observed_generation;
  std::optional<int> desired_nodes, ready_nodes, conflicting_nodes;
  std::optional<std::string> nodes;  // "ready/desired", for the printer column
  std::optional<std::string> daemon_set;
  std::vector<Condition> conditions;
  bool operator==(const FabricPolicyStatus&) const = default;
};

// Checks a FabricPolicy's name against what its derived labels allow:
//   FabricPolicy "<name>": metadata.name must be at most 63 characters ...
Status ValidatePolicyName(const std::string& policy_name);

// Parses spec (null or partial: defaults fill the rest). Errors name the
// policy, the field and the allowed range:
//   FabricPolicy "default": spec.probe.intervalMs must be between 1 and 60000 (got 0)
Result<FabricPolicySpec> ParseFabricPolicySpec(const std::string& policy_name, const Json& spec);
Result<FabricPolicyStatus> ParseFabricPolicyStatus(const std::string& policy_name, const Json& status);

Json ToJson(const LabelSelector& s);
Json ToJson(const Toleration& t);
Json ToJson(const std::vector<Toleration>& t);
Json ToJson(const ResourceRequirements& r);
Json ToJson(const GpuSpec& g);
Json ToJson(const LatencySpec& l);
Json ToJson(const FabricPolicySpec& spec);
Json ToJson(const FabricPolicyStatus& status);

}  // namespace lockstep::api
