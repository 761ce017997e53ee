#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "lockstep/api/agent_config.h"

namespace lockstep::api {
namespace {

// Walks one YAML map: reads known keys, then rejects the rest.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string prefix, const std::string& source, std::string& err)
      : node_(node), prefix_(std::move(prefix)), source_(source), err_(err) {
    if (node_ && !node_.IsNull() && !node_.IsMap()) {
      Fail(Path("") + " must be a map");
    }
  }

  void Int(const char* key, int64_t lo, int64_t hi, int64_t& out, const char* hint = "") {
    YAML::Node v = Get(key);
    if (!v) return;
    int64_t x = 0;
    if (!v.IsScalar() || !YAML::convert<int64_t>::decode(v, x)) {
      std::string text = v.IsScalar() ? v.Scalar() : "<" + Kind(v) + ">";
      Fail(Path(key) + " must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi) + hint +
           " (got \"" + text + "\")");
      return;
    }
    if (x < lo || x > hi) {
      Fail(Path(key) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + hint + " (got " +
           std::to_string(x) + ")");
      return;
    }
    out = x;
  }
  void Int(const char* key, int64_t lo, int64_t hi, int& out, const char* hint = "") {
    int64_t v = out;
    Int(key, lo, hi, v, hint);
    out = static_cast<int>(v);
  }
  void Bool(const char* key, bool& out) {
    YAML::Node v = Get(key);
    if (!v) return;
    bool x = false;
    if (!v.IsScalar() || !YAML::convert<bool>::decode(v, x)) {
      Fail(Path(key) + " must be true or false (got \"" + (v.IsScalar() ? v.Scalar() : Kind(v)) + "\")");
      return;
    }
    out = x;
  }
  void String(const char* key, std::string& out, bool allow_empty = true) {
    YAML::Node v = Get(key);
    if (!v) return;
    if (v.IsNull()) {
      if (allow_empty) out.clear();
      else Fail(Path(key) + " must be a non-empty string");
      return;
    }
    if (!v.IsScalar()) {
      Fail(Path(key) + " must be a string (got a " + Kind(v) + ")");
      return;
    }
    if (!allow_empty && v.Scalar().empty()) {
      Fail(Path(key) + " must be a non-empty string");
      return;
    }
    out = v.Scalar();
  }
  void Addr(const char* key, HostPort& out) {
    std::string s;
    YAML::Node v = Get(key);
    if (!v) return;
    String(key, s, false);
    if (!err_.empty()) return;
    auto hp = ParseHostPort(s, Path(key));
    if (!hp.ok()) return Fail(hp.error().message);
    out = *hp;
  }
  void StringList(const char* key, std::vector<std::string>& out) {
    YAML::Node v = Get(key);
    if (!v || v.IsNull()) return;
    if (!v.IsSequence()) return Fail(Path(key) + " must be a list of strings (got a " + Kind(v) + ")");
    out.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].IsScalar()) return Fail(Path(key) + "[" + std::to_string(i) + "] must be a string");
      out.push_back(v[i].Scalar());
    }
  }
  // A list of distinct integers in [lo, hi], at most `max` of them.
  void IntSet(const char* key, int64_t lo, int64_t hi, size_t max, std::vector<int>& out) {
    YAML::Node v = Get(key);
    if (!v || v.IsNull()) return;
    if (!v.IsSequence()) return Fail(Path(key) + " must be a list of integers (got a " + Kind(v) + ")");
    if (v.size() > max) {
      return Fail(Path(key) + " must have at most " + std::to_string(max) + " entries (got " +
                  std::to_string(v.size()) + ")");
    }
    std::vector<int> list;
    std::set<int64_t> seen;
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string item = Path(key) + "[" + std::to_string(i) + "]";
      int64_t x = 0;
      if (!v[i].IsScalar() || !YAML::convert<int64_t>::decode(v[i], x) || x < lo || x > hi) {
        return Fail(item + " must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi) +
                    " (got \"" + (v[i].IsScalar() ? v[i].Scalar() : "<" + Kind(v[i]) + ">") + "\")");
      }
      if (!seen.insert(x).second) return Fail(Path(key) + " lists " + std::to_string(x) + " twice");
      list.push_back(static_cast<int>(x));
    }
    out = std::move(list);
  }
  // One of `allowed`.
  void Enum(const char* key, const std::vector<std::string>& allowed, std::string& out) {
    YAML::Node v = Get(key);
    if (!v) return;
    std::string s;
    String(key, s, false);
    if (!err_.empty()) return;
    if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
      std::string names;
      for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
      return Fail(Path(key) + " must be one of " + names + " (got \"" + s + "\")");
    }
    out = s;
  }
  // Returns the child map for a nested section (marks the key as known).
  YAML::Node Child(const char* key) { return Get(key); }

  // Call last: any key not read above is an error.
  void RejectUnknown() {
    if (!err_.empty() || !node_ || !node_.IsMap()) return;
    for (const auto& kv : node_) {
      std::string k = kv.first.IsScalar() ? kv.first.Scalar() : "<non-scalar key>";
      if (!known_.contains(k)) {
        std::string allowed;
        for (const auto& a : order_) allowed += (allowed.empty() ? "" : ", ") + a;
        return Fail("unknown key " + Path(k.c_str()) + " (allowed: " + allowed + ")");
      }
    }
  }

  std::string Path(const char* key) const {
    if (prefix_.empty()) return key;
    return *key ? prefix_ + "." + key : prefix_;
  }
  void Fail(const std::string& msg) {
    if (err_.empty()) err_ = source_ + ": " + msg;
  }

 private:
  static std::string Kind(const YAML::Node& v) {
    if (v.IsMap()) return "map";
    if (v.IsSequence()) return "list";
    if (v.IsNull()) return "null";
    return "scalar";
  }
  YAML::Node Get(const char* key) {
    if (known_.insert(key).second) order_.push_back(key);
    if (!err_.empty() || !node_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& map = node_;
    return map[key];
  }

  YAML::Node node_;
  std::string prefix_;
  const std::string& source_;
  std::string& err_;
  std::set<std::string> known_;
  std::vector<std::string> order_;
};

