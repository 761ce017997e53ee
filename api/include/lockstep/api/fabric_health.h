// FabricHealth (lockstep.dev/v1alpha1, crds/lockstep.dev_fabrichealths.yaml):
// one per node, named after it. It has no spec; its status has two writers,
// and the types below say which field belongs to whom:
//
//   FabricHealthAgentStatus    written by the node agent on that node
//                              (lockstep/agent/kube/health_status.h): phase,
//                              nodeName, lastReportTime, lastProbeTime, clock,
//                              clockErrorBoundNs, probeAddresses, railsUp,
//                              railsTotal, flapsLastHour, lastFlapTime, audit,
//                              auditResult, nodePublicKey, hostAddress, the
//                              Ready condition, one Rail-<name> condition
//                              per fabric rail, (with fabric failover)
//                              the ProberStalled condition, and gpu with
//                              the GPUHealthy condition (unless spec.gpu.mode
//                              is Disabled).
//   FabricHealthOperatorStatus written by the operator (health_plan.cc):
//                              policy and the PolicyConflict condition. Until
//                              the agent's first report (no lastReportTime) the
//                              operator also initialises phase (Pending),
//                              nodeName and Ready (Unknown).
//
// Each writer replaces only its own keys and keeps the rest as found
// (MergeAgentStatus). Derived values are not stored: printer columns read
// railsUp and railsTotal directly. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/api/condition.h"
#include "lockstep/common/result.h"

