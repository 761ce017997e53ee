#include "lockstep/api/fabric_policy.h"

#include <algorithm>
#include <set>

#include "json_reader.h"
#include "lockstep/api/validation.h"

namespace lockstep::api {
namespace {

std::string Context(const std::string& name) { return "FabricPolicy \"" + name + "\": "; }

void ReadSelector(JsonReader& r, const Json& sel, const std::string& path, LabelSelector& out) {
  out = LabelSelector{};
  const Json& labels = r.Object(sel, "matchLabels", path + ".matchLabels");
  if (labels.size() > 64) r.Fail(path + ".matchLabels must have at most 64 entries");
  for (const auto& [k, v] : labels.items()) {
    const std::string p = path + ".matchLabels[\"" + k + "\"]";
    if (!IsLabelKey(k)) {
      return r.Fail(path + ".matchLabels: \"" + k +
                    "\" is not a valid label key ([prefix/]name: the name at most 63 characters of "
                    "[A-Za-z0-9-_.] starting and ending alphanumeric, the prefix a DNS subdomain)");
    }
    if (!v.is_string() || !IsLabelValue(v.get<std::string>())) {
      return r.Fail(p + " must be a label value (at most 63 characters of [A-Za-z0-9-_.], starting and ending "
                        "alphanumeric)");
    }
    out.match_labels[k] = v.get<std::string>();
  }
  const Json& exprs = r.Array(sel, "matchExpressions", path + ".matchExpressions");
  if (exprs.size() > 32) r.Fail(path + ".matchExpressions must have at most 32 entries");
  for (size_t i = 0; i < exprs.size() && r.ok(); ++i) {
    const std::string p = path + ".matchExpressions[" + std::to_string(i) + "]";
    LabelSelectorRequirement q;
    if (!exprs[i].is_object()) return r.Fail(p + " must be an object");
    if (!JsonReader::Get(exprs[i], "key") || !JsonReader::Get(exprs[i], "operator")) {
      return r.Fail(p + " needs key and operator");
    }
    r.String(exprs[i], "key", p + ".key", q.key, false, 317);
    if (r.ok() && !IsLabelKey(q.key)) {
      return r.Fail(p + ".key: \"" + q.key + "\" is not a valid label key ([prefix/]name: the name at most 63 "
                    "characters of [A-Za-z0-9-_.] starting and ending alphanumeric, the prefix a DNS subdomain)");
    }
    r.Enum(exprs[i], "operator", p + ".operator", {"In", "NotIn", "Exists", "DoesNotExist"}, q.op);
    const Json& values = r.Array(exprs[i], "values", p + ".values");
    if (values.size() > 64) r.Fail(p + ".values must have at most 64 entries");
    for (const Json& v : values) {
      if (!v.is_string() || v.get<std::string>().size() > 63) return r.Fail(p + ".values must be strings of at most 63 characters");
      q.values.push_back(v.get<std::string>());
    }
    if (!r.ok()) return;
    const bool set_op = q.op == "In" || q.op == "NotIn";
    if (set_op && q.values.empty()) {
      return r.Fail(p + ".values: operators In and NotIn need a non-empty values list; add at least one value or "
                        "use Exists/DoesNotExist");
    }
    if (!set_op && !q.values.empty()) {
      return r.Fail(p + ".values: operators Exists and DoesNotExist take no values; remove values or use In/NotIn");
    }
    out.match_expressions.push_back(std::move(q));
  }
}

void ReadTolerations(JsonReader& r, const Json& list, const std::string& path, std::vector<Toleration>& out) {
  out.clear();
  if (list.size() > 32) r.Fail(path + " must have at most 32 entries");
  for (size_t i = 0; i < list.size() && r.ok(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return r.Fail(p + " must be an object");
    Toleration t;
    r.OptString(list[i], "key", p + ".key", t.key, 317);
    r.OptEnum(list[i], "operator", p + ".operator", {"Exists", "Equal"}, t.op);
    r.OptString(list[i], "value", p + ".value", t.value, 63);
    r.OptEnum(list[i], "effect", p + ".effect", {"NoSchedule", "PreferNoSchedule", "NoExecute"}, t.effect);
    r.OptInt(list[i], "tolerationSeconds", p + ".tolerationSeconds", INT64_MIN, INT64_MAX, t.toleration_seconds);
    if (!r.ok()) return;
    const bool exists = t.op == "Exists";
    if (exists && t.value && !t.value->empty()) {
      return r.Fail(p + ".value: operator Exists takes no value; remove value or use operator Equal");
    }
    if ((!t.key || t.key->empty()) && !exists) {
      return r.Fail(p + ".key: an empty key matches every taint only with operator Exists; set key or operator: "
                        "Exists");
    }
    if (t.toleration_seconds && t.effect != "NoExecute") {
      return r.Fail(p + ".tolerationSeconds applies only to effect NoExecute; remove it or set effect: NoExecute");
    }
    out.push_back(std::move(t));
  }
}

void ReadQuantities(JsonReader& r, const Json& obj, const char* key, const std::string& path,
                    std::map<std::string, Json>& out) {
  if (!JsonReader::Get(obj, key)) return;
  const Json& m = r.Object(obj, key, path);
  if (m.size() > 16) r.Fail(path + " must have at most 16 entries");
  out.clear();
  for (const auto& [k, v] : m.items()) {
    const bool ok = (v.is_number_integer() && v.get<int64_t>() >= 0) ||
                    (v.is_string() && IsNonNegativeQuantity(v.get<std::string>()));
    if (!ok) {
      return r.Fail(path + "." + k + " must be a non-negative quantity like 100m, 64Mi or 2 (got " + v.dump() + ")");
    }
    out[k] = v;
  }
}

// A host directory for a hostPath volume: "" (off) or an absolute path of at
// most 512 characters, not "/", without "." or ".." components, "//" or a
// trailing '/'.
void ReadHostPath(JsonReader& r, const Json& obj, const char* key, const std::string& path, std::string& out) {
  r.String(obj, key, path, out, true, 512);
  if (!r.ok() || out.empty()) return;
  const std::string with_slash = out + "/";
  const bool bad = out[0] != '/' || with_slash.find("//") != std::string::npos ||
                   with_slash.find("/./") != std::string::npos || with_slash.find("/../") != std::string::npos;
  if (bad) {
    r.Fail(path +
           " must be \"\" (off) or an absolute directory path like /opt/lockstep/nccl (not /, no '.' or '..' "
           "components, no '//' or trailing '/'; got \"" +
           out + "\")");
  }
}

void ReadGpu(JsonReader& r, const Json& gpu, GpuSpec& out) {
  r.Enum(gpu, "mode", "spec.gpu.mode", GpuModes(), out.mode);
  r.Int(gpu, "pollIntervalSeconds", "spec.gpu.pollIntervalSeconds", 1, kMaxGpuPollIntervalSeconds,
        out.poll_interval_seconds);
  const Json& e = r.Object(gpu, "earlyWarning", "spec.gpu.earlyWarning");
  GpuEarlyWarningSpec& w = out.early_warning;
  r.Int(e, "gpuTempCelsius", "spec.gpu.earlyWarning.gpuTempCelsius", kMinGpuTempCelsius, kMaxGpuTempCelsius,
        w.gpu_temp_celsius);
  r.Int(e, "slowdownMarginCelsius", "spec.gpu.earlyWarning.slowdownMarginCelsius", 0, kMaxGpuSlowdownMarginCelsius,
        w.slowdown_margin_celsius);
  r.Int(e, "eccSingleBitPerHour", "spec.gpu.earlyWarning.eccSingleBitPerHour", 1, kMaxEccSingleBitPerHour,
        w.ecc_single_bit_per_hour);
  r.Bool(e, "pendingRowRemaps", "spec.gpu.earlyWarning.pendingRowRemaps", w.pending_row_remaps);
  if (!JsonReader::Get(e, "xids")) return;
  const Json& xids = r.Array(e, "xids", "spec.gpu.earlyWarning.xids");
  if (xids.size() > static_cast<size_t>(kMaxEarlyWarningXids)) {
    r.Fail("spec.gpu.earlyWarning.xids must have at most " + std::to_string(kMaxEarlyWarningXids) + " entries");
  }
  w.xids.clear();
  std::set<int> seen;
  for (size_t i = 0; i < xids.size() && r.ok(); ++i) {
    int x = 0;
    r.Int(Json{{"x", xids[i]}}, "x", "spec.gpu.earlyWarning.xids[" + std::to_string(i) + "]", 1, 65535, x);
    if (r.ok() && !seen.insert(x).second) r.Fail("spec.gpu.earlyWarning.xids lists " + std::to_string(x) + " twice");
    w.xids.push_back(x);
  }
}

// spec.latency; rail names must be distinct and among `rails` (spec.rails).
void ReadLatency(JsonReader& r, const Json& lat, const std::vector<std::string>& rails, LatencySpec& out) {
  r.OptInt(lat, "oneWayDelayP99Micros", "spec.latency.oneWayDelayP99Micros", 1, kMaxOneWayDelayP99Micros,
           out.one_way_delay_p99_micros);
  r.Int(lat, "minSamples", "spec.latency.minSamples", 1, kMaxLatencyMinSamples, out.min_samples);
  const Json& list = r.Array(lat, "rails", "spec.latency.rails");
  if (list.size() > static_cast<size_t>(kMaxRails)) {
    r.Fail("spec.latency.rails must have at most " + std::to_string(kMaxRails) + " entries");
  }
  out.rails.clear();
  for (size_t i = 0; i < list.size() && r.ok(); ++i) {
    const std::string p = "spec.latency.rails[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return r.Fail(p + " must be an object {name, oneWayDelayP99Micros}");
    if (!JsonReader::Get(list[i], "name") || !JsonReader::Get(list[i], "oneWayDelayP99Micros")) {
      return r.Fail(p + " needs name and oneWayDelayP99Micros");
    }
    RailLatencySla rail;
    r.String(list[i], "name", p + ".name", rail.name, false, 15);
    r.Int(list[i], "oneWayDelayP99Micros", p + ".oneWayDelayP99Micros", 1, kMaxOneWayDelayP99Micros,
          rail.one_way_delay_p99_micros);
    if (!r.ok()) return;
    for (const RailLatencySla& seen : out.rails) {
      if (seen.name == rail.name) return r.Fail("spec.latency.rails names rail \"" + rail.name + "\" twice");
    }
    if (std::find(rails.begin(), rails.end(), rail.name) == rails.end()) {
      return r.Fail(p + ".name: \"" + rail.name + "\" is not one of spec.rails; add it there or fix the name");
    }
    out.rails.push_back(std::move(rail));
  }
}

}  // namespace

const std::vector<std::string>& GpuModes() {
  static const std::vector<std::string> m = {kGpuModeAuto, kGpuModeRequired, kGpuModeDisabled};
  return m;
}

LabelSelector DefaultNodeSelector() {
  return LabelSelector{{{kDefaultNodeSelectorKey, kDefaultNodeSelectorValue}}, {}};
}

std::vector<Toleration> DefaultTolerations() {
  Toleration t;
  t.key = kGpuTaintKey;
  t.op = "Exists";
  t.effect = "NoSchedule";
  return {t};
}

Status ValidatePolicyName(const std::string& name) {
  if (name.size() > static_cast<size_t>(kMaxPolicyNameLength)) {
    return InvalidArgument(Context(name) + "metadata.name must be at most " + std::to_string(kMaxPolicyNameLength) +
                           " characters (got " + std::to_string(name.size()) +
                           "): it is the value of the label lockstep.dev/policy on the agent objects and "
                           "FabricHealths; choose a shorter name");
  }
  return Status::Ok();
}

Result<FabricPolicySpec> ParseFabricPolicySpec(const std::string& name, const Json& spec) {
  if (Status s = ValidatePolicyName(name); !s.ok()) return s.error();
  if (!spec.is_null() && !spec.is_object()) return InvalidArgument(Context(name) + "spec must be an object");
  FabricPolicySpec p;
  JsonReader r(Context(name));
  if (const Json* sel = JsonReader::Get(spec, "nodeSelector")) {
    if (!sel->is_object()) r.Fail("spec.nodeSelector must be a label selector object");
    else ReadSelector(r, *sel, "spec.nodeSelector", p.node_selector);
  }
  if (JsonReader::Get(spec, "tolerations")) {
    ReadTolerations(r, r.Array(spec, "tolerations", "spec.tolerations"), "spec.tolerations", p.tolerations);
  }
  const Json& probe = r.Object(spec, "probe", "spec.probe");
  r.Int(probe, "intervalMs", "spec.probe.intervalMs", 1, kMaxProbeIntervalMs, p.probe.interval_ms);
  r.Int(probe, "peersPerNode", "spec.probe.peersPerNode", 1, kMaxPeersPerNode, p.probe.peers_per_node);
  r.Int(probe, "port", "spec.probe.port", kMinProbePort, 65535, p.probe.port);
  r.Int(probe, "pathIntervalMs", "spec.probe.pathIntervalMs", 1, kMaxProbeIntervalMs, p.probe.path_interval_ms);
  r.Int(probe, "missThreshold", "spec.probe.missThreshold", 1, kMaxMissThreshold, p.probe.miss_threshold);
  r.Int(probe, "idlePathIntervalMs", "spec.probe.idlePathIntervalMs", 0, kMaxProbeIntervalMs,
        p.probe.idle_path_interval_ms);
  r.Int(probe, "idleTickMs", "spec.probe.idleTickMs", 0, kMaxProbeIntervalMs, p.probe.idle_tick_ms);
  r.Bool(probe, "trafficAware", "spec.probe.trafficAware", p.probe.traffic_aware);
  if (r.ok() && p.probe.idle_tick_ms > 0 && p.probe.idle_path_interval_ms > 0 &&
      2 * p.probe.idle_tick_ms > p.probe.idle_path_interval_ms) {
    r.Fail("spec.probe.idleTickMs must be at most half of spec.probe.idlePathIntervalMs (or 0) (got " +
           std::to_string(p.probe.idle_tick_ms) + " and " + std::to_string(p.probe.idle_path_interval_ms) +
           "); lower idleTickMs or raise idlePathIntervalMs");
  }
  const Json& cs = r.Object(spec, "clockSync", "spec.clockSync");
  r.Bool(cs, "enabled", "spec.clockSync.enabled", p.clock_sync.enabled);
  r.Int(cs, "windowSeconds", "spec.clockSync.windowSeconds", 1, kMaxWindowSeconds, p.clock_sync.window_seconds);
  r.Bool(cs, "disciplineHostClock", "spec.clockSync.disciplineHostClock", p.clock_sync.discipline_host_clock);
  r.Int(cs, "maxErrorBoundNs", "spec.clockSync.maxErrorBoundNs", 1, kMaxMaxErrorBoundNs,
        p.clock_sync.max_error_bound_ns);
  r.Int(cs, "asymmetryAllowanceNs", "spec.clockSync.asymmetryAllowanceNs", 0, kMaxAsymmetryAllowanceNs,
        p.clock_sync.asymmetry_allowance_ns);
  const Json& fo = r.Object(spec, "failover", "spec.failover");
  r.Bool(fo, "enabled", "spec.failover.enabled", p.failover.enabled);
  r.Int(fo, "readmitAfterSeconds", "spec.failover.readmitAfterSeconds", 1, kMaxReadmitAfterSeconds,
        p.failover.readmit_after_seconds);
  r.Int(fo, "maxHoldDownSeconds", "spec.failover.maxHoldDownSeconds", 1, kMaxMaxHoldDownSeconds,
        p.failover.max_hold_down_seconds);
  r.Int(fo, "holdDownDecaySeconds", "spec.failover.holdDownDecaySeconds", 1, kMaxHoldDownDecaySeconds,
        p.failover.hold_down_decay_seconds);
  if (r.ok() && p.failover.max_hold_down_seconds < p.failover.readmit_after_seconds) {
    r.Fail(FailoverOrderMessage("spec.failover", p.failover.readmit_after_seconds, p.failover.max_hold_down_seconds));
  }
  r.Int(spec, "flapAlertPerHour", "spec.flapAlertPerHour", 1, kMaxFlapAlertPerHour, p.flap_alert_per_hour);
  const Json& rails = r.Array(spec, "rails", "spec.rails");
  if (rails.size() > static_cast<size_t>(kMaxRails)) {
    r.Fail("spec.rails may list at most " + std::to_string(kMaxRails) + " interfaces (got " +
           std::to_string(rails.size()) + ")");
  }
  for (size_t i = 0; r.ok() && i < rails.size(); ++i) {
    const std::string path = "spec.rails[" + std::to_string(i) + "]";
    if (!rails[i].is_string() || !IsInterfaceName(rails[i].get<std::string>())) {
      r.Fail(path + " must be a network interface name (1 to 15 characters, no '/', ':' or whitespace; got " +
             rails[i].dump() + ")");
    } else if (std::find(p.rails.begin(), p.rails.end(), rails[i].get<std::string>()) != p.rails.end()) {
      r.Fail(path + " names " + rails[i].dump() + " twice");
    } else {
      p.rails.push_back(rails[i].get<std::string>());
    }
  }
  r.String(spec, "hostInterface", "spec.hostInterface", p.host_interface, false, 15);
  if (r.ok() && !IsInterfaceName(p.host_interface)) {
    r.Fail("spec.hostInterface must be a network interface name (1 to 15 characters, no '/', ':' or whitespace; got \"" +
           p.host_interface + "\")");
  }
  ReadGpu(r, r.Object(spec, "gpu", "spec.gpu"), p.gpu);
  ReadLatency(r, r.Object(spec, "latency", "spec.latency"), p.rails, p.latency);
  const Json& agent = r.Object(spec, "agent", "spec.agent");
  r.String(agent, "image", "spec.agent.image", p.agent.image, false, 512);
  r.Enum(agent, "imagePullPolicy", "spec.agent.imagePullPolicy", {"Always", "IfNotPresent", "Never"},
         p.agent.image_pull_policy);
  r.String(agent, "priorityClassName", "spec.agent.priorityClassName", p.agent.priority_class_name, true, 253);
  const Json& res = r.Object(agent, "resources", "spec.agent.resources");
  ReadQuantities(r, res, "requests", "spec.agent.resources.requests", p.agent.resources.requests);
  ReadQuantities(r, res, "limits", "spec.agent.resources.limits", p.agent.resources.limits);
  ReadHostPath(r, agent, "ncclPluginHostPath", "spec.agent.ncclPluginHostPath", p.agent.nccl_plugin_host_path);
  ReadHostPath(r, agent, "ncclSocketHostPath", "spec.agent.ncclSocketHostPath", p.agent.nccl_socket_host_path);
  if (!r.ok()) return InvalidArgument(r.error());
  return p;
}

Result<FabricPolicyStatus> ParseFabricPolicyStatus(const std::string& name, const Json& status) {
  FabricPolicyStatus s;
  JsonReader r(Context(name));
  r.OptInt(status, "observedGeneration", "status.observedGeneration", 0, INT64_MAX, s.observed_generation);
  auto count = [&](const char* key, std::optional<int>& out) {
    std::optional<int64_t> v;
    r.OptInt(status, key, std::string("status.") + key, 0, INT32_MAX, v);
    if (v) out = static_cast<int>(*v);
  };
  count("desiredNodes", s.desired_nodes);
  count("readyNodes", s.ready_nodes);
  count("conflictingNodes", s.conflicting_nodes);
  r.OptString(status, "nodes", "status.nodes", s.nodes, 32);
  r.OptString(status, "daemonSet", "status.daemonSet", s.daemon_set, 253);
  ReadConditions(r, status, "status.conditions", s.conditions);
  if (!r.ok()) return InvalidArgument(r.error());
  return s;
}

Json ToJson(const LabelSelector& s) {
  Json j = Json::object();
  if (!s.match_labels.empty()) j["matchLabels"] = s.match_labels;
  for (const auto& q : s.match_expressions) {
    Json e = {{"key", q.key}, {"operator", q.op}};
    if (!q.values.empty()) e["values"] = q.values;
    j["matchExpressions"].push_back(e);
  }
  return j;
}

Json ToJson(const Toleration& t) {
  Json j = Json::object();
  if (t.key) j["key"] = *t.key;
  if (t.op) j["operator"] = *t.op;
  if (t.value) j["value"] = *t.value;
  if (t.effect) j["effect"] = *t.effect;
  if (t.toleration_seconds) j["tolerationSeconds"] = *t.toleration_seconds;
  return j;
}

Json ToJson(const std::vector<Toleration>& list) {
  Json j = Json::array();
  for (const auto& t : list) j.push_back(ToJson(t));
  return j;
}

Json ToJson(const ResourceRequirements& r) {
  Json j = Json::object();
  if (!r.requests.empty()) j["requests"] = r.requests;
  if (!r.limits.empty()) j["limits"] = r.limits;
  return j;
}

Json ToJson(const GpuSpec& g) {
  const GpuEarlyWarningSpec& w = g.early_warning;
  return {{"mode", g.mode},
          {"pollIntervalSeconds", g.poll_interval_seconds},
          {"earlyWarning", {{"gpuTempCelsius", w.gpu_temp_celsius},
                            {"slowdownMarginCelsius", w.slowdown_margin_celsius},
                            {"eccSingleBitPerHour", w.ecc_single_bit_per_hour},
                            {"pendingRowRemaps", w.pending_row_remaps},
                            {"xids", w.xids}}}};
}

Json ToJson(const LatencySpec& l) {
  Json j = {{"minSamples", l.min_samples}, {"rails", Json::array()}};
  if (l.one_way_delay_p99_micros) j["oneWayDelayP99Micros"] = *l.one_way_delay_p99_micros;
  for (const RailLatencySla& r : l.rails) {
    j["rails"].push_back({{"name", r.name}, {"oneWayDelayP99Micros", r.one_way_delay_p99_micros}});
  }
  return j;
}

Json ToJson(const FabricPolicySpec& p) {
  return {{"nodeSelector", ToJson(p.node_selector)},
          {"tolerations", ToJson(p.tolerations)},
          {"probe", {{"intervalMs", p.probe.interval_ms}, {"peersPerNode", p.probe.peers_per_node},
                     {"port", p.probe.port}, {"pathIntervalMs", p.probe.path_interval_ms},
                     {"missThreshold", p.probe.miss_threshold},
                     {"idlePathIntervalMs", p.probe.idle_path_interval_ms}, {"idleTickMs", p.probe.idle_tick_ms},
                     {"trafficAware", p.probe.traffic_aware}}},
          {"clockSync", {{"enabled", p.clock_sync.enabled},
                         {"windowSeconds", p.clock_sync.window_seconds},
                         {"disciplineHostClock", p.clock_sync.discipline_host_clock},
                         {"maxErrorBoundNs", p.clock_sync.max_error_bound_ns},
                         {"asymmetryAllowanceNs", p.clock_sync.asymmetry_allowance_ns}}},
          {"failover", {{"enabled", p.failover.enabled},
                        {"readmitAfterSeconds", p.failover.readmit_after_seconds},
                        {"maxHoldDownSeconds", p.failover.max_hold_down_seconds},
                        {"holdDownDecaySeconds", p.failover.hold_down_decay_seconds}}},
          {"flapAlertPerHour", p.flap_alert_per_hour},
          {"rails", p.rails},
          {"hostInterface", p.host_interface},
          {"gpu", ToJson(p.gpu)},
          {"latency", ToJson(p.latency)},
          {"agent", {{"image", p.agent.image},
                     {"imagePullPolicy", p.agent.image_pull_policy},
                     {"priorityClassName", p.agent.priority_class_name},
                     {"resources", ToJson(p.agent.resources)},
                     {"ncclPluginHostPath", p.agent.nccl_plugin_host_path},
                     {"ncclSocketHostPath", p.agent.nccl_socket_host_path}}}};
}

Json ToJson(const FabricPolicyStatus& s) {
  Json j = Json::object();
  if (s.observed_generation) j["observedGeneration"] = *s.observed_generation;
  if (s.desired_nodes) j["desiredNodes"] = *s.desired_nodes;
  if (s.ready_nodes) j["readyNodes"] = *s.ready_nodes;
  if (s.conflicting_nodes) j["conflictingNodes"] = *s.conflicting_nodes;
  if (s.nodes) j["nodes"] = *s.nodes;
  if (s.daemon_set) j["daemonSet"] = *s.daemon_set;
  if (!s.conditions.empty()) j["conditions"] = ToJson(s.conditions);
  return j;
}

}  // namespace lockstep::api