Status ParsePeerList(const YAML::Node& list, const std::string& prefix, const std::string& source,
                     std::vector<PeerConfig>& out) {
  if (!list || list.IsNull()) return Status::Ok();
  if (!list.IsSequence()) {
    return InvalidArgument(source + ": " + prefix + " must be a list of {name, address[, port]}");
  }
  std::string err;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string item = prefix + "[" + std::to_string(i) + "]";
    PeerConfig p;
    MapReader r(list[i], item, source, err);
    if (err.empty() && !list[i].IsMap()) r.Fail(item + " must be a map {name, address[, port]}");
    r.String("name", p.name, false);
    std::string address;
    r.String("address", address, false);
    int64_t port = 0;
    r.Int("port", 1, 65535, port);
    r.String("publicKey", p.public_key);
    r.String("hostAddress", p.host_address);
    r.RejectUnknown();
    if (!err.empty()) return InvalidArgument(err);
    if (p.name.empty()) return InvalidArgument(source + ": " + item + ".name is required");
    // "a.b.c.d" or "a.b.c.d:port".
    if (size_t colon = address.rfind(':'); colon != std::string::npos && port == 0) {
      auto hp = ParseHostPort(address, item + ".address");
      if (!hp.ok()) return InvalidArgument(source + ": " + hp.error().message);
      if (hp->port == 0) return InvalidArgument(source + ": " + item + ".address port must be between 1 and 65535");
      address = hp->host;
      port = hp->port;
    }
    if (!IsIpv4(address)) {
      return InvalidArgument(source + ": " + item + ".address must be an IPv4 address like 10.0.0.2 or 10.0.0.2:7311 (got \"" +
                             address + "\")");
    }
    if (!p.host_address.empty() && !IsIpv4(p.host_address)) {
      return InvalidArgument(source + ": " + item + ".hostAddress must be an IPv4 address like 10.0.200.2 (got \"" +
                             p.host_address + "\")");
    }
    p.address = address;
    p.port = static_cast<int>(port);
    out.push_back(std::move(p));
  }
  return Status::Ok();
}

