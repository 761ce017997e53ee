// Measurement: sampling every agent's /status in one burst every --sample-ms,
// counters before and after, and scoring against the ground truth.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "clocksync_testbed.h"

namespace lockstep::bench {
namespace {

constexpr int kHealthPort = 9610;

// utime + stime of a process, in seconds.
std::optional<double> CpuSeconds(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 > stat.size()) return std::nullopt;
  std::vector<std::string> fields;
  size_t p = paren + 2;
  while (p < stat.size()) {
    size_t sp = stat.find(' ', p);
    if (sp == std::string::npos) sp = stat.size();
    fields.push_back(stat.substr(p, sp - p));
    p = sp + 1;
  }
  if (fields.size() < 13) return std::nullopt;
  try {
    double ticks = static_cast<double>(std::stoll(fields[11]) + std::stoll(fields[12]));
    return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Bytes sent on rail0 of a host namespace.
std::optional<double> TxBytes(const std::string& ns) {
  if (::access(("/run/netns/" + ns).c_str(), F_OK) != 0) return std::nullopt;
  RunResult r = RunCapture({"ip", "-n", ns, "-j", "-s", "link", "show", "dev", "rail0"});
  if (r.rc != 0) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  try {
    return j.at(0).at("stats64").at("tx").at("bytes").get<double>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// Wall-clock seconds since the epoch (the agents' log timestamps).
double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

template <typename Map>
std::vector<double> Diffs(const Map& a, const Map& b, const std::vector<int>& idx, const std::set<int>& skip = {}) {
  std::vector<double> out;
  for (int i : idx) {
    if (a.count(i) && b.count(i) && !skip.count(i)) out.push_back(b.at(i) - a.at(i));
  }
  return out;
}

std::optional<double> Scaled(std::optional<double> v, double k) {
  if (!v) return std::nullopt;
  return *v * k;
}

}  // namespace

Snapshot Testbed::Snap(const std::vector<int>& idx) {
  Snapshot s;
  s.t = Now();
  std::vector<std::string> namespaces;
  for (int i : idx) namespaces.push_back(ns_[static_cast<size_t>(i)]);
  auto bodies = GetMany(netns_, namespaces, "/metrics", kHealthPort);
  for (int i : idx) {
    const auto& body = bodies[ns_[static_cast<size_t>(i)]];
    auto m = ParseMetrics(body.value_or(""));
    if (!m.empty()) s.metrics[i] = std::move(m);
    if (auto cpu = CpuSeconds(agents_[i].pid())) s.cpu_s[i] = *cpu;
    if (auto tx = TxBytes(ns_[static_cast<size_t>(i)])) s.tx_bytes[i] = *tx;
  }
  return s;
}

// Adds node i's /status to the round.
void Testbed::Record(int i, const nlohmann::json& s, Round& rnd) {
  if (!s.contains("virtual_clock")) Die("agent /status has no virtual_clock ground truth");
  try {
    const auto& vc = s.at("virtual_clock");
    int64_t true_offset = vc.at("true_offset_ns").get<int64_t>();
    int64_t base = vc.at("local_ns").get<int64_t>() - true_offset;
    if (!origin_) origin_ = base;
    Sample smp;
    smp.base_ns = static_cast<double>(base - *origin_);
    smp.err_ns = static_cast<double>(s.at("now_ns").get<int64_t>() - base);
    smp.bound_ns = static_cast<double>(s.at("error_bound_ns").get<int64_t>());
    smp.state = s.at("state").get<std::string>();
    smp.since_model_ns = s.value("since_model_ns", 0.0);
    smp.drift_ppb = s.value("drift_ppb", 0.0);
    smp.true_drift_ppb = vc.value("true_drift_ppb", 0.0);
    smp.true_offset_ns = static_cast<double>(true_offset);
    rnd[i] = smp;
  } catch (const nlohmann::json::exception& e) {
    Die("agent " + HostName(i) + ": unexpected /status: " + e.what());
  }
}

void Testbed::WriteRounds(const std::string& name, const std::vector<Round>& rounds) {
  std::ofstream f(work_ + "/rounds-" + name + ".jsonl");  // raw samples
  for (const auto& rnd : rounds) {
    nlohmann::ordered_json line = nlohmann::ordered_json::object();
    for (const auto& [i, s] : rnd) {
      line[HostName(i)] = {{"base", *origin_ + static_cast<int64_t>(s.base_ns)},
                           {"err", static_cast<int64_t>(s.err_ns)},
                           {"bound", static_cast<int64_t>(s.bound_ns)},
                           {"state", s.state},
                           {"since_model", static_cast<int64_t>(s.since_model_ns)},
                           {"drift_ppb", s.drift_ppb},
                           {"true_drift_ppb", s.true_drift_ppb},
                           {"true_offset", static_cast<int64_t>(s.true_offset_ns)}};
    }
    f << line.dump() << "\n";
  }
}

ScenarioResult Testbed::Measure(const std::string& name, double seconds, const std::vector<int>& idx,
                                const std::set<int>& exclude_bw, std::vector<Event> events) {
  std::stable_sort(events.begin(), events.end(), [](const Event& x, const Event& y) { return x.at_s < y.at_s; });
  Snapshot s0 = Snap(idx);
  double t0 = Now(), wall_t0 = WallNow();
  std::vector<Round> rounds;
  // chrony is sampled less often than the agents (each sample is a chronyc run).
  std::vector<ChronyRound> chrony_rounds;
  double next_chrony = t0;
  std::map<int, std::set<std::string>> states_seen;
  size_t next_event = 0;
  while (Now() - t0 < seconds) {
    while (next_event < events.size() && Now() - t0 >= events[next_event].at_s) events[next_event++].run();
    std::vector<int> live;
    for (int i : idx) {
      if (AgentAlive(i)) live.push_back(i);
    }
    Round rnd;
    for (const auto& [i, st] : StatusAll(live)) {
      if (!st) continue;
      states_seen[i].insert(st->value("state", ""));
      Record(i, *st, rnd);
    }
    rounds.push_back(std::move(rnd));
    if (a_.chrony && Now() >= next_chrony) {
      chrony_rounds.push_back(ChronyAll(idx));  // skips killed chronyds
      next_chrony += a_.chrony_sample_ms / 1000.0;
    }
    Sleep(a_.sample_ms / 1000.0);
  }
  while (next_event < events.size()) events[next_event++].run();  // not yet run (should not happen)
  const double wall_t1 = WallNow();
  std::optional<FabricPaths> fabric_end;  // --fabric: before the counters (s1 forks `ip` per host)
  if (a_.fabric) {
    std::vector<int> live;
    for (int i : idx) {
      if (AgentAlive(i)) live.push_back(i);
    }
    fabric_end = FabricAll(live);
  }
  Snapshot s1 = Snap(idx);
  WriteRounds(name, rounds);
  if (a_.chrony) WriteChronyRounds(name, chrony_rounds);

  ScenarioResult r;
  r.scenario = name;
  r.nodes = static_cast<int>(idx.size());
  r.rounds = rounds.size();
  r.pairs = ScorePairs(rounds);
  for (const auto& rnd : rounds) {
    for (const auto& [i, smp] : rnd) r.unsynced_samples += Scored(smp.state) ? 0 : 1;
  }
  if (r.pairs.worst) r.worst_pair = {HostName(r.pairs.worst->first), HostName(r.pairs.worst->second)};
  double dt = s1.t - s0.t;
  r.measure_s = dt;
  r.agent_cpu_percent = Scaled(Mean(Diffs(s0.cpu_s, s1.cpu_s, idx)), 100.0 / dt);
  r.probe_kbps_per_node = Scaled(Mean(Diffs(s0.tx_bytes, s1.tx_bytes, idx, exclude_bw)), 8.0 / dt / 1000.0);
  std::vector<double> sent, pure;
  for (int i : idx) {
    if (s0.metrics.count(i) && s1.metrics.count(i)) {
      sent.push_back(MetricSum(s1.metrics[i], "lockstep_probe_sent_total") -
                     MetricSum(s0.metrics[i], "lockstep_probe_sent_total"));
    }
    if (s1.metrics.count(i) && s1.metrics[i].count("lockstep_clock_pure_probe_fraction")) {
      pure.push_back(s1.metrics[i]["lockstep_clock_pure_probe_fraction"]);
    }
  }
  r.probe_pkts_per_s_per_node = Scaled(Mean(sent), 1.0 / dt);
  r.fabric = a_.fabric;
  if (a_.fabric) {
    // Fabric probes carry their acks; ack-only packets are counted apart.
    std::vector<double> fabric_sent, route_changes, misses;
    for (int i : idx) {
      if (!s0.metrics.count(i) || !s1.metrics.count(i)) continue;
      auto delta = [&](const char* name) { return MetricSum(s1.metrics[i], name) - MetricSum(s0.metrics[i], name); };
      fabric_sent.push_back(delta("lockstep_fabric_probes_sent_total") +
                            delta("lockstep_fabric_probes_answered_total"));
      route_changes.push_back(delta("lockstep_fabric_route_changes_total"));
      misses.push_back(delta("lockstep_fabric_probe_misses_total"));
    }
    r.fabric_probe_pkts_per_s_per_node = Scaled(Mean(fabric_sent), 1.0 / dt);
    if (!route_changes.empty()) {
      r.fabric_route_changes = 0;
      r.fabric_misses = 0;
      for (double v : route_changes) *r.fabric_route_changes += v;
      for (double v : misses) *r.fabric_misses += v;
    }
    r.fabric_paths = fabric_end->paths;
    r.fabric_paths_up = fabric_end->up;
    r.fabric_path_downs = FabricDownsLogged(idx, wall_t0, wall_t1);
  }
  r.pure_probe_fraction = Mean(pure);
  if (!pure.empty()) r.pure_probe_fraction_min = *std::min_element(pure.begin(), pure.end());
  std::set<std::string> not_locked;
  for (const auto& [i, states] : states_seen) {
    for (const auto& st : states) {
      if (!st.empty() && st != "LOCKED") not_locked.insert(HostName(i) + ":" + st);
    }
  }
  r.non_locked_states_seen.assign(not_locked.begin(), not_locked.end());
  if (a_.chrony) r.chrony = ScoreChrony(chrony_rounds, a_.chrony_server);
  return r;
}

}  // namespace lockstep::bench
