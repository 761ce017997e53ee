// PlanFleetAudit: what the FleetAudit controller does next, from the cache
// (pure; values in, a plan out). A FleetAudit is one run:
//
//   1. its targets are the nodes its nodeSelector picks that have an agent
//      (a FabricHealth), plus any node it already made a NodeAudit for;
//   2. each target without one gets a NodeAudit <audit>.<node> (owned by the
//      FleetAudit, labelled lockstep.dev/fleet-audit and lockstep.dev/node:
//      the agent there watches only its own);
//   3. the NodeAudits with results are judged against their pools
//      (lockstep_audit's JudgePools; a node's pool is its spec.poolLabel
//      value) and summarised into the status;
//   4. when every target reported, or spec.timeoutSeconds passed, the audit
//      completes: each reporting node's verdict goes to its FabricHealth's
//      status.audit and auditResult (the AUDIT column), with Events on the
//      FleetAudit and on each failed node's FabricHealth. A completed audit
//      is not judged again.
//
// API traffic per audit: one create per node (operator), one status write
// per node (agent), one FabricHealth status patch per node, and the
// FleetAudit's status (rate-limited by the reconciler).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lockstep/audit/node_audit.h"
#include "lockstep/audit/pool.h"
#include "lockstep/common/clock.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::op {

using audit::kAuditNodeLabel;
using audit::kFleetAuditLabel;
using kube::gvr::kFleetAudits;
using kube::gvr::kNodeAudits;

// spec, with the CRD's defaults for absent fields.
struct FleetAuditSpec {
  std::vector<std::pair<std::string, std::string>> node_selector{};
  std::string pool_label = "node.kubernetes.io/instance-type";
  int timeout_seconds = 300;
  std::vector<std::string> required_modules{};
  audit::PoolOptions pool{};
};
FleetAuditSpec ParseFleetAuditSpec(const kube::Json& fleet_audit);

// "<audit>.<node>".
std::string NodeAuditName(const std::string& audit, const std::string& node);
kube::Json NodeAuditObject(const kube::Json& fleet_audit, const std::string& node, const FleetAuditSpec& spec);

struct FleetAuditView {
  const kube::Json& audit;
  std::vector<const kube::Json*> nodes{};        // every Node
  std::set<std::string> agents{};                // nodes with a FabricHealth
  std::vector<const kube::Json*> node_audits{};  // this audit's NodeAudits
  WallTime now{};
};

// A FabricHealth's audit fields: {"audit": {...}, "auditResult": "Pass"}.
struct AuditMirror {
  std::string node;
  kube::Json status_patch;
};

struct FleetAuditEvent {
  bool warning = false;
  std::string reason, message;
  std::string node;  // "" the FleetAudit, else that node's FabricHealth
};

struct FleetAuditPlan {
  std::vector<kube::Json> create{};
  kube::Json status{};     // the status it should have
  bool completed = false;  // this plan completes the audit
  std::vector<AuditMirror> mirrors{};
  std::vector<FleetAuditEvent> events{};
  std::optional<Nanos> requeue_after{};  // the timeout, while running
};

FleetAuditPlan PlanFleetAudit(const FleetAuditView& view);

}  // namespace lockstep::op