// The one call into yaml-cpp that reports errors by throwing (a syntax error):
// its exception becomes an error here. Everything after it reads the tree with
// calls that do not throw (IsMap/IsScalar checks first, convert<T>::decode).
Result<YAML::Node> LoadYaml(const std::string& yaml_text, const std::string& source) {
  try {
    return YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": not valid YAML: " + e.what());
  }
}

// Keys an older operator or a hand-written file may still carry: parsed once,
// used nowhere. Contention handling (a later issue) will bring them back.
void RejectUnsupported(const YAML::Node& root, const std::string& source, std::string& err) {
  auto reject = [&](const char* key, const char* what) {
    if (err.empty()) {
      err = source + ": " + key + " is not supported by this agent version (" + what + "); remove it";
    }
  };
  if (root["loadBalancing"]) reject("loadBalancing", "load balancing is not implemented yet");
}

}  // namespace

Result<AgentConfig> ParseAgentConfig(const std::string& yaml_text, const std::string& source) {
  Result<YAML::Node> loaded = LoadYaml(yaml_text, source);
  if (!loaded.ok()) return loaded.error();
  const YAML::Node& root = *loaded;
  AgentConfig c;
  if (root.IsNull()) return c;
  if (!root.IsMap()) return InvalidArgument(source + ": the top level must be a map");
  std::string err;
  RejectUnsupported(root, source, err);
  if (!err.empty()) return InvalidArgument(err);
  MapReader top(root, "", source, err);
  top.String("policy", c.policy, false);
  top.String("nodeName", c.node_name);
  {
    MapReader r(top.Child("probe"), "probe", source, err);
    r.Int("port", 0, 65535, c.probe.port, " (0 picks a free port)");
    r.Int("intervalMs", 1, kMaxProbeIntervalMs, c.probe.interval_ms);
    r.Int("peersPerNode", 1, kMaxPeersPerNode, c.probe.peers_per_node);
    r.Int("pathIntervalMs", 1, kMaxProbeIntervalMs, c.probe.path_interval_ms);
    r.Int("missThreshold", 1, kMaxMissThreshold, c.probe.miss_threshold);
    r.Int("idlePathIntervalMs", 0, kMaxProbeIntervalMs, c.probe.idle_path_interval_ms);
    r.Int("idleTickMs", 0, kMaxProbeIntervalMs, c.probe.idle_tick_ms);
    r.Bool("trafficAware", c.probe.traffic_aware);
    r.RejectUnknown();
  }
  {
    MapReader r(top.Child("clockSync"), "clockSync", source, err);
    r.Bool("enabled", c.clock_sync.enabled);
    r.Int("windowSeconds", 1, kMaxWindowSeconds, c.clock_sync.window_seconds);
    r.Bool("disciplineHostClock", c.clock_sync.discipline_host_clock);
    r.Int("maxErrorBoundNs", 1, kMaxMaxErrorBoundNs, c.clock_sync.max_error_bound_ns);
    r.Int("asymmetryAllowanceNs", 0, kMaxAsymmetryAllowanceNs, c.clock_sync.asymmetry_allowance_ns);
    r.RejectUnknown();
  }
  {
    MapReader r(top.Child("failover"), "failover", source, err);
    r.Bool("enabled", c.failover.enabled);
    r.Int("readmitAfterSeconds", 1, kMaxReadmitAfterSeconds, c.failover.readmit_after_seconds);
    r.Int("maxHoldDownSeconds", 1, kMaxMaxHoldDownSeconds, c.failover.max_hold_down_seconds);
    r.Int("holdDownDecaySeconds", 1, kMaxHoldDownDecaySeconds, c.failover.hold_down_decay_seconds);
    r.RejectUnknown();
    if (err.empty() && c.failover.max_hold_down_seconds < c.failover.readmit_after_seconds) {
      r.Fail(FailoverOrderMessage("failover", c.failover.readmit_after_seconds, c.failover.max_hold_down_seconds));
    }
  }
  top.Int("flapAlertPerHour", 1, kMaxFlapAlertPerHour, c.flap_alert_per_hour);
  {
    MapReader r(top.Child("fabric"), "fabric", source, err);
    r.StringList("rails", c.fabric.rails);
    r.String("hostInterface", c.fabric.host_interface, false);
    r.String("hostAddress", c.fabric.host_address);
    r.Int("port", 0, 65535, c.fabric.port, " (0 picks a free port)");
    r.Int("pathsPerRail", 1, kMaxFabricPathsPerRail, c.fabric.paths_per_rail);
    r.RejectUnknown();
    if (err.empty() && c.fabric.port != 0 && c.fabric.port + c.fabric.paths_per_rail - 1 > 65535) {
      r.Fail("fabric.port + fabric.pathsPerRail - 1 must be at most 65535 (path i > 0 sends from fabric.port + i)");
    }
    if (err.empty() && !c.fabric.host_address.empty() && !IsIpv4(c.fabric.host_address)) {
      r.Fail("fabric.hostAddress must be an IPv4 address like 10.0.200.1 (got \"" + c.fabric.host_address + "\")");
    }
    std::set<std::string> seen;
    for (const std::string& rail : c.fabric.rails) {
      if (err.empty() && !seen.insert(rail).second) r.Fail("fabric.rails names \"" + rail + "\" twice");
      if (err.empty() && !IsInterfaceName(rail)) {
        r.Fail("fabric.rails: \"" + rail + "\" is not an interface name (1 to 15 characters, no '/', ':' or whitespace)");
      }
    }
  }
  {
    MapReader r(top.Child("gpu"), "gpu", source, err);
    r.Enum("mode", GpuModes(), c.gpu.mode);
    r.Int("pollIntervalSeconds", 1, kMaxGpuPollIntervalSeconds, c.gpu.poll_interval_seconds);
    {
      GpuEarlyWarningSpec& w = c.gpu.early_warning;
      MapReader e(r.Child("earlyWarning"), "gpu.earlyWarning", source, err);
      e.Int("gpuTempCelsius", kMinGpuTempCelsius, kMaxGpuTempCelsius, w.gpu_temp_celsius);
      e.Int("slowdownMarginCelsius", 0, kMaxGpuSlowdownMarginCelsius, w.slowdown_margin_celsius);
      e.Int("eccSingleBitPerHour", 1, kMaxEccSingleBitPerHour, w.ecc_single_bit_per_hour);
      e.Bool("pendingRowRemaps", w.pending_row_remaps);
      e.IntSet("xids", 1, 65535, kMaxEarlyWarningXids, w.xids);
      e.RejectUnknown();
    }
    r.RejectUnknown();
  }
  {
    MapReader r(top.Child("latency"), "latency", source, err);
    int64_t sla = 0;
    r.Int("oneWayDelayP99Micros", 1, kMaxOneWayDelayP99Micros, sla);
    if (sla > 0) c.latency.one_way_delay_p99_micros = sla;
    r.Int("minSamples", 1, kMaxLatencyMinSamples, c.latency.min_samples);
    YAML::Node rails = r.Child("rails");
    r.RejectUnknown();
    if (err.empty() && rails && !rails.IsNull() && !rails.IsSequence()) {
      r.Fail("latency.rails must be a list of {name, oneWayDelayP99Micros} (got a " +
             std::string(rails.IsMap() ? "map" : "scalar") + ")");
    }
    for (size_t i = 0; err.empty() && rails && rails.IsSequence() && i < rails.size(); ++i) {
      const std::string item = "latency.rails[" + std::to_string(i) + "]";
      RailLatencySla rail;
      rail.one_way_delay_p99_micros = 0;
      MapReader e(rails[i], item, source, err);
      if (err.empty() && !rails[i].IsMap()) e.Fail(item + " must be a map {name, oneWayDelayP99Micros}");
      e.String("name", rail.name, false);
      e.Int("oneWayDelayP99Micros", 1, kMaxOneWayDelayP99Micros, rail.one_way_delay_p99_micros);
      e.RejectUnknown();
      if (!err.empty()) break;
      if (rail.name.empty() || rail.one_way_delay_p99_micros == 0) {
        e.Fail(item + " needs name and oneWayDelayP99Micros");
      } else if (std::any_of(c.latency.rails.begin(), c.latency.rails.end(),
                             [&](const RailLatencySla& x) { return x.name == rail.name; })) {
        e.Fail("latency.rails names rail \"" + rail.name + "\" twice");
      } else if (std::find(c.fabric.rails.begin(), c.fabric.rails.end(), rail.name) == c.fabric.rails.end()) {
        e.Fail(item + ".name: \"" + rail.name + "\" is not one of fabric.rails");
      }
      c.latency.rails.push_back(std::move(rail));
    }
  }
  top.String("probeKeyFile", c.probe_key_file, false);
  top.String("nodeKeyFile", c.node_key_file);
  top.Addr("healthAddr", c.health_addr);
  top.Addr("timeApiAddr", c.time_api_addr);
  YAML::Node peers = top.Child("peers");
  top.RejectUnknown();
  if (!err.empty()) return InvalidArgument(err);
  if (Status s = ParsePeerList(peers, "peers", source, c.peers); !s.ok()) return s.error();
  return c;
}

