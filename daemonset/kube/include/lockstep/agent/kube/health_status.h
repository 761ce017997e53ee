// The FabricHealth status the node agent writes for its node. Pure (values in,
// JSON out); thread-compatible.
//
// Which status fields the agent owns and which the operator owns is defined by
// the typed contract (lockstep/api/fabric_health.h: FabricHealthAgentStatus,
// FabricHealthOperatorStatus). Everything the agent does not own is kept as
// found, which is why writes are read-modify-write with a resourceVersion
// precondition (conditions is a list, replaced whole by a merge patch).
//
//   Json status = BuildStatus(existing["status"], report, FormatRfc3339(now));
//   if (ChangedBeyondReportTime(existing["status"], status) || heartbeat_due)
//     api.MergePatch(..., StatusPatch(existing, status), "status");
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/agent/clock_model.h"
#include "lockstep/api/fabric_health.h"
#include "lockstep/kube/conditions.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::agent {

using Json = kube::Json;

// The clock-sync state as the report needs it.
struct ClockSnapshot {
  bool enabled = true;  // clockSync.enabled
  ClockSyncState state = ClockSyncState::kFreerun;
  bool has_model = false;  // a model was adopted at some point (FREERUN with one = lock lost)
  int64_t offset_ns = 0;   // local - fabric
  int64_t drift_ppb = 0;
  std::optional<int64_t> error_bound_ns{};  // nullopt: unbounded (FREERUN)
  int peers = 0;                            // own edges fitted in the last window
};

// One fabric rail as the fabric service sees it (FabricService::Health()).
struct RailReport {
  std::string name{};  // the rail's interface
  int paths = 0;       // one per probed peer; 0: no peers yet
  int usable = 0;    // paths up or suspect
  bool down = false;  // no path delivers and at least one failed
  std::vector<std::string> failed_peers{};  // peers whose path on this rail is down or recovering
  int flaps_last_hour = 0;
  bool alerting = false;  // flaps above flapAlertPerHour
};

// The latency SLAs' summary (FabricLatencyView).
struct LatencyReport {
  // NoSLA, ClockNotLocked, NotEnoughSamples, WithinSLA or SLABreached
  // (fabric::ToString(LatencyVerdict)).
  std::string verdict = "NoSLA";
  int with_sla = 0, judged = 0, breaches = 0;  // paths
  int min_samples = 0;
  std::string worst_peer{}, worst_rail{};  // SLABreached: the path furthest above its SLA
  int64_t worst_p99_ns = 0, worst_sla_ns = 0;
};

// Congestion localisation's view (FabricCongestionView).
struct CongestionSummary {
  int judged = 0;
  std::vector<std::string> links{};      // flagged congested, sorted
  std::vector<std::string> bad_paths{};  // rising alone, sorted
};

// Fabric failover's view (only with fabric.rails).
struct FabricSnapshot {
  std::string host_address{};        // status.hostAddress
  std::vector<RailReport> rails{};  // rail order
  int flaps_last_hour = 0;
  std::optional<std::string> last_flap_time{};  // RFC 3339
  // A stall of the prober was judged (beyond its excuse budget) within the
  // last stall window (FabricHealthView::prober_stalled).
  bool prober_stalled = false;
  LatencyReport latency{};
  CongestionSummary congestion{};
};

// GPU health (agent.yaml gpu.mode not Disabled): the GPUHealthy condition
// and the status.gpu values, as the agent's GPU monitor last saw them
// (GpuReportOf in lockstep/agent/app/gpu_report.h).
struct GpuReport {
  kube::Condition condition{};  // type api::kGpuConditionType
  api::GpuHealthStatus status{};
};

struct AgentReport {
  std::string node_name;
  std::vector<std::string> probe_addresses;  // "IPv4:port", one per rail
  // Without fabric: as given. With fabric: BuildStatus derives railsUp,
  // railsTotal and flapsLastHour from `fabric` and these are ignored.
  int rails_up = 0;
  int rails_total = 0;
  int flaps_last_hour = 0;
  std::optional<FabricSnapshot> fabric;
  ClockSnapshot clock;
  // Base64 of this node's Ed25519 public key (status.nodePublicKey); nullopt
  // keeps whatever the status holds.
  std::optional<std::string> node_public_key;
  // nullopt: no GPU monitor (status.gpu and GPUHealthy are removed).
  std::optional<GpuReport> gpu;
};

