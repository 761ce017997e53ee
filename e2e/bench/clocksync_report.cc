#include "clocksync_report.h"

#include <cstdio>

namespace lockstep::bench {
namespace {

using Json = nlohmann::ordered_json;

Json J(std::optional<double> v) { return v ? Json(*v) : Json(nullptr); }

// "-" for no value, else v with nd decimals.
std::string F(std::optional<double> v, int nd) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", nd, *v);
  return buf;
}

std::string JoinStrings(const std::vector<std::string>& xs, const std::string& sep) {
  std::string s;
  for (const auto& x : xs) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string Row(const std::string& key, const std::string& value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "   %-44s ", key.c_str());
  return buf + value + "\n";
}

}  // namespace

std::vector<char> RunOrder(const std::map<char, ScenarioResult>& results) {
  std::vector<char> order;
  for (char k : std::string("cabed")) {
    if (results.count(k)) order.push_back(k);
  }
  return order;
}

Json ToJson(const ScenarioResult& r) {
  const PairScore& p = r.pairs;
  Json j;
  j["scenario"] = r.scenario;
  j["nodes"] = r.nodes;
  j["rounds"] = r.rounds;
  j["pairs_scored"] = p.pairs;
  j["p50_error_ns"] = J(RoundTo(p.p50_ns, 1));
  j["p99_error_ns"] = J(RoundTo(p.p99_ns, 1));
  j["max_error_ns"] = J(RoundTo(p.max_ns, 1));
  j["worst_pair"] = r.worst_pair ? Json::array({r.worst_pair->first, r.worst_pair->second}) : Json(nullptr);
  j["bound_violations"] = p.violations;
  j["error_over_bound_p99"] = J(RoundTo(p.over_bound_p99, 2));
  j["error_over_bound_max"] = J(RoundTo(p.over_bound_max, 2));
  j["error_bound_p50_ns"] = J(p.bound_p50_ns);
  j["pure_probe_fraction"] = J(RoundTo(r.pure_probe_fraction, 3));
  j["pure_probe_fraction_min"] = J(RoundTo(r.pure_probe_fraction_min, 3));
  j["agent_cpu_percent"] = J(RoundTo(r.agent_cpu_percent, 2));
  j["probe_kbps_per_node"] = J(RoundTo(r.probe_kbps_per_node, 1));
  j["probe_pkts_per_s_per_node"] = J(RoundTo(r.probe_pkts_per_s_per_node, 1));
  j["sample_spread_us_p50"] =
      J(p.spread_p50_ns ? std::optional<double>(RoundTo(*p.spread_p50_ns / 1000, 1)) : std::nullopt);
  j["fabric_rate_ppm"] = RoundTo(p.fabric_rate * 1e6, 3);
  j["non_locked_states_seen"] = r.non_locked_states_seen;
  j["measure_s"] = RoundTo(r.measure_s, 1);
  j["baseline_p50_error_ns"] = J(RoundTo(r.baseline.p50_ns, 1));
  j["baseline_p99_error_ns"] = J(RoundTo(r.baseline.p99_ns, 1));
  j["baseline_max_error_ns"] = J(RoundTo(r.baseline.max_ns, 1));
  j["baseline_edge_estimates"] = r.baseline.edges;
  j["time_to_locked_s"] = J(RoundTo(r.time_to_locked_s, 2));
  if (!r.note.empty()) j["note"] = r.note;
  if (r.shaped_link_mbit) j["shaped_link_mbit"] = RoundTo(*r.shaped_link_mbit, 1);
  if (r.probe_directions_through_shaped_link) {
    j["probe_directions_through_shaped_link"] = *r.probe_directions_through_shaped_link;
  }
  return j;
}

