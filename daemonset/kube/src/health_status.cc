#include "lockstep/agent/kube/health_status.h"

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

Json BuildStatus(const Json& existing, const AgentReport& report, const std::string& now) {
  const ClockSnapshot& c = report.clock;
  Readiness r = Assess(c);
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
  // Fields this agent version does not produce yet (audit, lastProbeTime) and
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
  s["conditions"] = kube::SetCondition(s.value("conditions", Json::array()),
                                       {api::kAgentConditionType, r.status, r.reason, r.message}, std::nullopt, now);
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