// Phase and Ready condition for a clock snapshot:
//   LOCKED                -> Healthy,  Ready=True  ClockLocked
//   HOLDOVER              -> Degraded, Ready=False ClockHoldover
//   FREERUN after a lock  -> Degraded, Ready=False ClockLockLost
//   FREERUN, never locked -> Pending,  Ready=False ClockNotLocked
//   clock sync disabled   -> Healthy,  Ready=True  ClockSyncDisabled
struct Readiness {
  std::string phase;
  std::string status;  // "True" / "False"
  std::string reason;
  std::string message;
};
Readiness Assess(const ClockSnapshot& clock);

// Phase and Ready for the whole report: the clock's (above) unless a fabric
// rail is down, then
//   some rails down -> Degraded, Ready=False RailDown (message names the rails
//                      and the peers whose paths failed; the clock's reason follows)
//   every rail down -> Failed,   Ready=False RailDown
// A rail without peers (none discovered yet, or a one-node policy) has no
// verdict and counts as up.
Readiness Assess(const AgentReport& report);

// The condition for one rail: type RailConditionType(name);
//   True    RailUp       every path delivers
//   True    PathsDown    some paths down: names the peers (their side, most likely)
//   False   RailDown     no path delivers: names the peers
//   Unknown NoPeers      no peer to probe yet (counts as up)
//   Unknown Probing      paths have no verdict yet (counts as up)
// A rail flapping above flapAlertPerHour says so in the message.
kube::Condition RailCondition(const RailReport& rail);

// The fabric prober's condition, type ProberStalled (only with fabric):
//   True  StallsNotExcused  the prober woke late more often than its stall
//                           excuse budget allows: paths are judged through
//                           its stalls (false downs possible if its peers
//                           stalled too); check CPU load and steal
//   False OnTime            on time, or its rare stalls are excused
// The message holds no counts (a write per change, not per stall).
kube::Condition ProberStalledCondition(const FabricSnapshot& fabric);

// The latency SLA condition, type LatencyWithinSLA (only with fabric):
//   True    WithinSLA         every path judged is within its SLA
//   False   SLABreached       names the path furthest above its SLA, its p99
//                             and the number of paths in breach
//   Unknown NoSLA             the policy sets no latency SLA
//   Unknown ClockNotLocked    clock sync is not LOCKED: delays are not judged
//   Unknown NotEnoughSamples  no path with an SLA has minSamples delays yet
// The message holds no values that move while the state holds (a write per
// change, not per publish), except the worst path's p99 in breach.
kube::Condition LatencyCondition(const LatencyReport& latency);

// The congestion condition, type FabricCongested (only with fabric):
//   True    LinkCongested   the one-way delays of the paths crossing these
//                           links rose together: names them (and any path
//                           rising alone besides)
//   False   PathDelayRose   no link, but these paths' delays rose alone
//                           (the path, or the peer's end, not a shared link)
//   False   NoCongestion    every judged path is at its own baseline
//   Unknown NotJudged       no path has delays enough yet (clock sync not
//                           LOCKED, or minSamples not reached)
// At most 5 names each, then "and N more". The message holds only names (a
// write when the set changes, not per publish).
kube::Condition CongestionCondition(const CongestionSummary& congestion);

// "Rail-" + the interface name with characters a condition type may not
// hold (it allows [-A-Za-z0-9_.], alphanumeric last) replaced by '-', and an
// 'x' appended when it would not end alphanumeric.
std::string RailConditionType(const std::string& rail_name);

// What a write is due for at once (subject to the reporter's rate limit):
// the Ready reason, every rail condition's status and reason, ProberStalled's,
// LatencyWithinSLA's, FabricCongested's (its message too: the links named)
// and GPUHealthy's (a GPU that starts to warn is written within the report
// interval, not at the next heartbeat). GPUHealthy does not change Ready or
// the phase: those describe the fabric and the clock.
std::string ReportSignature(const AgentReport& report);

// The full status to write: `existing` (the object's .status, or null) with
// the agent's fields replaced (status.gpu and GPUHealthy from report.gpu,
// removed without it). The Ready condition keeps its
// lastTransitionTime unless its status changes. `now` is RFC 3339.
Json BuildStatus(const Json& existing, const AgentReport& report, const std::string& now);

// True when `a` and `b` differ in anything but lastReportTime.
bool ChangedBeyondReportTime(const Json& a, const Json& b);

// RFC 7386 merge patch turning `from` into `to` (objects recurse, removed
// keys become null, anything else is replaced whole). {} when equal.
Json MergePatchDiff(const Json& from, const Json& to);

// The body for PATCH .../fabrichealths/<node>/status: the status diff against
// `object` (as read) and its resourceVersion as a precondition.
Json StatusPatch(const Json& object, const Json& status);

}  // namespace lockstep::agent
