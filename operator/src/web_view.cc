#include "lockstep/operator/web_view.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "lockstep/api/defaults.h"
#include "lockstep/api/fabric_health.h"
#include "lockstep/api/pod_contract.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::op {
namespace {

using kube::Field;
using kube::GetString;
using kube::Json;

// Copies the listed keys of `from` that are present and scalar (strings,
// numbers, booleans): never an object or an array, so nothing nested slips in.
Json Pick(const Json& from, std::initializer_list<const char*> keys) {
  Json out = Json::object();
  if (!from.is_object()) return out;
  for (const char* k : keys) {
    auto it = from.find(k);
    if (it != from.end() && (it->is_string() || it->is_number() || it->is_boolean())) out[k] = *it;
  }
  return out;
}

const Json& Conditions(const Json& obj) { return Field(obj, {"status", "conditions"}); }

Json Condition(const Json& obj, const std::string& type) {
  const Json& cs = Conditions(obj);
  if (!cs.is_array()) return nullptr;
  for (const Json& c : cs) {
    if (c.is_object() && GetString(c, {"type"}) == type) {
      return Pick(c, {"status", "reason", "message", "lastTransitionTime"});
    }
  }
  return nullptr;
}

struct RailCondition {
  std::string rail, status, reason, message, since;
};

std::vector<RailCondition> RailConditions(const Json& health) {
  std::vector<RailCondition> out;
  const Json& cs = Conditions(health);
  if (!cs.is_array()) return out;
  const std::string prefix = api::kRailConditionPrefix;
  for (const Json& c : cs) {
    if (!c.is_object()) continue;
    std::string type = GetString(c, {"type"});
    if (type.size() <= prefix.size() || type.compare(0, prefix.size(), prefix) != 0) continue;
    out.push_back({type.substr(prefix.size()), GetString(c, {"status"}), GetString(c, {"reason"}),
                   GetString(c, {"message"}), GetString(c, {"lastTransitionTime"})});
  }
  return out;
}

Json NodeRow(const Json& h) {
  const Json& s = Field(h, {"status"});
  Json row = Pick(s, {"phase", "policy", "lastReportTime", "railsUp", "railsTotal", "flapsLastHour", "lastFlapTime",
                      "auditResult", "clockErrorBoundNs"});
  row["name"] = kube::Name(h);
  Json clock = Pick(Field(s, {"clock"}), {"state", "offsetNs", "driftPpb", "errorBoundNs", "peers"});
  if (!clock.empty()) row["clock"] = clock;
  Json gpu = Pick(Field(s, {"gpu"}), {"state", "warnings", "driverVersion"});
  if (!gpu.empty()) row["gpu"] = gpu;
  for (auto [key, type] :
       {std::pair{"ready", api::kAgentConditionType}, std::pair{"latency", api::kLatencyConditionType},
        std::pair{"prober", api::kProberStalledConditionType}}) {
    Json c = Condition(h, type);
    if (!c.is_null()) row[key] = c;
  }
  Json rails = Json::array();
  for (const RailCondition& r : RailConditions(h)) {
    rails.push_back({{"name", r.rail},
                     {"state", RailState(r.status, r.reason)},
                     {"reason", r.reason},
                     {"message", r.message},
                     {"since", r.since}});
  }
  row["rails"] = rails;
  return row;
}

// "pcie.link_width" -> "pcie"; areas in the order of the audit's tree.
std::string Area(const std::string& id) { return id.substr(0, id.find('.')); }
int AreaOrder(const std::string& area) {
  static const std::vector<std::string> kOrder = {"software", "memory", "pcie", "node", "frontend", "backend", "nccl"};
  auto it = std::find(kOrder.begin(), kOrder.end(), area);
  return static_cast<int>(it - kOrder.begin());
}

// A NodeAudit with its checks by area: every check, or (in the fleet view) only
// the failed ones, with "omitted" counting the rest (fetched on drill-down).
Json NodeAuditRow(const Json& na, bool all_checks) {
  const Json& s = Field(na, {"status"});
  Json row = Pick(s, {"phase", "verdict", "passed", "failed", "notPresent", "completionTime", "error"});
  row["name"] = kube::Name(na);
  row["node"] = GetString(na, {"spec", "nodeName"});
  std::map<std::pair<int, std::string>, Json> areas;
  const Json& checks = Field(s, {"checks"});
  if (checks.is_array()) {
    for (const Json& c : checks) {
      if (!c.is_object()) continue;
      std::string id = GetString(c, {"id"});
      std::string area = Area(id);
      Json& a = areas[{AreaOrder(area), area}];
      if (a.is_null()) {
        a = {{"area", area},    {"passed", 0},  {"failed", 0},
             {"notPresent", 0}, {"omitted", 0}, {"checks", Json::array()}};
      }
      std::string verdict = GetString(c, {"verdict"});
      if (verdict == "Pass") a["passed"] = a["passed"].get<int>() + 1;
      if (verdict == "Fail") a["failed"] = a["failed"].get<int>() + 1;
      if (verdict == "NotPresent") a["notPresent"] = a["notPresent"].get<int>() + 1;
      if (all_checks || verdict == "Fail") {
        a["checks"].push_back(Pick(c, {"id", "subject", "observed", "expected", "verdict", "message", "rule"}));
      } else {
        a["omitted"] = a["omitted"].get<int>() + 1;
      }
    }
  }
  row["areas"] = Json::array();
  for (auto& [key, a] : areas) row["areas"].push_back(std::move(a));
  return row;
}

Json AuditRow(const Json& fa, const std::vector<const Json*>& node_audits) {
  const Json& s = Field(fa, {"status"});
  Json row = Pick(s, {"phase", "startTime", "completionTime", "nodes", "passed", "failed", "pending"});
  row["name"] = kube::Name(fa);
  row["created"] = GetString(fa, {"metadata", "creationTimestamp"});
  row["failingChecks"] = Json::array();
  if (const Json& fc = Field(s, {"failingChecks"}); fc.is_array()) {
    for (const Json& c : fc) {
      Json e = Pick(c, {"check", "nodes"});
      e["nodeNames"] = Json::array();
      if (const Json& n = Field(c, {"nodeNames"}); n.is_array()) {
        for (const Json& x : n) {
          if (x.is_string()) e["nodeNames"].push_back(x);
        }
      }
      row["failingChecks"].push_back(e);
    }
  }
  row["nodeAudits"] = Json::array();
  for (const Json* na : node_audits) row["nodeAudits"].push_back(NodeAuditRow(*na, false));
  return row;
}

Json PodRef(const Json& pod) {
  Json p = {{"pod", kube::Name(pod)},
            {"node", GetString(pod, {"spec", "nodeName"})},
            {"phase", GetString(pod, {"status", "phase"})}};
  if (!Field(pod, {"metadata", "deletionTimestamp"}).is_null()) p["terminating"] = true;
  return p;
}

Json MigrationRecordJson(const Json& m) {
  return Pick(m, {"rank", "fromPod", "toPod", "reason", "startTime", "completeTime", "durationMs"});
}

// REQUIRES: pods are the job's (its namespace, its lockstep.dev/job label).
Json JobRow(const Json& tj, const std::vector<const Json*>& pods, const std::vector<MigrationEvent>& recorded) {
  const std::string ns = kube::Namespace(tj), name = kube::Name(tj);
  const Json& s = Field(tj, {"status"});
  Json row = Pick(s, {"phase", "readyReplicas", "availableSpares", "migrations"});
  row["namespace"] = ns;
  row["name"] = name;
  row["replicas"] = kube::GetInt(tj, {"spec", "replicas"});
  // A Kubeflow job's TrainingJob names the job it protects.
  for (auto [key, kind] : {std::pair{"trainJobRef", "TrainJob"}, std::pair{"pytorchJobRef", "PyTorchJob"}}) {
    std::string ref = GetString(tj, {"spec", key, "name"});
    if (!ref.empty()) row["source"] = {{"kind", kind}, {"name", ref}};
  }
  row["spares"] = kube::GetInt(tj, {"spec", "spares"}, -1);
  row["conditions"] = Json::array();
  if (const Json& cs = Field(s, {"conditions"}); cs.is_array()) {
    for (const Json& c : cs) row["conditions"].push_back(Pick(c, {"type", "status", "reason", "message"}));
  }
  std::vector<std::pair<int64_t, Json>> ranks;
  row["sparePods"] = Json::array();
  row["retiredPods"] = Json::array();
  for (const Json* p : pods) {
    std::string role = GetString(*p, {"metadata", "labels", api::kRoleLabel});
    Json ref = PodRef(*p);
    if (role == api::kRoleRank) {
      std::string rank = GetString(*p, {"metadata", "labels", api::kRankLabel});
      char* end = nullptr;
      long long r = std::strtoll(rank.c_str(), &end, 10);
      if (rank.empty() || *end != '\0') r = -1;
      ref["rank"] = r;
      ranks.emplace_back(r, std::move(ref));
    } else if (role == api::kRoleSpare) {
      row["sparePods"].push_back(std::move(ref));
    } else if (role == api::kRoleCoordinator) {
      row["coordinator"] = std::move(ref);
    } else if (role == api::kRoleRetired) {
      row["retiredPods"].push_back(std::move(ref));
    }
  }
  std::stable_sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  row["ranks"] = Json::array();
  for (auto& [r, ref] : ranks) row["ranks"].push_back(std::move(ref));
  // Migrations: those recorded while watching, then the status's last one
  // unless it is among them.
  Json migrations = Json::array();
  for (const MigrationEvent& m : recorded) {
    if (m.ns == ns && m.job == name) migrations.push_back(m.record);
  }
  if (const Json& last = Field(s, {"lastMigration"}); last.is_object()) {
    Json rec = MigrationRecordJson(last);
    if (std::find(migrations.begin(), migrations.end(), rec) == migrations.end()) migrations.push_back(rec);
  }
  row["migrationHistory"] = migrations;
  return row;
}

int64_t PolicyMaxErrorBound(const std::vector<const Json*>& policies, const std::string& policy) {
  for (const Json* p : policies) {
    if (kube::Name(*p) == policy) {
      return kube::GetInt(*p, {"spec", "clockSync", "maxErrorBoundNs"}, api::kMaxErrorBoundNs);
    }
  }
  return api::kMaxErrorBoundNs;
}

}  // namespace

