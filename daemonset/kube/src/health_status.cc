#include "lockstep/agent/kube/health_status.h"

#include <algorithm>
#include <cstdio>

#include "lockstep/api/fabric_health.h"
#include "lockstep/kube/conditions.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::agent {

Readiness Assess(const ClockSnapshot& c) {
  if (!c.enabled) {
    return {"Healthy", "True", "ClockSyncDisabled",
            "clock sync is disabled by the FabricPolicy (spec.clockSync.enabled: false)"};
  }
  switch (c.state) {
    case ClockSyncState::kLocked:
      return {"Healthy", "True", "ClockLocked",
              "fabric time is locked; its error bound is within clockSync.maxErrorBoundNs"};
    case ClockSyncState::kHoldover:
      return {"Degraded", "False", "ClockHoldover",
              "no fresh clock fit: fabric time is extrapolated and its error bound grows. Check that the "
              "probe port (UDP) is reachable between the policy's nodes"};
    case ClockSyncState::kFreerun:
      break;
  }
  if (c.has_model) {
    return {"Degraded", "False", "ClockLockLost",
            "clock sync lost its lock (holdover expired): fabric time is unbounded until probe peers answer "
            "again. Check the probe port (UDP) between the policy's nodes"};
  }
  return {"Pending", "False", "ClockNotLocked",
          "clock sync has not locked yet: waiting for probe peers to answer (takes a few windows after start)"};
}

namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool IsTypeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.';
}
bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

}  // namespace

std::string RailConditionType(const std::string& rail_name) {
  std::string out = api::kRailConditionPrefix;
  for (char c : rail_name) out += IsTypeChar(c) ? c : '-';
  if (!IsAlnum(out.back())) out += 'x';  // a type ends alphanumeric
  return out;
}

kube::Condition RailCondition(const RailReport& r) {
  kube::Condition c{RailConditionType(r.name), "True", "RailUp", ""};
  const std::string flapping =
      r.alerting ? "; it flapped " + std::to_string(r.flaps_last_hour) +
                       " times in the last hour, above the policy's flapAlertPerHour"
                 : "";
  if (r.paths == 0) {
    c.status = "Unknown";
    c.reason = "NoPeers";
    c.message = "rail " + r.name + " has no fabric peer to probe yet (none discovered); it counts as up" + flapping;
  } else if (r.down) {
    c.status = "False";
    c.reason = "RailDown";
    c.message = "rail " + r.name + " is down: no path through it delivers (failed to " + JoinNames(r.failed_peers) +
                "); traffic to its peers is pinned to the other rails" + flapping;
  } else if (!r.failed_peers.empty()) {
    c.reason = "PathsDown";
    c.message = "rail " + r.name + " delivers to " + std::to_string(r.usable) + " of " + std::to_string(r.paths) +
                " peers; paths down to " + JoinNames(r.failed_peers) + " (most likely their links)" + flapping;
  } else if (r.usable == 0) {
    c.status = "Unknown";
    c.reason = "Probing";
    c.message = "rail " + r.name + ": no verdict yet on its " + std::to_string(r.paths) + " paths" + flapping;
  } else {
    c.message = "rail " + r.name + " delivers to " + std::to_string(r.usable) + " of " + std::to_string(r.paths) +
                " peers" + flapping;
  }
  return c;
}

kube::Condition ProberStalledCondition(const FabricSnapshot& f) {
  if (f.prober_stalled) {
    return {api::kProberStalledConditionType, "True", "StallsNotExcused",
            "the fabric prober wakes late (past the urgent timeout) more often than its stall excuse budget "
            "allows, so paths are judged through its stalls: a failure is still detected within a bound, but if "
            "this node's peers stalled too, paths can be declared down by the stalls themselves. Check CPU load "
            "and steal time on the node, the agent's CPU limit, and that the prober runs SCHED_FIFO "
            "(lockstep_fabric_prober_stalls_judged_total)"};
  }
  return {api::kProberStalledConditionType, "False", "OnTime",
          "the fabric prober wakes on time, or its rare stalls are excused within their budget"};
}

namespace {

std::string Micros(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", static_cast<double>(ns) / 1000.0);
  return buf;
}

}  // namespace

