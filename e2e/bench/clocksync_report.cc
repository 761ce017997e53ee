#include "clocksync_report.h"

#include <cstdio>

namespace lockstep::bench {
namespace {

using Json = nlohmann::ordered_json;

Json J(std::optional<double> v) { return v ? Json(*v) : Json(nullptr); }

// a / b rounded to 2 decimals; nullopt unless both are there and b > 0.
std::optional<double> Ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || !(*b > 0)) return std::nullopt;
  return RoundTo(*a / *b, 2);
}

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
  if (r.chrony) {
    const ChronyScore& c = *r.chrony;
    j["chrony_p50_error_ns"] = J(RoundTo(c.p50_ns, 1));
    j["chrony_p99_error_ns"] = J(RoundTo(c.p99_ns, 1));
    j["chrony_max_error_ns"] = J(RoundTo(c.max_ns, 1));
    j["chrony_pairs_scored"] = c.pairs;
    j["chrony_bound_violations"] = c.violations;
    j["chrony_bound_p50_ns"] = J(RoundTo(c.bound_p50_ns, 1));
    j["chrony_client_offset_p50_ns"] = J(RoundTo(c.client_p50_ns, 1));
    j["chrony_client_offset_p99_ns"] = J(RoundTo(c.client_p99_ns, 1));
    j["chrony_client_offset_max_ns"] = J(RoundTo(c.client_max_ns, 1));
    j["chrony_unsynced_samples"] = c.unsynced_samples;
    j["chrony_p50_over_p50"] = J(Ratio(c.p50_ns, p.p50_ns));
    j["chrony_p99_over_p99"] = J(Ratio(c.p99_ns, p.p99_ns));
    j["chrony_max_over_max"] = J(Ratio(c.max_ns, p.max_ns));
  }
  j["time_to_locked_s"] = J(RoundTo(r.time_to_locked_s, 2));
  j["time_to_first_sync_s"] = {{"lockstep", J(RoundTo(r.time_to_locked_s, 2))},
                               {"chrony", J(RoundTo(r.chrony_time_to_first_sync_s, 2))}};
  j["lockstep_unsynced_samples"] = r.unsynced_samples;
  j["fabric"] = r.fabric;
  if (r.fabric) {
    j["fabric_probe_pkts_per_s_per_node"] = J(RoundTo(r.fabric_probe_pkts_per_s_per_node, 1));
    j["fabric_misses"] = J(r.fabric_misses);
    j["fabric_route_changes"] = J(r.fabric_route_changes);
    j["fabric_path_downs"] = r.fabric_path_downs ? Json(*r.fabric_path_downs) : Json(nullptr);
    j["fabric_paths"] = r.fabric_paths ? Json(*r.fabric_paths) : Json(nullptr);
    j["fabric_paths_up"] = r.fabric_paths_up ? Json(*r.fabric_paths_up) : Json(nullptr);
  }
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
  std::snprintf(head, sizeof head,
                "\n== scenario %s: %d nodes, %zu sampling rounds, %zu pair samples over %.1f s; fabric probing %s\n",
                r.scenario.c_str(), r.nodes, r.rounds, p.pairs, RoundTo(r.measure_s, 1), r.fabric ? "on" : "off");
  std::string out = head;
  if (!r.note.empty()) out += "   " + r.note + "\n";
  out += Row("pairwise error p50 / p99 / max (ns)", F(p.p50_ns, 1) + " / " + F(p.p99_ns, 1) + " / " + F(p.max_ns, 1));
  out += Row("worst pair", r.worst_pair ? r.worst_pair->first + " - " + r.worst_pair->second : "-");
  out += Row("samples outside bound_i + bound_j", std::to_string(p.violations));
  out += Row("|e_i - e_j| / (bound_i + bound_j) p99 / max", F(p.over_bound_p99, 2) + " / " + F(p.over_bound_max, 2));
  out += Row("reported error bound p50 (ns)", F(p.bound_p50_ns, 0));
  if (r.chrony) {
    const ChronyScore& c = *r.chrony;
    out += Row("chrony pairwise error p50 / p99 / max (ns)", F(c.p50_ns, 1) + " / " + F(c.p99_ns, 1) + " / " +
                                                              F(c.max_ns, 1) + " (" + std::to_string(c.pairs) +
                                                              " pair samples)");
    out += Row("chrony / Lockstep p50, p99, max", F(Ratio(c.p50_ns, p.p50_ns), 2) + ", " +
                                                     F(Ratio(c.p99_ns, p.p99_ns), 2) + ", " +
                                                     F(Ratio(c.max_ns, p.max_ns), 2));
    out += Row("chrony client offset p50 / p99 / max (ns)",
               F(c.client_p50_ns, 1) + " / " + F(c.client_p99_ns, 1) + " / " + F(c.client_max_ns, 1));
    out += Row("chrony outside its bound / bound p50 (ns)",
               std::to_string(c.violations) + " / " + F(c.bound_p50_ns, 0));
    if (c.unsynced_samples) out += Row("chrony samples not synchronised", std::to_string(c.unsynced_samples));
  }
  out += Row("time to first sync (s): Lockstep LOCKED / chrony",
             F(r.time_to_locked_s, 1) + " / " + F(r.chrony_time_to_first_sync_s, 1));
  if (r.unsynced_samples) out += Row("Lockstep samples not synchronised", std::to_string(r.unsynced_samples));
  out += Row("pure probe fraction mean (min)",
             F(r.pure_probe_fraction, 3) + " (" + F(r.pure_probe_fraction_min, 3) + ")");
  out += Row("agent CPU % (mean per agent)", F(r.agent_cpu_percent, 2));
  out += Row(r.fabric ? "rail0 tx kbps per node (probes + fabric)" : "probe bandwidth per node (kbps, rail0 tx)",
             F(r.probe_kbps_per_node, 1));
  out += Row("probe packets/s per node", F(r.probe_pkts_per_s_per_node, 0));
  if (r.fabric) {
    auto i = [](std::optional<int> v) { return v ? std::optional<double>(*v) : std::nullopt; };
    out += Row("fabric probe packets/s per node (all rails)", F(r.fabric_probe_pkts_per_s_per_node, 0));
    out += Row("fabric misses / route changes (all agents)",
               F(r.fabric_misses, 0) + " / " + F(r.fabric_route_changes, 0));
    out += Row("fabric path downs in the measurement", F(i(r.fabric_path_downs), 0));
    out += Row("fabric paths up at the end", F(i(r.fabric_paths_up), 0) + " / " + F(i(r.fabric_paths), 0));
  }
  out += Row("states other than LOCKED seen",
             r.non_locked_states_seen.empty() ? "none" : JoinStrings(r.non_locked_states_seen, ", "));
  out += Row("sample spread p50 (us) / fabric rate (ppm)",
             F(p.spread_p50_ns ? std::optional<double>(*p.spread_p50_ns / 1000) : std::nullopt, 1) + " / " +
                 F(p.fabric_rate * 1e6, 3));
  return out;
}

