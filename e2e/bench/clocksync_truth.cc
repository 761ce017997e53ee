#include "clocksync_truth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "clocksync_score.h"

namespace lockstep::bench {
namespace {

constexpr int64_t kUnbounded = int64_t{1} << 62;  // bounds at or above: no bound

const nlohmann::json& Field(const nlohmann::json& j, const char* key, const std::string& node) {
  if (!j.is_object() || !j.contains(key)) {
    throw std::runtime_error(node + ": /status has no " + key);
  }
  return j.at(key);
}

std::string Fmt(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

}  // namespace

AgentStatus ParseAgentStatus(const nlohmann::json& s) {
  AgentStatus a;
  try {
    a.node = Field(s, "node", "agent").get<std::string>();
    if (!s.contains("virtual_clock")) {
      throw std::runtime_error(a.node + ": no ground truth (not running with --virtual-clock)");
    }
    a.state = Field(s, "state", a.node).get<std::string>();
    a.offset_ns = Field(s, "offset_ns", a.node).get<double>();
    a.drift_ppb = Field(s, "drift_ppb", a.node).get<double>();
    a.error_bound_ns = Field(s, "error_bound_ns", a.node).get<int64_t>();
    a.peers = Field(s, "peers", a.node).get<int64_t>();
    a.probe_targets = Field(s, "probe_targets", a.node).size();
    const auto& vc = s.at("virtual_clock");
    a.local_ns = Field(vc, "local_ns", a.node).get<int64_t>();
    a.true_offset_ns = Field(vc, "true_offset_ns", a.node).get<int64_t>();
    a.true_drift_ppb = Field(vc, "true_drift_ppb", a.node).get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(a.node + ": bad /status: " + e.what());
  }
  return a;
}

std::vector<TruthRow> ScoreTruth(const std::vector<AgentStatus>& agents) {
  auto has_model = [](const AgentStatus& s) { return s.state == "LOCKED" || s.state == "HOLDOVER"; };
  // G's rate against the base: each agent with a model sees it as its clock's
  // true drift minus its estimated drift against fabric time.
  double rate = 0;
  int with_model = 0;
  for (const auto& t : agents) {
    if (!has_model(t)) continue;
    rate += (t.true_drift_ppb - t.drift_ppb) * 1e-9;
    ++with_model;
  }
  if (with_model > 0) rate /= with_model;
  std::vector<TruthRow> rows;
  for (const auto& s : agents) {
    int64_t base_i = s.local_ns - s.true_offset_ns;
    // G at this agent's base instant: every agent's view of it, carried there.
    double g = 0;
    for (const auto& t : agents) {
      if (!has_model(t)) continue;
      int64_t base_j = t.local_ns - t.true_offset_ns;
      g += static_cast<double>(t.true_offset_ns) - t.offset_ns + rate * static_cast<double>(base_i - base_j);
    }
    if (with_model > 0) g /= with_model;
    TruthRow r;
    r.node = s.node;
    r.state = s.state;
    if (s.error_bound_ns < kUnbounded) r.error_bound_ns = s.error_bound_ns;
    r.true_error_ns = has_model(s) ? s.offset_ns - (static_cast<double>(s.true_offset_ns) - g) : 0;
    r.inside_bound = s.state == "LOCKED" && r.error_bound_ns &&
                     std::abs(r.true_error_ns) <= static_cast<double>(*r.error_bound_ns);
    r.true_offset_ns = s.true_offset_ns;
    r.true_drift_ppb = s.true_drift_ppb;
    r.fabric_minus_base_ns = g;
    r.peers = s.peers;
    r.probe_targets = s.probe_targets;
    rows.push_back(r);
  }
  return rows;
}

bool AllInside(const std::vector<TruthRow>& rows) {
  return std::all_of(rows.begin(), rows.end(), [](const TruthRow& r) { return r.inside_bound; });
}

nlohmann::ordered_json TruthJson(const std::vector<TruthRow>& rows) {
  nlohmann::ordered_json agents = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json a;
    a["node"] = r.node;
    a["state"] = r.state;
    a["error_bound_ns"] = r.error_bound_ns ? nlohmann::ordered_json(*r.error_bound_ns) : nullptr;
    a["true_error_ns"] = RoundTo(r.true_error_ns, 1);
    a["inside_bound"] = r.inside_bound;
    a["true_offset_ns"] = r.true_offset_ns;
    a["true_drift_ppb"] = RoundTo(r.true_drift_ppb, 1);
    a["fabric_minus_base_ns"] = RoundTo(r.fabric_minus_base_ns, 1);
    a["peers"] = r.peers;
    a["probe_targets"] = r.probe_targets;
    agents.push_back(std::move(a));
  }
  nlohmann::ordered_json j;
  j["ok"] = AllInside(rows);
  j["agents"] = std::move(agents);
  return j;
}

std::string TruthTable(const std::vector<TruthRow>& rows) {
  std::string out = Fmt("%-14s%-10s%9s%13s  %-9s%18s%16s%7s\n", "NODE", "STATE", "BOUND-NS", "TRUE-ERR-NS",
                        "IN-BOUND", "TRUE-CLOCK-OFFSET", "TRUE-DRIFT-PPB", "PEERS");
  double max_err = 0;
  std::optional<int64_t> max_bound;
  int64_t min_off = 0, max_off = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const TruthRow& r = rows[k];
    std::string bound = r.error_bound_ns ? std::to_string(*r.error_bound_ns) : "inf";
    out += Fmt("%-14s%-10s%9s%13.1f  %-9s%18lld%16.1f%7lld\n", r.node.c_str(), r.state.c_str(), bound.c_str(),
               r.true_error_ns, r.inside_bound ? "yes" : "NO", static_cast<long long>(r.true_offset_ns),
               r.true_drift_ppb, static_cast<long long>(r.peers));
    max_err = std::max(max_err, std::abs(r.true_error_ns));
    if (r.error_bound_ns) max_bound = std::max(max_bound.value_or(0), *r.error_bound_ns);
    min_off = k == 0 ? r.true_offset_ns : std::min(min_off, r.true_offset_ns);
    max_off = k == 0 ? r.true_offset_ns : std::max(max_off, r.true_offset_ns);
  }
  out += Fmt("max |true error| %.1f ns, max bound %s ns; clocks differ by up to %lld ns before sync\n", max_err,
             max_bound ? std::to_string(*max_bound).c_str() : "inf", static_cast<long long>(max_off - min_off));
  return out;
}

}  // namespace lockstep::bench
