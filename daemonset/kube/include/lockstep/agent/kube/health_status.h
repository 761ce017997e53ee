// The FabricHealth status the node agent writes for its node. Pure (values in,
// JSON out); thread-compatible.
//
// The agent owns these status fields: phase, nodeName, lastReportTime, clock,
// clockErrorBoundNs, probeAddresses, rails, railsUp, railsTotal,
// flapsLastHour and the Ready condition. The operator owns policy and the
// PolicyConflict condition. Everything the agent does not own is kept as
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

struct AgentReport {
  std::string node_name;
  std::vector<std::string> probe_addresses;  // "IPv4:port", one per rail
  std::string node_public_key;  // status.nodePublicKey: Ed25519, base64 ("" = omit)
  int rails_up = 0;
  int rails_total = 0;
  int flaps_last_hour = 0;
  ClockSnapshot clock;
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

// The full status to write: `existing` (the object's .status, or null) with
// the agent's fields replaced. The Ready condition keeps its
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