kube::Condition LatencyCondition(const LatencyReport& l) {
  const char* type = api::kLatencyConditionType;
  if (l.verdict == "SLABreached") {
    return {type, "False", "SLABreached",
            "path " + l.worst_rail + " -> " + l.worst_peer + ": one-way delay p99 " + Micros(l.worst_p99_ns) +
                " is above its SLA of " + Micros(l.worst_sla_ns) + "; " + std::to_string(l.breaches) + " of " +
                std::to_string(l.judged) + " judged paths in breach (lockstep-agent fabric status lists them)"};
  }
  if (l.verdict == "WithinSLA") {
    return {type, "True", "WithinSLA",
            "every fabric path judged is within its latency SLA (one-way delay p99; breaches clear below 90% of "
            "the SLA)"};
  }
  if (l.verdict == "ClockNotLocked") {
    return {type, "Unknown", "ClockNotLocked",
            "clock sync is not LOCKED: one-way delays are not measured, so latency SLAs are not judged"};
  }
  if (l.verdict == "NotEnoughSamples") {
    return {type, "Unknown", "NotEnoughSamples",
            "no fabric path with a latency SLA has " + std::to_string(l.min_samples) +
                " one-way delays (latency.minSamples) in its stats window yet"};
  }
  return {type, "Unknown", "NoSLA", "the FabricPolicy sets no latency SLA (spec.latency)"};
}

namespace {

// "a, b, c, d, e and 3 more"
std::string FirstNames(const std::vector<std::string>& names) {
  constexpr size_t kShown = 5;
  std::string s;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > kShown) s += " and " + std::to_string(names.size() - kShown) + " more";
  return s;
}

}  // namespace

kube::Condition CongestionCondition(const CongestionSummary& c) {
  const char* type = api::kCongestionConditionType;
  if (!c.links.empty()) {
    std::string m = "the one-way delays of the fabric paths crossing " + FirstNames(c.links) +
                    " rose together above their own baselines: congested";
    if (!c.bad_paths.empty()) m += "; paths whose delay rose alone: " + FirstNames(c.bad_paths);
    return {type, "True", "LinkCongested", m + " (lockstep-agent fabric status, \"congestion\")"};
  }
  if (!c.bad_paths.empty()) {
    return {type, "False", "PathDelayRose",
            "no link is congested, but the one-way delay of " + FirstNames(c.bad_paths) +
                " rose alone above its baseline (that path or the peer's end, not a link it shares with others; "
                "lockstep-agent fabric status, \"congestion\")"};
  }
  if (c.judged > 0) {
    return {type, "False", "NoCongestion", "every fabric path judged is at its own one-way delay baseline"};
  }
  return {type, "Unknown", "NotJudged",
          "no fabric path has one-way delays enough to judge yet (clock sync must be LOCKED)"};
}

Readiness Assess(const AgentReport& report) {
  Readiness clock = Assess(report.clock);
  if (!report.fabric) return clock;
  std::vector<std::string> down;
  for (const RailReport& r : report.fabric->rails) {
    if (r.down) down.push_back(r.name + " (failed to " + JoinNames(r.failed_peers) + ")");
  }
  if (down.empty()) return clock;
  const bool all = down.size() == report.fabric->rails.size();
  return {all ? "Failed" : "Degraded", "False", "RailDown",
          std::string(all ? "every fabric rail is down: " : "fabric rails down: ") + JoinNames(down) +
              ". Clock: " + clock.reason};
}

std::string ReportSignature(const AgentReport& report) {
  std::string s = Assess(report).reason;
  if (report.fabric) {
    for (const RailReport& r : report.fabric->rails) {
      kube::Condition c = RailCondition(r);
      s += "|" + c.type + "=" + c.status + "/" + c.reason;
    }
    const kube::Condition c = ProberStalledCondition(*report.fabric);
    s += "|" + c.type + "=" + c.status + "/" + c.reason;
    const kube::Condition l = LatencyCondition(report.fabric->latency);
    s += "|" + l.type + "=" + l.status + "/" + l.reason;
    const kube::Condition g = CongestionCondition(report.fabric->congestion);
    s += "|" + g.type + "=" + g.status + "/" + g.reason + "/" + g.message;
  }
  if (report.gpu) {
    const kube::Condition& c = report.gpu->condition;
    s += "|" + c.type + "=" + c.status + "/" + c.reason;
  }
  return s;
}