Json Summary(const std::map<char, ScenarioResult>& results, double wall_s, double asymmetry_allowance_ns) {
  std::vector<char> order = RunOrder(results);
  char pick = results.count('b') ? 'b' : results.count('a') ? 'a' : order.at(0);
  Json head = ToJson(results.at(pick));
  Json line;
  line["benchmark"] = "clocksync-testbed";
  line["headline_scenario"] = head["scenario"];
  line["fabric"] = results.at(pick).fabric;  // --fabric: fabric failover probing ran beside clock sync
  for (const char* k : {"nodes", "p50_error_ns", "p99_error_ns", "max_error_ns", "bound_violations",
                        "chrony_p50_error_ns", "chrony_p99_error_ns", "chrony_max_error_ns", "chrony_p50_over_p50",
                        "chrony_p99_over_p99", "chrony_max_over_max", "time_to_locked_s", "time_to_first_sync_s",
                        "pure_probe_fraction", "agent_cpu_percent", "probe_kbps_per_node"}) {
    line[k] = head.contains(k) ? head[k] : Json(nullptr);
  }
  line["asymmetry_allowance_ns"] = asymmetry_allowance_ns;
  std::optional<double> p50 = RoundTo(results.at(pick).pairs.p50_ns, 1);
  std::optional<double> p99 = RoundTo(results.at(pick).pairs.p99_ns, 1);
  line["scoring_rule"] =
      "both systems from the same instant (each scenario's window starts once every agent is LOCKED and every "
      "chronyd synchronised); a sample counts when its own system says it is synchronised (Lockstep LOCKED or "
      "HOLDOVER, chrony a synchronised leap status); the others are counted (lockstep_unsynced_samples, "
      "chrony_unsynced_samples); time to first sync from each daemon's start";
  line["chrony_note"] = results.at(pick).chrony
                            ? "real chronyd -x (one server, every other host a client, minpoll/maxpoll -4, xleave) "
                              "in the same run; its error is its tracking 'System time' correction (the shared "
                              "clock is the truth); pairwise over every synchronised pair, server included"
                            : "null: run with --no-chrony";
  Json beats = nullptr;
  if (head.contains("chrony_p99_over_p99") && !head["chrony_p99_over_p99"].is_null()) {
    beats = head["chrony_p99_over_p99"].get<double>() > 1;
  }
  line["goals"] = {{"p99_le_300ns", p99 && *p99 <= 300},
                   {"p50_le_100ns", p50 && *p50 <= 100},
                   {"p99_below_chrony", beats}};
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
