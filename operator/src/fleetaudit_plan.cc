#include "lockstep/operator/fleetaudit_plan.h"

#include <algorithm>
#include <map>

#include "lockstep/audit/audit_json.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::op {

namespace {

using kube::Json;

constexpr size_t kMaxFailedNodes = 50;     // status.failedNodes
constexpr size_t kMaxNodeFailures = 5;     // failures per failed node
constexpr size_t kMaxMirroredChecks = 64;  // FabricHealth status.audit.checks

bool Selected(const Json& node, const FleetAuditSpec& spec) {
  const Json* labels = kube::FindPath(node, {"metadata", "labels"});
  for (const auto& [k, v] : spec.node_selector) {
    if (!labels || !labels->contains(k) || !(*labels)[k].is_string() || (*labels)[k].get<std::string>() != v) {
      return false;
    }
  }
  return true;
}

std::string Truncate(std::string s, size_t n) {
  if (s.size() > n) s.resize(n);
  return s;
}

// The FabricHealth's audit fields for one judged node.
Json MirrorPatch(const audit::NodeVerdict& v, const std::string& run_time) {
  Json checks = Json::array();
  for (const audit::Check& c : v.checks) {
    if (c.verdict != audit::Verdict::kFail || checks.size() >= kMaxMirroredChecks) continue;
    std::string msg = c.observed + (c.expected.empty() ? "" : " (expected " + c.expected + ")");
    if (!c.message.empty()) msg += ": " + c.message;
    checks.push_back(
        {{"name", Truncate(audit::CheckKey(c), 128)}, {"result", "Fail"}, {"message", Truncate(msg, 4096)}});
  }
  const std::string result = v.verdict == audit::Verdict::kFail ? "Fail" : "Pass";
  Json a = {{"result", result}, {"checks", checks}};
  if (!run_time.empty()) a["lastRunTime"] = run_time;
  return {{"audit", a}, {"auditResult", result}};
}

std::string FailingIds(const audit::NodeVerdict& v) {
  std::vector<std::string> ids;
  for (const audit::Check& c : v.checks) {
    if (c.verdict == audit::Verdict::kFail) ids.push_back(audit::CheckKey(c));
  }
  std::string out;
  for (size_t i = 0; i < ids.size() && i < kMaxNodeFailures; ++i) out += (i ? ", " : "") + ids[i];
  if (ids.size() > kMaxNodeFailures) out += " and " + std::to_string(ids.size() - kMaxNodeFailures) + " more";
  return out;
}

}  // namespace

FleetAuditSpec ParseFleetAuditSpec(const Json& fa) {
  FleetAuditSpec s;
  const Json* spec = kube::FindPath(fa, {"spec"});
  if (!spec || !spec->is_object()) return s;
  if (auto it = spec->find("nodeSelector"); it != spec->end() && it->is_object()) {
    for (auto& [k, v] : it->items()) {
      if (v.is_string()) s.node_selector.emplace_back(k, v.get<std::string>());
    }
  }
  s.pool_label = kube::GetString(*spec, {"poolLabel"}, s.pool_label);
  s.timeout_seconds = static_cast<int>(kube::GetInt(*spec, {"timeoutSeconds"}, s.timeout_seconds));
  s.pool.median_tolerance = static_cast<double>(kube::GetInt(*spec, {"medianTolerancePercent"}, 10)) / 100.0;
  if (auto it = spec->find("requiredModules"); it != spec->end() && it->is_array()) {
    for (const Json& m : *it) {
      if (m.is_string()) s.required_modules.push_back(m.get<std::string>());
    }
  }
  if (auto it = spec->find("expectations"); it != spec->end() && it->is_array()) {
    for (const Json& e : *it) {
      if (!e.is_object()) continue;
      s.pool.expectations[kube::GetString(e, {"pool"})][kube::GetString(e, {"check"})] = kube::GetString(e, {"value"});
    }
  }
  return s;
}

std::string NodeAuditName(const std::string& audit, const std::string& node) { return audit + "." + node; }

Json NodeAuditObject(const Json& fa, const std::string& node, const FleetAuditSpec& spec) {
  const std::string audit = kube::Name(fa);
  Json o = {
      {"apiVersion", kNodeAudits.ApiVersion()},
      {"kind", kNodeAudits.kind},
      {"metadata",
       {{"name", NodeAuditName(audit, node)},
        {"labels",
         {{kFleetAuditLabel, audit}, {kAuditNodeLabel, node}, {"app.kubernetes.io/managed-by", "lockstep-operator"}}},
        {"ownerReferences", Json::array({{{"apiVersion", kFleetAudits.ApiVersion()},
                                          {"kind", kFleetAudits.kind},
                                          {"name", audit},
                                          {"uid", kube::Uid(fa)},
                                          {"controller", true},
                                          {"blockOwnerDeletion", false}}})}}},
      {"spec", {{"fleetAudit", audit}, {"nodeName", node}}}};
  if (!spec.required_modules.empty()) o["spec"]["requiredModules"] = spec.required_modules;
  return o;
}