std::string RailState(const std::string& status, const std::string& reason) {
  if (status == "True") return reason == "PathsDown" ? "degraded" : "up";
  if (status == "False") return "down";
  return "unknown";
}

std::vector<RailTransition> RailTransitions(const Json* before, const Json& after) {
  std::vector<RailTransition> out;
  if (before == nullptr) return out;
  std::map<std::string, RailCondition> old;
  for (RailCondition& r : RailConditions(*before)) old[r.rail] = std::move(r);
  for (const RailCondition& r : RailConditions(after)) {
    auto it = old.find(r.rail);
    if (it != old.end() && it->second.status == r.status && it->second.reason == r.reason) continue;
    out.push_back({r.since, kube::Name(after), r.rail, RailState(r.status, r.reason), r.reason, r.message});
  }
  return out;
}

std::vector<MigrationEvent> MigrationChanges(const Json* before, const Json& after) {
  const Json& now = Field(after, {"status", "lastMigration"});
  if (!now.is_object()) return {};
  Json rec = MigrationRecordJson(now);
  if (before != nullptr) {
    const Json& was = Field(*before, {"status", "lastMigration"});
    if (was.is_object() && MigrationRecordJson(was) == rec) return {};
  }
  return {{kube::Namespace(after), kube::Name(after), rec}};
}

