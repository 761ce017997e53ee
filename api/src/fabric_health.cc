#include "lockstep/api/fabric_health.h"

#include "json_reader.h"
#include "lockstep/api/validation.h"

namespace lockstep::api {
namespace {

void ReadInt32(JsonReader& r, const Json& obj, const char* key, const std::string& path, int64_t lo,
               std::optional<int>& out) {
  std::optional<int64_t> v;
  r.OptInt(obj, key, path, lo, INT32_MAX, v);
  if (v) out = static_cast<int>(*v);
}

void ReadClock(JsonReader& r, const Json& c, ClockStatus& out) {
  r.OptEnum(c, "state", "status.clock.state", {"FREERUN", "LOCKED", "HOLDOVER"}, out.state);
  r.OptInt(c, "offsetNs", "status.clock.offsetNs", INT64_MIN, INT64_MAX, out.offset_ns);
  r.OptInt(c, "driftPpb", "status.clock.driftPpb", INT64_MIN, INT64_MAX, out.drift_ppb);
  r.OptInt(c, "errorBoundNs", "status.clock.errorBoundNs", 0, INT64_MAX, out.error_bound_ns);
  ReadInt32(r, c, "peers", "status.clock.peers", 0, out.peers);
}

void ReadAudit(JsonReader& r, const Json& a, AuditStatus& out) {
  r.OptEnum(a, "result", "status.audit.result", {"Pass", "Fail", "Unknown"}, out.result);
  const Json& checks = r.Array(a, "checks", "status.audit.checks");
  for (size_t i = 0; i < checks.size() && r.ok(); ++i) {
    const std::string p = "status.audit.checks[" + std::to_string(i) + "]";
    AuditCheck c;
    r.String(checks[i], "name", p + ".name", c.name, false, 128);
    r.Enum(checks[i], "result", p + ".result", {"Pass", "Fail", "Warn", "Skip"}, c.result);
    r.OptString(checks[i], "message", p + ".message", c.message, 4096);
    out.checks.push_back(std::move(c));
  }
  r.OptString(a, "lastRunTime", "status.audit.lastRunTime", out.last_run_time);
}

void ReadGpu(JsonReader& r, const Json& g, GpuHealthStatus& out) {
  const std::vector<std::string> states = {"Healthy", "Warning", "Unavailable"};
  r.OptEnum(g, "state", "status.gpu.state", states, out.state);
  r.OptString(g, "driverVersion", "status.gpu.driverVersion", out.driver_version, 64);
  ReadInt32(r, g, "warnings", "status.gpu.warnings", 0, out.warnings);
  const Json& devices = r.Array(g, "devices", "status.gpu.devices");
  if (devices.size() > 64) r.Fail("status.gpu.devices must have at most 64 entries");
  for (size_t i = 0; i < devices.size() && r.ok(); ++i) {
    const std::string p = "status.gpu.devices[" + std::to_string(i) + "]";
    const Json& d = devices[i];
    if (!d.is_object()) {
      r.Fail(p + " must be an object");
      break;
    }
    GpuDeviceStatus s;
    if (!JsonReader::Get(d, "index")) r.Fail(p + ".index is required");
    r.Int(d, "index", p + ".index", 0, 1023, s.index);
    r.OptString(d, "uuid", p + ".uuid", s.uuid, 96);
    r.OptEnum(d, "state", p + ".state", states, s.state);
    ReadInt32(r, d, "temperatureCelsius", p + ".temperatureCelsius", INT32_MIN, s.temperature_celsius);
    ReadInt32(r, d, "slowdownMarginCelsius", p + ".slowdownMarginCelsius", INT32_MIN, s.slowdown_margin_celsius);
    r.OptInt(d, "eccSingleBitPerHour", p + ".eccSingleBitPerHour", 0, INT64_MAX, s.ecc_single_bit_per_hour);
    r.OptInt(d, "eccUncorrected", p + ".eccUncorrected", 0, INT64_MAX, s.ecc_uncorrected);
    if (JsonReader::Get(d, "rowRemapPending")) {
      bool pending = false;
      r.Bool(d, "rowRemapPending", p + ".rowRemapPending", pending);
      s.row_remap_pending = pending;
    }
    const Json& xids = r.Array(d, "xids", p + ".xids");
    if (xids.size() > 64) r.Fail(p + ".xids must have at most 64 entries");
    for (size_t k = 0; k < xids.size() && r.ok(); ++k) {
      int x = 0;
      r.Int(Json{{"x", xids[k]}}, "x", p + ".xids[" + std::to_string(k) + "]", 1, 65535, x);
      s.xids.push_back(x);
    }
    out.devices.push_back(std::move(s));
  }
}

}  // namespace

const std::vector<std::string>& AgentOwnedStatusKeys() {
  static const std::vector<std::string> k = {"phase",          "nodeName",      "lastReportTime", "lastProbeTime",
                                             "clock",          "clockErrorBoundNs", "probeAddresses", "railsUp",
                                             "railsTotal",     "flapsLastHour", "audit",          "auditResult",
                                             "nodePublicKey",  "hostAddress",   "lastFlapTime",   "gpu"};
  return k;
}

const std::vector<std::string>& OperatorOwnedStatusKeys() {
  static const std::vector<std::string> k = {"policy"};
  return k;
}

Result<FabricHealthStatus> ParseFabricHealthStatus(const std::string& node, const Json& status) {
  FabricHealthStatus s;
  if (status.is_null()) return s;
  JsonReader r("FabricHealth \"" + node + "\": ");
  if (!status.is_object()) return InvalidArgument("FabricHealth \"" + node + "\": status must be an object");
  FabricHealthAgentStatus& a = s.agent;
  r.OptEnum(status, "phase", "status.phase", {"Pending", "Healthy", "Degraded", "Failed"}, a.phase);
  r.OptString(status, "nodeName", "status.nodeName", a.node_name, 253);
  r.OptString(status, "lastReportTime", "status.lastReportTime", a.last_report_time);
  r.OptString(status, "lastProbeTime", "status.lastProbeTime", a.last_probe_time);
  if (JsonReader::Get(status, "clock")) ReadClock(r, r.Object(status, "clock", "status.clock"), a.clock.emplace());
  r.OptInt(status, "clockErrorBoundNs", "status.clockErrorBoundNs", 0, INT64_MAX, a.clock_error_bound_ns);
  const Json& addrs = r.Array(status, "probeAddresses", "status.probeAddresses");
  if (addrs.size() > 64) r.Fail("status.probeAddresses must have at most 64 entries");
  for (size_t i = 0; i < addrs.size() && r.ok(); ++i) {
    const std::string p = "status.probeAddresses[" + std::to_string(i) + "]";
    if (!addrs[i].is_string()) {
      r.Fail(p + " must be a string");
      break;
    }
    auto hp = ParseHostPort(addrs[i].get<std::string>(), p, 1);
    if (!hp.ok()) r.Fail(hp.error().message);
    else a.probe_addresses.push_back(addrs[i].get<std::string>());
  }
  ReadInt32(r, status, "railsUp", "status.railsUp", 0, a.rails_up);
  ReadInt32(r, status, "railsTotal", "status.railsTotal", 0, a.rails_total);
  ReadInt32(r, status, "flapsLastHour", "status.flapsLastHour", 0, a.flaps_last_hour);
  if (JsonReader::Get(status, "audit")) ReadAudit(r, r.Object(status, "audit", "status.audit"), a.audit.emplace());
  r.OptEnum(status, "auditResult", "status.auditResult", {"Pass", "Fail", "Unknown"}, a.audit_result);
  r.OptString(status, "nodePublicKey", "status.nodePublicKey", a.node_public_key);
  if (r.ok() && a.node_public_key && !IsBase64OfSize(*a.node_public_key, 32)) {
    r.Fail("status.nodePublicKey must be the base64 of a 32-byte Ed25519 public key (44 characters)");
  }
  r.OptString(status, "hostAddress", "status.hostAddress", a.host_address, 15);
  if (r.ok() && a.host_address && !IsIpv4(*a.host_address)) {
    r.Fail("status.hostAddress must be an IPv4 address like 10.0.200.1 (got \"" + *a.host_address + "\")");
  }
  r.OptString(status, "lastFlapTime", "status.lastFlapTime", a.last_flap_time);
  if (JsonReader::Get(status, "gpu")) ReadGpu(r, r.Object(status, "gpu", "status.gpu"), a.gpu.emplace());
  if (r.ok() && a.rails_up && a.rails_total && *a.rails_up > *a.rails_total) {
    r.Fail("status.railsUp must not exceed status.railsTotal; report both from the same scan");
  }
  r.OptString(status, "policy", "status.policy", s.op.policy, 253);
  ReadConditions(r, status, "status.conditions", s.conditions);
  if (!r.ok()) return InvalidArgument(r.error());
  return s;
}

Json ToJson(const ClockStatus& c) {
  Json j = Json::object();
  if (c.state) j["state"] = *c.state;
  if (c.offset_ns) j["offsetNs"] = *c.offset_ns;
  if (c.drift_ppb) j["driftPpb"] = *c.drift_ppb;
  if (c.error_bound_ns) j["errorBoundNs"] = *c.error_bound_ns;
  if (c.peers) j["peers"] = *c.peers;
  return j;
}

Json ToJson(const AuditStatus& a) {
  Json j = Json::object();
  if (a.result) j["result"] = *a.result;
  for (const AuditCheck& c : a.checks) {
    Json e = {{"name", c.name}, {"result", c.result}};
    if (c.message) e["message"] = *c.message;
    j["checks"].push_back(e);
  }
  if (a.last_run_time) j["lastRunTime"] = *a.last_run_time;
  return j;
}

Json ToJson(const GpuHealthStatus& g) {
  Json j = Json::object();
  if (g.state) j["state"] = *g.state;
  if (g.driver_version) j["driverVersion"] = *g.driver_version;
  if (g.warnings) j["warnings"] = *g.warnings;
  for (const GpuDeviceStatus& d : g.devices) {
    Json e = {{"index", d.index}};
    if (d.uuid) e["uuid"] = *d.uuid;
    if (d.state) e["state"] = *d.state;
    if (d.temperature_celsius) e["temperatureCelsius"] = *d.temperature_celsius;
    if (d.slowdown_margin_celsius) e["slowdownMarginCelsius"] = *d.slowdown_margin_celsius;
    if (d.ecc_single_bit_per_hour) e["eccSingleBitPerHour"] = *d.ecc_single_bit_per_hour;
    if (d.ecc_uncorrected) e["eccUncorrected"] = *d.ecc_uncorrected;
    if (d.row_remap_pending) e["rowRemapPending"] = *d.row_remap_pending;
    if (!d.xids.empty()) e["xids"] = d.xids;
    j["devices"].push_back(e);
  }
  return j;
}

Json ToJson(const FabricHealthAgentStatus& a) {
  Json j = Json::object();
  if (a.phase) j["phase"] = *a.phase;
  if (a.node_name) j["nodeName"] = *a.node_name;
  if (a.last_report_time) j["lastReportTime"] = *a.last_report_time;
  if (a.last_probe_time) j["lastProbeTime"] = *a.last_probe_time;
  if (a.clock) j["clock"] = ToJson(*a.clock);
  if (a.clock_error_bound_ns) j["clockErrorBoundNs"] = *a.clock_error_bound_ns;
  if (!a.probe_addresses.empty()) j["probeAddresses"] = a.probe_addresses;
  if (a.rails_up) j["railsUp"] = *a.rails_up;
  if (a.rails_total) j["railsTotal"] = *a.rails_total;
  if (a.flaps_last_hour) j["flapsLastHour"] = *a.flaps_last_hour;
  if (a.audit) j["audit"] = ToJson(*a.audit);
  if (a.audit_result) j["auditResult"] = *a.audit_result;
  if (a.node_public_key) j["nodePublicKey"] = *a.node_public_key;
  if (a.host_address) j["hostAddress"] = *a.host_address;
  if (a.last_flap_time) j["lastFlapTime"] = *a.last_flap_time;
  if (a.gpu) j["gpu"] = ToJson(*a.gpu);
  return j;
}

Json ToJson(const FabricHealthOperatorStatus& s) {
  Json j = Json::object();
  if (s.policy) j["policy"] = *s.policy;
  return j;
}

Json ToJson(const FabricHealthStatus& s) {
  Json j = ToJson(s.agent);
  j.update(ToJson(s.op));
  if (!s.conditions.empty()) j["conditions"] = ToJson(s.conditions);
  return j;
}

Json MergeAgentStatus(const Json& existing, const FabricHealthAgentStatus& agent) {
  Json s = existing.is_object() ? existing : Json::object();
  for (const std::string& k : AgentOwnedStatusKeys()) s.erase(k);
  s.update(ToJson(agent));
  return s;
}

}  // namespace lockstep::api