std::string Table(const ScenarioResult& r) {
  const PairScore& p = r.pairs;
  char head[256];
  std::snprintf(head, sizeof head, "\n== scenario %s: %d nodes, %zu sampling rounds, %zu pair samples over %.1f s\n",
                r.scenario.c_str(), r.nodes, r.rounds, p.pairs, RoundTo(r.measure_s, 1));
  std::string out = head;
  if (!r.note.empty()) out += "   " + r.note + "\n";
  out += Row("pairwise error p50 / p99 / max (ns)", F(p.p50_ns, 1) + " / " + F(p.p99_ns, 1) + " / " + F(p.max_ns, 1));
  out += Row("worst pair", r.worst_pair ? r.worst_pair->first + " - " + r.worst_pair->second : "-");
  out += Row("samples outside bound_i + bound_j", std::to_string(p.violations));
  out += Row("|e_i - e_j| / (bound_i + bound_j) p99 / max", F(p.over_bound_p99, 2) + " / " + F(p.over_bound_max, 2));
  out += Row("reported error bound p50 (ns)", F(p.bound_p50_ns, 0));
  out += Row("NTP-style baseline p50 / p99 / max (ns)", F(r.baseline.p50_ns, 1) + " / " + F(r.baseline.p99_ns, 1) +
                                                            " / " + F(r.baseline.max_ns, 1) + " (" +
                                                            std::to_string(r.baseline.edges) + " edge fits)");
  out += Row("time to LOCKED (s)", F(r.time_to_locked_s, 1));
  out += Row("pure probe fraction mean (min)",
             F(r.pure_probe_fraction, 3) + " (" + F(r.pure_probe_fraction_min, 3) + ")");
  out += Row("agent CPU % (mean per agent)", F(r.agent_cpu_percent, 2));
  out += Row("probe bandwidth per node (kbps, rail0 tx)", F(r.probe_kbps_per_node, 1));
  out += Row("probe packets/s per node", F(r.probe_pkts_per_s_per_node, 0));
  out += Row("states other than LOCKED seen",
             r.non_locked_states_seen.empty() ? "none" : JoinStrings(r.non_locked_states_seen, ", "));
  out += Row("sample spread p50 (us) / fabric rate (ppm)",
             F(p.spread_p50_ns ? std::optional<double>(*p.spread_p50_ns / 1000) : std::nullopt, 1) + " / " +
                 F(p.fabric_rate * 1e6, 3));
  return out;
}

Json Summary(const std::map<char, ScenarioResult>& results, double wall_s) {
  std::vector<char> order = RunOrder(results);
  char pick = results.count('b') ? 'b' : results.count('a') ? 'a' : order.at(0);
  Json head = ToJson(results.at(pick));
  Json line;
  line["benchmark"] = "clocksync-testbed";
  line["headline_scenario"] = head["scenario"];
  for (const char* k : {"nodes", "p50_error_ns", "p99_error_ns", "max_error_ns", "baseline_p50_error_ns",
                        "baseline_p99_error_ns", "time_to_locked_s", "pure_probe_fraction", "agent_cpu_percent",
                        "probe_kbps_per_node"}) {
    line[k] = head[k];
  }
  std::optional<double> p50 = RoundTo(results.at(pick).pairs.p50_ns, 1);
  std::optional<double> p99 = RoundTo(results.at(pick).pairs.p99_ns, 1);
  std::optional<double> b99 = RoundTo(results.at(pick).baseline.p99_ns, 1);
  std::optional<double> ratio;
  if (b99 && *b99 != 0 && p99 && *p99 != 0) ratio = RoundTo(*b99 / *p99, 2);
  line["baseline_p99_over_p99"] = J(ratio);
  line["baseline_note"] = b99 ? "NTP-style per-edge estimate (clocksync ntp_baseline: min-delay of the last 8 "
                                "exchanges) on the same probes, /status ntp_baseline, scored per edge against truth"
                              : "null: this agent build does not expose ntp_baseline in /status";
  line["goals"] = {{"p99_le_300ns", p99 && *p99 <= 300},
                   {"p50_le_100ns", p50 && *p50 <= 100},
                   {"baseline_p99_100x", ratio ? Json(*ratio >= 100) : Json(nullptr)}};
  line["wall_s"] = RoundTo(wall_s, 1);
  Json scenarios = Json::array();
  for (char k : order) scenarios.push_back(ToJson(results.at(k)));
  line["scenarios"] = std::move(scenarios);
  return line;
}

std::vector<std::string> CheckFailures(const std::map<char, ScenarioResult>& results, double max_violation_fraction) {
  std::vector<std::string> bad;
  for (char k : RunOrder(results)) {
    const ScenarioResult& r = results.at(k);
    const PairScore& p = r.pairs;
    if (p.pairs == 0) bad.push_back(r.scenario + ": no pair scored");
    if (static_cast<double>(p.violations) > max_violation_fraction * static_cast<double>(p.pairs)) {
      bad.push_back(r.scenario + ": " + std::to_string(p.violations) + " pair samples outside bound_i + bound_j");
    }
    if (p.max_ns && *p.max_ns >= 10'000) {
      bad.push_back(r.scenario + ": max pairwise error " + F(p.max_ns, 1) + " ns >= 10 us");
    }
    if (!r.non_locked_states_seen.empty()) {
      bad.push_back(r.scenario + ": states other than LOCKED: " + JoinStrings(r.non_locked_states_seen, ", "));
    }
  }
  return bad;
}

}  // namespace lockstep::bench