Json BuildWebView(const WebViewInputs& in) {
  Json view = {{"generatedAt", kube::FormatRfc3339(in.now)}};
  std::set<std::string> rail_names;
  std::map<std::string, int> phases;
  int rails_up = 0, rails_total = 0;
  Json nodes = Json::array(), clock = Json::array();
  std::vector<RailTransition> flaps;
  for (const Json* h : in.healths) {
    Json row = NodeRow(*h);
    for (const Json& r : row["rails"]) rail_names.insert(r["name"].get<std::string>());
    phases[row.value("phase", "Pending")]++;
    rails_up += row.value("railsUp", 0);
    rails_total += row.value("railsTotal", 0);
    Json c = {{"node", row["name"]}, {"maxErrorBoundNs", PolicyMaxErrorBound(in.policies, row.value("policy", ""))}};
    if (row.contains("clock")) c.update(row["clock"]);
    clock.push_back(c);
    for (const RailCondition& r : RailConditions(*h)) {
      if (!r.since.empty()) {
        flaps.push_back({r.since, kube::Name(*h), r.rail, RailState(r.status, r.reason), r.reason, r.message});
      }
    }
    nodes.push_back(std::move(row));
  }
  {
    std::set<std::tuple<std::string, std::string, std::string, std::string>> seen;
    for (const RailTransition& t : flaps) seen.emplace(t.time, t.node, t.rail, t.state);
    for (const RailTransition& t : in.recorded_flaps) {
      if (seen.emplace(t.time, t.node, t.rail, t.state).second) flaps.push_back(t);
    }
  }
  // Newest first; ties in a stable order.
  std::stable_sort(flaps.begin(), flaps.end(), [](const RailTransition& a, const RailTransition& b) {
    return std::tie(b.time, a.node, a.rail) < std::tie(a.time, b.node, b.rail);
  });
  if (flaps.size() > in.max_flaps) flaps.resize(in.max_flaps);
  Json flap_rows = Json::array();
  for (const RailTransition& t : flaps) {
    flap_rows.push_back({{"time", t.time},
                         {"node", t.node},
                         {"rail", t.rail},
                         {"state", t.state},
                         {"reason", t.reason},
                         {"message", t.message}});
  }
  std::map<std::string, std::vector<const Json*>> by_audit;  // NodeAudits by FleetAudit
  for (const Json* na : in.node_audits) by_audit[GetString(*na, {"spec", "fleetAudit"})].push_back(na);
  Json audits = Json::array();
  for (const Json* fa : in.fleet_audits) audits.push_back(AuditRow(*fa, by_audit[kube::Name(*fa)]));
  // Newest audit first.
  std::stable_sort(audits.begin(), audits.end(),
                   [](const Json& a, const Json& b) { return a.value("created", "") > b.value("created", ""); });
  std::map<std::pair<std::string, std::string>, std::vector<const Json*>> by_job;  // pods by (ns, job)
  for (const Json* p : in.job_pods) {
    by_job[{kube::Namespace(*p), GetString(*p, {"metadata", "labels", api::kJobLabel})}].push_back(p);
  }
  Json jobs = Json::array();
  for (const Json* tj : in.training_jobs) {
    jobs.push_back(JobRow(*tj, by_job[{kube::Namespace(*tj), kube::Name(*tj)}], in.recorded_migrations));
  }

  Json summary = {{"nodes", nodes.size()}, {"railsUp", rails_up},     {"railsTotal", rails_total},
                  {"jobs", jobs.size()},   {"audits", audits.size()}, {"phases", phases}};
  view["summary"] = summary;
  view["rails"] = Json(std::vector<std::string>(rail_names.begin(), rail_names.end()));
  view["nodes"] = std::move(nodes);
  view["clock"] = std::move(clock);
  view["flaps"] = std::move(flap_rows);
  view["audits"] = std::move(audits);
  view["jobs"] = std::move(jobs);
  return view;
}

Json NodeAuditView(const Json& node_audit) { return NodeAuditRow(node_audit, true); }

}  // namespace lockstep::op