FleetAuditPlan PlanFleetAudit(const FleetAuditView& v) {
  FleetAuditPlan plan;
  const Json* old = kube::FindPath(v.audit, {"status"});
  plan.status = old && old->is_object() ? *old : Json::object();
  if (plan.status.value("phase", "") == "Completed") return plan;

  const FleetAuditSpec spec = ParseFleetAuditSpec(v.audit);
  const std::string audit_name = kube::Name(v.audit);
  WallTime start = v.now;
  if (auto t = kube::ParseRfc3339(plan.status.value("startTime", "")); t.ok()) {
    start = *t;
  } else {
    plan.status["startTime"] = kube::FormatRfc3339(v.now);
    plan.events.push_back({false, "AuditStarted", "auditing the nodes its nodeSelector picks", ""});
  }

  std::map<std::string, const Json*> labels_of;  // node -> its Node
  for (const Json* n : v.nodes) labels_of[kube::Name(*n)] = n;
  std::map<std::string, const Json*> existing;  // node -> its NodeAudit
  for (const Json* na : v.node_audits) existing[kube::GetString(*na, {"spec", "nodeName"})] = na;

  std::set<std::string> targets;
  for (const auto& [node, na] : existing) targets.insert(node);
  for (const Json* n : v.nodes) {
    const std::string name = kube::Name(*n);
    if (v.agents.count(name) && Selected(*n, spec)) targets.insert(name);
  }
  for (const std::string& node : targets) {
    if (!existing.count(node)) plan.create.push_back(NodeAuditObject(v.audit, node, spec));
  }

  // Results: judged together, per pool.
  std::vector<audit::NodeChecks> reported;
  std::map<std::string, std::string> run_time;
  for (const std::string& node : targets) {
    auto it = existing.find(node);
    if (it == existing.end()) continue;
    const Json* status = kube::FindPath(*it->second, {"status"});
    const std::string phase = status ? kube::GetString(*status, {"phase"}) : "";
    if (phase.empty()) continue;
    std::string pool;
    if (auto n = labels_of.find(node); n != labels_of.end()) {
      pool = kube::GetString(*n->second, {"metadata", "labels", spec.pool_label});
    }
    audit::NodeChecks nc{node, pool, {}};
    if (phase == "Completed") {
      const Json* checks = kube::FindPath(*status, {"checks"});
      auto parsed = audit::ChecksFromJson(checks ? *checks : Json::array());
      if (parsed.ok()) {
        nc.checks = std::move(*parsed);
      } else {
        nc.checks.push_back({.id = "audit.report",
                             .observed = "malformed",
                             .verdict = audit::Verdict::kFail,
                             .message = parsed.error().message});
      }
    } else {
      nc.checks.push_back({.id = "audit.run",
                           .observed = "error",
                           .verdict = audit::Verdict::kFail,
                           .message = kube::GetString(*status, {"error"}, "the agent could not run the checks")});
    }
    run_time[node] = kube::GetString(*status, {"completionTime"});
    reported.push_back(std::move(nc));
  }
  const std::vector<audit::NodeVerdict> verdicts = audit::JudgePools(reported, spec.pool);
  const audit::FleetSummary summary = audit::Summarize(verdicts);

  const int pending = static_cast<int>(targets.size() - reported.size());
  plan.status["phase"] = "Running";
  plan.status["nodes"] = static_cast<int>(targets.size());
  plan.status["passed"] = summary.passed;
  plan.status["failed"] = summary.failed;
  plan.status["pending"] = pending;
  Json failing = Json::array();
  for (const audit::CheckSummary& cs : summary.failing_checks) {
    if (failing.size() >= 128) break;
    failing.push_back({{"check", cs.id}, {"nodes", cs.nodes_failed}, {"nodeNames", cs.nodes}});
  }
  plan.status["failingChecks"] = failing;
  Json failed_nodes = Json::array();
  for (const audit::NodeVerdict& nv : verdicts) {
    if (nv.verdict != audit::Verdict::kFail || failed_nodes.size() >= kMaxFailedNodes) continue;
    Json failures = Json::array();
    for (const audit::Check& c : nv.checks) {
      if (c.verdict != audit::Verdict::kFail || failures.size() >= kMaxNodeFailures) continue;
      Json f = {{"check", c.id}, {"observed", Truncate(c.observed, 256)}};
      if (!c.subject.empty()) f["subject"] = c.subject;
      if (!c.expected.empty()) f["expected"] = Truncate(c.expected, 256);
      if (!c.message.empty()) f["message"] = Truncate(c.message, 1024);
      failures.push_back(std::move(f));
    }
    failed_nodes.push_back(
        {{"node", nv.node}, {"pool", Truncate(nv.pool, 63)}, {"failed", nv.counts.failed}, {"failures", failures}});
  }
  plan.status["failedNodes"] = failed_nodes;

  const WallTime deadline = start + std::chrono::seconds(spec.timeout_seconds);
  const bool all_reported = !targets.empty() && pending == 0;
  if (!all_reported && v.now < deadline) {
    plan.requeue_after = std::chrono::duration_cast<Nanos>(deadline - v.now);
    return plan;
  }

  plan.completed = true;
  plan.status["phase"] = "Completed";
  plan.status["completionTime"] = kube::FormatRfc3339(v.now);
  for (const audit::NodeVerdict& nv : verdicts) {
    plan.mirrors.push_back({nv.node, MirrorPatch(nv, run_time[nv.node])});
    if (nv.verdict == audit::Verdict::kFail) {
      plan.events.push_back({true, "AuditFailed", "FleetAudit " + audit_name + ": " + FailingIds(nv), nv.node});
    }
  }
  std::string msg = std::to_string(summary.failed) + " of " + std::to_string(targets.size()) + " nodes failed";
  if (pending > 0)
    msg += ", " + std::to_string(pending) + " did not report within " + std::to_string(spec.timeout_seconds) + "s";
  for (size_t i = 0; i < summary.failing_checks.size() && i < 5; ++i) {
    msg += (i ? ", " : ": ") + summary.failing_checks[i].id + " (" +
           std::to_string(summary.failing_checks[i].nodes_failed) + ")";
  }
  const bool bad = summary.failed > 0 || pending > 0 || targets.empty();
  if (targets.empty()) msg = "no node with a Lockstep agent matches spec.nodeSelector";
  plan.events.push_back({bad, bad ? "AuditFailed" : "AuditPassed", msg, ""});
  return plan;
}

}  // namespace lockstep::op