Result<std::vector<PeerConfig>> ParsePeers(const std::string& yaml_text, const std::string& source) {
  Result<YAML::Node> loaded = LoadYaml(yaml_text, source);
  if (!loaded.ok()) return loaded.error();
  const YAML::Node& root = *loaded;
  std::vector<PeerConfig> out;
  if (!root.IsMap()) {
    if (Status s = ParsePeerList(root, "peers", source, out); !s.ok()) return s.error();
    return out;
  }
  std::string err;
  MapReader r(root, "", source, err);
  // Copied, never assigned: assigning a YAML::Node writes through to the node it refers to.
  const YAML::Node list = r.Child("peers");
  r.RejectUnknown();
  if (!err.empty()) return InvalidArgument(err);
  if (Status s = ParsePeerList(list, "peers", source, out); !s.ok()) return s.error();
  return out;
}

std::string RenderAgentConfigYaml(const AgentConfig& c) {
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "policy" << YAML::Value << c.policy;
  y << YAML::Key << "nodeName" << YAML::Value << c.node_name;
  y << YAML::Key << "probe" << YAML::Value << YAML::BeginMap
    << YAML::Key << "port" << YAML::Value << c.probe.port
    << YAML::Key << "intervalMs" << YAML::Value << c.probe.interval_ms
    << YAML::Key << "peersPerNode" << YAML::Value << c.probe.peers_per_node
    << YAML::Key << "pathIntervalMs" << YAML::Value << c.probe.path_interval_ms
    << YAML::Key << "missThreshold" << YAML::Value << c.probe.miss_threshold
    << YAML::Key << "idlePathIntervalMs" << YAML::Value << c.probe.idle_path_interval_ms
    << YAML::Key << "idleTickMs" << YAML::Value << c.probe.idle_tick_ms
    << YAML::Key << "trafficAware" << YAML::Value << c.probe.traffic_aware;
  y << YAML::EndMap;
  y << YAML::Key << "clockSync" << YAML::Value << YAML::BeginMap
    << YAML::Key << "enabled" << YAML::Value << c.clock_sync.enabled
    << YAML::Key << "windowSeconds" << YAML::Value << c.clock_sync.window_seconds
    << YAML::Key << "disciplineHostClock" << YAML::Value << c.clock_sync.discipline_host_clock
    << YAML::Key << "maxErrorBoundNs" << YAML::Value << c.clock_sync.max_error_bound_ns
    << YAML::Key << "asymmetryAllowanceNs" << YAML::Value << c.clock_sync.asymmetry_allowance_ns << YAML::EndMap;
  y << YAML::Key << "failover" << YAML::Value << YAML::BeginMap
    << YAML::Key << "enabled" << YAML::Value << c.failover.enabled
    << YAML::Key << "readmitAfterSeconds" << YAML::Value << c.failover.readmit_after_seconds
    << YAML::Key << "maxHoldDownSeconds" << YAML::Value << c.failover.max_hold_down_seconds
    << YAML::Key << "holdDownDecaySeconds" << YAML::Value << c.failover.hold_down_decay_seconds << YAML::EndMap;
  y << YAML::Key << "flapAlertPerHour" << YAML::Value << c.flap_alert_per_hour;
  y << YAML::Key << "fabric" << YAML::Value << YAML::BeginMap << YAML::Key << "rails" << YAML::Value
    << YAML::Flow << c.fabric.rails << YAML::Key << "hostInterface" << YAML::Value << c.fabric.host_interface;
  if (!c.fabric.host_address.empty()) y << YAML::Key << "hostAddress" << YAML::Value << c.fabric.host_address;
  y << YAML::Key << "port" << YAML::Value << c.fabric.port << YAML::Key << "pathsPerRail" << YAML::Value
    << c.fabric.paths_per_rail << YAML::EndMap;
  const GpuEarlyWarningSpec& w = c.gpu.early_warning;
  y << YAML::Key << "gpu" << YAML::Value << YAML::BeginMap
    << YAML::Key << "mode" << YAML::Value << c.gpu.mode
    << YAML::Key << "pollIntervalSeconds" << YAML::Value << c.gpu.poll_interval_seconds
    << YAML::Key << "earlyWarning" << YAML::Value << YAML::BeginMap
    << YAML::Key << "gpuTempCelsius" << YAML::Value << w.gpu_temp_celsius
    << YAML::Key << "slowdownMarginCelsius" << YAML::Value << w.slowdown_margin_celsius
    << YAML::Key << "eccSingleBitPerHour" << YAML::Value << w.ecc_single_bit_per_hour
    << YAML::Key << "pendingRowRemaps" << YAML::Value << w.pending_row_remaps
    << YAML::Key << "xids" << YAML::Value << YAML::Flow << w.xids << YAML::EndMap << YAML::EndMap;
  y << YAML::Key << "latency" << YAML::Value << YAML::BeginMap;
  if (c.latency.one_way_delay_p99_micros) {
    y << YAML::Key << "oneWayDelayP99Micros" << YAML::Value << *c.latency.one_way_delay_p99_micros;
  }
  y << YAML::Key << "minSamples" << YAML::Value << c.latency.min_samples;
  y << YAML::Key << "rails" << YAML::Value << YAML::BeginSeq;
  for (const RailLatencySla& r : c.latency.rails) {
    y << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << r.name << YAML::Key
      << "oneWayDelayP99Micros" << YAML::Value << r.one_way_delay_p99_micros << YAML::EndMap;
  }
  y << YAML::EndSeq << YAML::EndMap;
  y << YAML::Key << "probeKeyFile" << YAML::Value << c.probe_key_file;
  if (!c.node_key_file.empty()) y << YAML::Key << "nodeKeyFile" << YAML::Value << c.node_key_file;
  y << YAML::Key << "healthAddr" << YAML::Value << c.health_addr.ToString();
  y << YAML::Key << "timeApiAddr" << YAML::Value << c.time_api_addr.ToString();
  if (!c.peers.empty()) {
    y << YAML::Key << "peers" << YAML::Value << YAML::BeginSeq;
    for (const PeerConfig& p : c.peers) {
      y << YAML::BeginMap << YAML::Key << "name" << YAML::Value << p.name << YAML::Key << "address" << YAML::Value
        << p.address;
      if (p.port != 0) y << YAML::Key << "port" << YAML::Value << p.port;
      if (!p.public_key.empty()) y << YAML::Key << "publicKey" << YAML::Value << p.public_key;
      if (!p.host_address.empty()) y << YAML::Key << "hostAddress" << YAML::Value << p.host_address;
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  y << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

}  // namespace lockstep::api
