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
//                              per fabric rail and (with fabric failover)
//                              the ProberStalled condition.
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

// Parses .status (null: empty). Errors name the node and the field.
Result<FabricHealthStatus> ParseFabricHealthStatus(const std::string& node_name, const Json& status);

Json ToJson(const ClockStatus& c);
Json ToJson(const AuditStatus& a);
Json ToJson(const FabricHealthAgentStatus& s);     // the agent's keys only
Json ToJson(const FabricHealthOperatorStatus& s);  // the operator's keys only
Json ToJson(const FabricHealthStatus& s);

// `existing` (a .status or null) with every agent-owned key replaced by the
// agent's value (absent values remove the key); everything else kept.
Json MergeAgentStatus(const Json& existing, const FabricHealthAgentStatus& agent);

}  // namespace lockstep::api