Json BuildStatus(const Json& existing, const AgentReport& report, const std::string& now) {
  const ClockSnapshot& c = report.clock;
  Readiness r = Assess(report);
  api::FabricHealthAgentStatus a;
  a.node_name = report.node_name;
  a.phase = r.phase;
  a.last_report_time = now;
  api::ClockStatus& clock = a.clock.emplace();
  clock.state = ClockSyncStateName(c.state);
  clock.peers = c.peers;
  if (c.state != ClockSyncState::kFreerun) {
    clock.offset_ns = c.offset_ns;
    clock.drift_ppb = c.drift_ppb;
  }
  clock.error_bound_ns = c.error_bound_ns;
  a.clock_error_bound_ns = c.error_bound_ns;
  a.probe_addresses = report.probe_addresses;
  a.rails_up = report.rails_up;
  a.rails_total = report.rails_total;
  a.flaps_last_hour = report.flaps_last_hour;
  if (report.fabric) {
    const FabricSnapshot& f = *report.fabric;
    a.rails_total = static_cast<int>(f.rails.size());
    a.rails_up = 0;
    for (const RailReport& rail : f.rails) a.rails_up = *a.rails_up + (rail.down ? 0 : 1);
    a.flaps_last_hour = f.flaps_last_hour;
    a.last_flap_time = f.last_flap_time;
    if (!f.host_address.empty()) a.host_address = f.host_address;
  }
  if (report.gpu) a.gpu = report.gpu->status;
  // audit and auditResult (the operator's FleetAudit writes them), a field
  // this agent version does not produce yet (lastProbeTime) and
  // nodePublicKey are kept as found until the agent sets them.
  const Json old = existing.is_object() ? existing : Json::object();
  if (old.contains("nodePublicKey") && old["nodePublicKey"].is_string()) {
    a.node_public_key = old["nodePublicKey"].get<std::string>();
  }
  if (report.node_public_key) a.node_public_key = report.node_public_key;
  Json s = api::MergeAgentStatus(old, a);
  for (const char* keep : {"audit", "auditResult", "lastProbeTime"}) {
    if (old.contains(keep)) s[keep] = old[keep];
  }
  Json conditions = s.value("conditions", Json::array());
  // Rail conditions: one per current rail; those of rails no longer
  // configured are removed.
  std::vector<kube::Condition> rails;
  if (report.fabric) {
    for (const RailReport& rail : report.fabric->rails) rails.push_back(RailCondition(rail));
  }
  Json kept = Json::array();
  for (const Json& cond : conditions.is_array() ? conditions : Json::array()) {
    const std::string type = cond.is_object() ? cond.value("type", "") : "";
    const bool rail_type = type.rfind(api::kRailConditionPrefix, 0) == 0;
    if (rail_type && std::none_of(rails.begin(), rails.end(), [&](const auto& rc) { return rc.type == type; })) {
      continue;
    }
    if (type == api::kProberStalledConditionType && !report.fabric) continue;  // fabric failover turned off
    if (type == api::kLatencyConditionType && !report.fabric) continue;
    if (type == api::kCongestionConditionType && !report.fabric) continue;
    if (type == api::kGpuConditionType && !report.gpu) continue;                // gpu.mode Disabled
    kept.push_back(cond);
  }
  conditions = kube::SetCondition(kept, {api::kAgentConditionType, r.status, r.reason, r.message}, std::nullopt, now);
  for (const kube::Condition& rc : rails) conditions = kube::SetCondition(conditions, rc, std::nullopt, now);
  if (report.fabric) {
    conditions = kube::SetCondition(conditions, ProberStalledCondition(*report.fabric), std::nullopt, now);
    conditions = kube::SetCondition(conditions, LatencyCondition(report.fabric->latency), std::nullopt, now);
    conditions = kube::SetCondition(conditions, CongestionCondition(report.fabric->congestion), std::nullopt, now);
  }
  if (report.gpu) conditions = kube::SetCondition(conditions, report.gpu->condition, std::nullopt, now);
  s["conditions"] = conditions;
  return s;
}

bool ChangedBeyondReportTime(const Json& a, const Json& b) {
  auto strip = [](const Json& j) {
    Json c = j.is_object() ? j : Json::object();
    c.erase("lastReportTime");
    return c;
  };
  return strip(a) != strip(b);
}

Json MergePatchDiff(const Json& from, const Json& to) {
  if (!from.is_object() || !to.is_object()) return to;
  Json patch = Json::object();
  for (const auto& [k, v] : to.items()) {
    auto it = from.find(k);
    if (it == from.end()) {
      patch[k] = v;
    } else if (*it != v) {
      patch[k] = it->is_object() && v.is_object() ? MergePatchDiff(*it, v) : v;
    }
  }
  for (const auto& [k, v] : from.items()) {
    if (!to.contains(k)) patch[k] = nullptr;
  }
  return patch;
}

Json StatusPatch(const Json& object, const Json& status) {
  const Json* old = kube::FindPath(object, {"status"});
  Json patch = {{"metadata", {{"resourceVersion", kube::ResourceVersion(object)}}},
                {"status", old && old->is_object() ? MergePatchDiff(*old, status) : status}};
  return patch;
}

}  // namespace lockstep::agent
