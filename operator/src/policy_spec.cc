#include "lockstep/operator/policy_spec.h"

#include "lockstep/kube/label_selector.h"

namespace lockstep::op {
namespace {

// Reads spec fields with defaults and bounds; remembers the first error.
class Reader {
 public:
  explicit Reader(std::string policy) : policy_(std::move(policy)) {}

  void Int(const Json& obj, const char* key, const std::string& path, int lo, int hi, int& out) {
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return;
    const Json& v = obj[key];
    if (!v.is_number_integer()) return Fail(path + " must be an integer");
    long long x = v.get<long long>();
    if (x < lo || x > hi) {
      return Fail(path + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                  " (got " + std::to_string(x) + ")");
    }
    out = static_cast<int>(x);
  }

  void Bool(const Json& obj, const char* key, const std::string& path, bool& out) {
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return;
    if (!obj[key].is_boolean()) return Fail(path + " must be true or false");
    out = obj[key].get<bool>();
  }

  void String(const Json& obj, const char* key, const std::string& path, std::string& out) {
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return;
    if (!obj[key].is_string() || obj[key].get<std::string>().empty()) return Fail(path + " must be a non-empty string");
    out = obj[key].get<std::string>();
  }

  void Fail(const std::string& what) {
    if (error_.empty()) error_ = "FabricPolicy \"" + policy_ + "\": " + what;
  }
  const std::string& error() const { return error_; }

 private:
  std::string policy_;
  std::string error_;
};

const Json& Sub(const Json& spec, const char* key) {
  static const Json kEmpty = Json::object();
  return spec.is_object() && spec.contains(key) && spec[key].is_object() ? spec[key] : kEmpty;
}

}  // namespace

Result<PolicySpec> ParsePolicySpec(const std::string& policy_name, const Json& spec) {
  PolicySpec p;
  Reader r(policy_name);
  if (!spec.is_null() && !spec.is_object()) return InvalidArgument("FabricPolicy \"" + policy_name + "\": spec must be an object");
  if (spec.is_object()) {
    if (spec.contains("nodeSelector") && !spec["nodeSelector"].is_null()) {
      auto sel = kube::LabelSelector::FromJson(spec["nodeSelector"]);
      if (!sel.ok()) r.Fail("spec.nodeSelector: " + sel.error().message);
      else p.node_selector = spec["nodeSelector"];
    }
    if (spec.contains("tolerations") && !spec["tolerations"].is_null()) {
      if (!spec["tolerations"].is_array()) r.Fail("spec.tolerations must be a list");
      else p.tolerations = spec["tolerations"];
    }
  }
  const Json& probe = Sub(spec, "probe");
  r.Int(probe, "intervalMs", "spec.probe.intervalMs", 1, 60000, p.probe.interval_ms);
  r.Int(probe, "peersPerNode", "spec.probe.peersPerNode", 1, 64, p.probe.peers_per_node);
  r.Int(probe, "missThreshold", "spec.probe.missThreshold", 1, 100, p.probe.miss_threshold);
  r.Int(probe, "port", "spec.probe.port", 1024, 65535, p.probe.port);
  const Json& cs = Sub(spec, "clockSync");
  r.Bool(cs, "enabled", "spec.clockSync.enabled", p.clock_sync.enabled);
  r.Int(cs, "windowSeconds", "spec.clockSync.windowSeconds", 1, 60, p.clock_sync.window_seconds);
  r.Bool(cs, "disciplineHostClock", "spec.clockSync.disciplineHostClock", p.clock_sync.discipline_host_clock);
  r.Int(cs, "maxErrorBoundNs", "spec.clockSync.maxErrorBoundNs", 1, 1'000'000'000, p.clock_sync.max_error_bound_ns);
  r.Int(cs, "asymmetryAllowanceNs", "spec.clockSync.asymmetryAllowanceNs", 0, 1'000'000,
        p.clock_sync.asymmetry_allowance_ns);
  const Json& fo = Sub(spec, "failover");
  r.Bool(fo, "enabled", "spec.failover.enabled", p.failover.enabled);
  r.Int(fo, "readmitAfterSeconds", "spec.failover.readmitAfterSeconds", 0, 3600, p.failover.readmit_after_seconds);
  r.Int(fo, "maxHoldDownSeconds", "spec.failover.maxHoldDownSeconds", 1, 86400, p.failover.max_hold_down_seconds);
  r.Int(spec.is_object() ? spec : Json::object(), "flapAlertPerHour", "spec.flapAlertPerHour", 1, 10000,
        p.flap_alert_per_hour);
  r.Bool(Sub(spec, "loadBalancing"), "enabled", "spec.loadBalancing.enabled", p.load_balancing);
  const Json& agent = Sub(spec, "agent");
  r.String(agent, "image", "spec.agent.image", p.agent.image);
  r.String(agent, "imagePullPolicy", "spec.agent.imagePullPolicy", p.agent.image_pull_policy);
  r.String(agent, "priorityClassName", "spec.agent.priorityClassName", p.agent.priority_class_name);
  if (agent.contains("resources") && agent["resources"].is_object()) p.agent.resources = agent["resources"];
  if (r.error().empty() && p.failover.max_hold_down_seconds < p.failover.readmit_after_seconds) {
    r.Fail("spec.failover.maxHoldDownSeconds must be at least spec.failover.readmitAfterSeconds");
  }
  if (r.error().empty() && static_cast<long long>(p.probe.interval_ms) * p.probe.miss_threshold > 60000) {
    r.Fail("spec.probe.intervalMs * spec.probe.missThreshold must be at most 60000 ms (detection time)");
  }
  if (!r.error().empty()) return InvalidArgument(r.error());
  return p;
}

}  // namespace lockstep::op
