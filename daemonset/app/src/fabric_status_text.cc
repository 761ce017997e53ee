#include "lockstep/agent/app/fabric_status_text.h"

#include <cstdio>
#include <vector>

namespace lockstep::agent {
namespace {

using Json = nlohmann::json;

std::string Str(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "-";
  const Json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", v.get<double>());
    return b;
  }
  return v.dump();
}

// Nanoseconds as microseconds with one decimal.
std::string Us(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", j[key].get<double>() / 1000.0);
  return b;
}

std::string Percent(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", j[key].get<double>() * 100.0);
  return b;
}

// Left-aligned columns, two spaces apart.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string FormatFabricStatus(const Json& s) {
  std::string out;
  out += "node:          " + Str(s, "node") + " (host address " + Str(s, "host_address") + ")\n";
  out += "failover:      " + std::string(s.value("failover", false) ? "enabled" : "disabled (monitoring only)") +
         "; probes every " + Str(s, "probe_interval_ms") + " ms, down after " + Str(s, "miss_threshold") +
         " misses\n";
  std::string last = "never";
  if (s.contains("last_flap_seconds_ago") && s["last_flap_seconds_ago"].is_number()) {
    char b[48];
    std::snprintf(b, sizeof b, "%.1f s ago", s["last_flap_seconds_ago"].get<double>());
    last = b;
  }
  out += "flaps:         " + Str(s, "flaps_last_hour") + " in the last hour, last " + last + "\n";
  if (s.contains("latency") && s["latency"].is_object()) {
    const Json& l = s["latency"];
    out += "latency SLA:   " + Str(l, "verdict") + " (" + Str(l, "breaches") + " of " + Str(l, "judged") +
           " judged paths in breach, " + Str(l, "paths_with_sla") + " with an SLA, minSamples " +
           Str(l, "min_samples") + ")\n";
  }
  out += "\n";

  std::vector<std::vector<std::string>> rails{{"RAIL", "INTERFACE", "GATEWAY", "PATHS", "USABLE", "FAILED", "DOWN",
                                               "FLAPS/1H", "ALERT"}};
  for (const Json& r : s.value("rails", Json::array())) {
    rails.push_back({Str(r, "rail"), Str(r, "interface"), Str(r, "gateway"), Str(r, "paths"), Str(r, "usable"),
                     Str(r, "failed"), Str(r, "down"), Str(r, "flaps_last_hour"), Str(r, "alerting")});
  }
  out += Table(rails) + "\n";

  std::vector<std::vector<std::string>> paths{{"PEER", "RAIL", "STATE", "LOSS", "OWD P50 us", "OWD P99 us", "SLA us",
                                               "LATENCY", "RTT P50 us", "RTT P99 us", "SENT", "REPLIES", "MISSES",
                                               "FLAPS/1H", "READMIT IN"}};
  for (const Json& p : s.value("paths", Json::array())) {
    std::string readmit = "-";
    if (p.contains("readmit_in_ms") && p["readmit_in_ms"].is_number()) readmit = Str(p, "readmit_in_ms") + " ms";
    paths.push_back({Str(p, "peer"), Str(p, "interface"), Str(p, "state"), Percent(p, "loss"), Us(p, "owd_p50_ns"),
                     Us(p, "owd_p99_ns"), Us(p, "owd_sla_ns"), Str(p, "latency"), Us(p, "rtt_p50_ns"),
                     Us(p, "rtt_p99_ns"), Str(p, "probes_sent"), Str(p, "replies"), Str(p, "misses"),
                     Str(p, "flaps_last_hour"), readmit});
  }
  out += Table(paths) + "\n";

  std::vector<std::vector<std::string>> peers{{"PEER", "HOST ADDRESS", "TRAFFIC VIA", "ROUTE"}};
  for (const Json& p : s.value("peers", Json::array())) {
    std::string via = Str(p, "via");
    if (via == "ecmp") via = "static ECMP";
    peers.push_back({Str(p, "peer"), Str(p, "host_address"), via, Str(p, "route")});
  }
  out += Table(peers);
  return out;
}

}  // namespace lockstep::agent