namespace lockstep::api {

using Json = nlohmann::json;

struct ClockStatus {
  std::optional<std::string> state;  // FREERUN, LOCKED, HOLDOVER
  std::optional<int64_t> offset_ns;  // local - fabric
  std::optional<int64_t> drift_ppb;
  std::optional<int64_t> error_bound_ns;
  std::optional<int> peers;
  bool operator==(const ClockStatus&) const = default;
};

struct AuditCheck {
  std::string name;
  std::string result;  // Pass, Fail, Warn, Skip
  std::optional<std::string> message;
  bool operator==(const AuditCheck&) const = default;
};

struct AuditStatus {
  std::optional<std::string> result;  // Pass, Fail, Unknown
  std::vector<AuditCheck> checks;
  std::optional<std::string> last_run_time;
  bool operator==(const AuditStatus&) const = default;
};

// One GPU as the agent last read it (status.gpu.devices[]). The value names
// follow the TrainingJob's spec.earlyWarning thresholds they are compared
// with (gpuTempCelsius -> temperatureCelsius, eccSingleBitPerHour ->
// eccSingleBitPerHour, xids -> xids).
struct GpuDeviceStatus {
  int index = 0;  // NVML's device index
  std::optional<std::string> uuid;
  std::optional<std::string> state;              // Healthy, Warning, Unavailable (could not be read)
  std::optional<int> temperature_celsius;
  std::optional<int> slowdown_margin_celsius;    // slowdown threshold - temperature
  std::optional<int64_t> ecc_single_bit_per_hour;  // corrected ECC errors within the trailing hour
  std::optional<int64_t> ecc_uncorrected;        // uncorrected ECC errors since the driver loaded
  std::optional<bool> row_remap_pending;         // a remap waits for a GPU reset
  std::vector<int> xids;                         // Xids seen within the last hour (each once)
  bool operator==(const GpuDeviceStatus&) const = default;
};

// The node's GPU health (status.gpu), the GPUHealthy condition's values.
struct GpuHealthStatus {
  std::optional<std::string> state;  // Healthy, Warning, Unavailable
  std::optional<std::string> driver_version;
  std::optional<int> warnings;       // GPUs in Warning
  std::vector<GpuDeviceStatus> devices;
  bool operator==(const GpuHealthStatus&) const = default;
};

struct FabricHealthAgentStatus {
  std::optional<std::string> phase;  // Pending, Healthy, Degraded, Failed
  std::optional<std::string> node_name;
  std::optional<std::string> last_report_time;  // RFC 3339
  std::optional<std::string> last_probe_time;
  std::optional<ClockStatus> clock;
  std::optional<int64_t> clock_error_bound_ns;  // copy of clock.errorBoundNs (printer column)
  std::vector<std::string> probe_addresses;     // "IPv4:port", one per rail
  std::optional<int> rails_up, rails_total, flaps_last_hour;
  std::optional<AuditStatus> audit;
  std::optional<std::string> audit_result;  // copy of audit.result (printer column)
  // Base64 of the node's 32-byte Ed25519 public key; the agent signs its clock
  // models and edges with the matching private key.
  std::optional<std::string> node_public_key;
  // The node's fabric host address (IPv4), where its applications live and
  // where peers send fabric path probes; only with fabric.rails.
  std::optional<std::string> host_address;
  std::optional<std::string> last_flap_time;  // RFC 3339: the latest flap of any rail
  std::optional<GpuHealthStatus> gpu;         // absent with spec.gpu.mode Disabled
  bool operator==(const FabricHealthAgentStatus&) const = default;
};

struct FabricHealthOperatorStatus {
  std::optional<std::string> policy;  // the FabricPolicy that selects the node
  bool operator==(const FabricHealthOperatorStatus&) const = default;
};

struct FabricHealthStatus {
  FabricHealthAgentStatus agent;
  FabricHealthOperatorStatus op;
  std::vector<Condition> conditions;  // Ready: agent; PolicyConflict: operator
  bool operator==(const FabricHealthStatus&) const = default;
};

// The status keys each writer owns (conditions are shared, by type).
const std::vector<std::string>& AgentOwnedStatusKeys();
const std::vector<std::string>& OperatorOwnedStatusKeys();
inline constexpr char kAgentConditionType[] = "Ready";
inline constexpr char kOperatorConditionType[] = "PolicyConflict";
// One agent condition per fabric rail: "Rail-" + the interface name (see
// RailConditionType in lockstep/agent/kube/health_status.h).
inline constexpr char kRailConditionPrefix[] = "Rail-";
// An agent condition (with fabric failover only): True while the fabric
// prober stalls beyond its excuse budget (ProberStalledCondition in
// lockstep/agent/kube/health_status.h).
inline constexpr char kProberStalledConditionType[] = "ProberStalled";
// An agent condition (unless spec.gpu.mode is Disabled): True while every
// GPU is within the early-warning thresholds, False (EarlyWarning) with the
// GPUs and values that tripped them, Unknown or, with mode Required, False
// (NvmlUnavailable) when NVML cannot be read. The controller reads it (and
// status.gpu) for pre-emptive migrations.
inline constexpr char kGpuConditionType[] = "GPUHealthy";
// An agent condition (with fabric failover only): True while every fabric
// path judged is within its latency SLA (FabricPolicy spec.latency), False
// naming the worst path and its p99 while any breaks it, Unknown (NoSLA,
// ClockNotLocked, NotEnoughSamples) when nothing can be judged
// (LatencyCondition in lockstep/agent/kube/health_status.h).
inline constexpr char kLatencyConditionType[] = "LatencyWithinSLA";
// An agent condition (with fabric failover only): True (LinkCongested)
// naming the links whose paths' one-way delays rose together, False
// (PathDelayRose) naming paths whose delay rose alone, False (NoCongestion)
// when every judged path is at its baseline, Unknown (NotJudged) before any
// path has delays enough (CongestionCondition in
// lockstep/agent/kube/health_status.h).
inline constexpr char kCongestionConditionType[] = "FabricCongested";

// Parses .status (null: empty). Errors name the node and the field.
Result<FabricHealthStatus> ParseFabricHealthStatus(const std::string& node_name, const Json& status);

Json ToJson(const ClockStatus& c);
Json ToJson(const AuditStatus& a);
Json ToJson(const GpuHealthStatus& g);
Json ToJson(const FabricHealthAgentStatus& s);     // the agent's keys only
Json ToJson(const FabricHealthOperatorStatus& s);  // the operator's keys only
Json ToJson(const FabricHealthStatus& s);

// `existing` (a .status or null) with every agent-owned key replaced by the
// agent's value (absent values remove the key); everything else kept.
Json MergeAgentStatus(const Json& existing, const FabricHealthAgentStatus& agent);

}  // namespace lockstep::api
