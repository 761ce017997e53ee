// The web page's view model (issue 26 §4): a pure function from the
// operator's cached objects (FabricHealths, FabricPolicies, TrainingJobs and
// their pods, FleetAudits and NodeAudits) to the JSON the page renders:
//
//   summary   counts of nodes by phase, rails up, jobs, audits
//   rails     every rail name seen (the fleet grid's columns)
//   nodes     one row per FabricHealth: phase, each rail's state (up,
//             degraded, down, unknown) with reason/message, flaps, clock,
//             audit verdict, GPU state
//   clock     per node: state, error bound, offset against its policy's
//             clockSync.maxErrorBoundNs
//   flaps     the rail transitions known: each rail condition's latest
//             transition plus those recorded while the operator watched
//             (RailTransitions), newest first
//   audits    FleetAudits with their NodeAudits, checks grouped by area
//             (the id's prefix: software, pcie, backend, ...): counts per
//             area and the failed checks; every check of one node on
//             drill-down (NodeAuditView), which keeps /api/view small (a
//             node holds ~40 checks: 6 MiB at 1,000 nodes)
//   jobs      TrainingJobs with their rank, spare and coordinator pods (node,
//             phase), migration count and the migrations known
//
// Only named scalar fields are copied (an allow-list): no object is passed
// through whole, so nothing the page must not show (Secrets are not among the
// inputs; pod env, annotations, keys) can reach it. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "lockstep/common/clock.h"
#include "lockstep/kube/gvr.h"

namespace lockstep::op {

// One change of a rail's condition on one node.
struct RailTransition {
  std::string time;  // the condition's lastTransitionTime (RFC 3339)
  std::string node, rail;
  std::string state;  // up, degraded, down, unknown (RailState)
  std::string reason, message;
  bool operator==(const RailTransition&) const = default;
};

// One completed or started migration of a TrainingJob's rank.
struct MigrationEvent {
  std::string ns, job;
  kube::Json record;  // lastMigration as the status held it (allow-listed fields)
  bool operator==(const MigrationEvent&) const = default;
};

// The state of a Rail-<name> condition: True RailUp "up", True PathsDown
// "degraded", False "down", anything else "unknown".
std::string RailState(const std::string& status, const std::string& reason);

// The rail transitions between two versions of a FabricHealth: each rail
// condition of `after` whose status or reason differs from `before`'s (a rail
// new in `after` counts when `before` is not null). before == nullptr (an
// object first seen): none; its current conditions are in the view anyway.
std::vector<RailTransition> RailTransitions(const kube::Json* before, const kube::Json& after);

// The migration a TrainingJob add or update records: `after`'s lastMigration
// when it differs from `before`'s (before == nullptr: any); none otherwise.
std::vector<MigrationEvent> MigrationChanges(const kube::Json* before, const kube::Json& after);

struct WebViewInputs {
  std::vector<const kube::Json*> healths, policies, training_jobs, job_pods, fleet_audits, node_audits;
  std::vector<RailTransition> recorded_flaps{};       // oldest first
  std::vector<MigrationEvent> recorded_migrations{};  // oldest first
  WallTime now{};
  size_t max_flaps = 200;  // the timeline keeps the newest this many
};

kube::Json BuildWebView(const WebViewInputs& in);

// One NodeAudit as the audit tree shows it, with every check (the drill-down).
kube::Json NodeAuditView(const kube::Json& node_audit);

}  // namespace lockstep::op
