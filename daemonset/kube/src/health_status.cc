#include "lockstep/agent/kube/health_status.h"

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

// metav1.Condition upsert by type; lastTransitionTime moves only when the
// status does.
Json SetCondition(const Json& conditions, const Readiness& r, const std::string& type, const std::string& now) {
  Json out = Json::array();
  bool found = false;
  if (conditions.is_array()) {
    for (const Json& c : conditions) {
      if (!c.is_object() || c.value("type", "") != type) {
        out.push_back(c);
        continue;
      }
      found = true;
      Json n = c;
      if (n.value("status", "") != r.status || !n.contains("lastTransitionTime")) n["lastTransitionTime"] = now;
      n["status"] = r.status;
      n["reason"] = r.reason;
      n["message"] = r.message;
      out.push_back(n);
    }
  }
  if (!found) {
    out.push_back({{"type", type},
                   {"status", r.status},
                   {"reason", r.reason},
                   {"message", r.message},
                   {"lastTransitionTime", now}});
  }
  return out;
}

}  // namespace

Json BuildStatus(const Json& existing, const AgentReport& report, const std::string& now) {
  Json s = existing.is_object() ? existing : Json::object();
  const ClockSnapshot& c = report.clock;
  Readiness r = Assess(c);
  s["nodeName"] = report.node_name;
  s["phase"] = r.phase;
  s["lastReportTime"] = now;
  Json clock = {{"state", ClockSyncStateName(c.state)}, {"peers", c.peers}};
  const bool fitted = c.state != ClockSyncState::kFreerun;
  if (fitted) {
    clock["offsetNs"] = c.offset_ns;
    clock["driftPpb"] = c.drift_ppb;
  }
  if (c.error_bound_ns) {
    clock["errorBoundNs"] = *c.error_bound_ns;
    s["clockErrorBoundNs"] = *c.error_bound_ns;
  } else {
    s.erase("clockErrorBoundNs");
  }
  s["clock"] = clock;
  if (report.probe_addresses.empty()) {
    s.erase("probeAddresses");
  } else {
    s["probeAddresses"] = report.probe_addresses;
  }
  if (report.node_public_key.empty()) {
    s.erase("nodePublicKey");
  } else {
    s["nodePublicKey"] = report.node_public_key;  // peers verify our gossip records with it
  }
  s["rails"] = std::to_string(report.rails_up) + "/" + std::to_string(report.rails_total);
  s["railsUp"] = report.rails_up;
  s["railsTotal"] = report.rails_total;
  s["flapsLastHour"] = report.flaps_last_hour;
  s["conditions"] = SetCondition(s.value("conditions", Json::array()), r, "Ready", now);
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
