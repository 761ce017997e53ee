// The scenarios, run in the order c a b e d on the same agents:
//   c  late join: all but the last agent start together, the last later
//   a  idle fabric
//   b  asymmetric bursty load through one shaped leaf->spine direction
//   e  one host's only probe path down for a few seconds
//   d  one agent killed; the rest must stay LOCKED with unchanged error
#include <signal.h>

#include <algorithm>
#include <optional>
#include <cstdio>

#include "clocksync_testbed.h"

namespace lockstep::bench {
namespace {

constexpr int kProbePort = 7311, kLoadPort = 9000;

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The links of a `netlab path --json` answer (empty if it is not one).
std::vector<std::string> PathLinks(const std::string& out) {
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("links") || !j["links"].is_array()) return {};
  std::vector<std::string> links;
  for (const auto& l : j["links"]) {
    if (l.is_string()) links.push_back(l.get<std::string>());
  }
  return links;
}

}  // namespace

std::map<char, ScenarioResult> Testbed::Run() {
  const int n = a_.hosts;
  Up();
  WriteConfigs();
  std::map<char, ScenarioResult> results;
  const int late = n - 1;
  std::vector<int> first, everyone;
  for (int i = 0; i < n; ++i) everyone.push_back(i);
  for (int i = 0; i < (a_.Has('c') ? n - 1 : n); ++i) first.push_back(i);
  std::vector<std::string> names;
  for (int i : first) names.push_back(HostName(i));
  Log("starting agents " + Names(names));
  for (int i : first) StartAgent(i);
  if (a_.chrony) {
    Log("starting chronyd -x: server " + HostName(a_.chrony_server) + ", every other host a client");
    StartChrony(a_.chrony_server);
    for (int i : first) {
      if (i != a_.chrony_server) StartChrony(i);
    }
  }
  double t_start = Now();
  std::map<int, double> tl_first, tl_late;
  if (a_.Has('c')) {
    tl_first = WaitLocked(first, a_.late_join_s);
    Sleep(a_.late_join_s - (Now() - t_start));
    Log("late join: starting " + HostName(late) + Fmt(" %.1f s after the others", Now() - t_start));
    StartAgent(late);
    if (a_.chrony && late != a_.chrony_server) StartChrony(late);
    std::vector<int> waiting = {late};
    for (int i : first) {
      if (!tl_first.count(i)) waiting.push_back(i);
    }
    tl_late = WaitLocked(waiting, a_.lock_timeout_s);
    for (const auto& [i, t] : tl_late) {
      if (i != late) tl_first[i] = t;
    }
  } else {
    tl_first = WaitLocked(first, a_.lock_timeout_s);
  }
  std::vector<std::string> missing;
  std::vector<double> times;
  for (int i : first) {
    if (!tl_first.count(i)) missing.push_back(HostName(i));
  }
  if (!missing.empty()) {
    CheckAlive(first);
    Die("agents never reached LOCKED within the timeout: " + Names(missing) + " (logs in " + work_ + ")");
  }
  for (const auto& [i, t] : tl_first) times.push_back(t);
  double ttl_all = *std::max_element(times.begin(), times.end());
  std::string slowest;
  for (const auto& [i, t] : tl_first) {
    if (t == ttl_all) slowest = HostName(i);
  }
  Log("all initial agents LOCKED; time to LOCKED max " + Fmt("%.1f s", ttl_all) + " (" + slowest + "), median " +
      Fmt("%.1f s", Median(times)));
  if (a_.chrony) {
    std::vector<int> started = first;
    if (a_.Has('c')) started.push_back(late);
    if (!WaitChronySynced(started, a_.lock_timeout_s)) {
      Die("chrony did not synchronise every client within the timeout (logs in " + work_ + "/chrony-*)");
    }
    Log("every chronyd synchronised");
  }
  if (a_.fabric) {
    std::vector<int> started = first;
    if (a_.Has('c')) started.push_back(late);
    WaitFabricUp(started, a_.lock_timeout_s);
  }
  // chrony's time to its first synchronised tracking, timed like the agents'
  // time to LOCKED (from each daemon's start): the slowest initial client,
  // and the late one for c. The server is its own reference (stratum 1).
  std::optional<double> chrony_first_all, chrony_first_late;
  if (a_.chrony) {
    for (int i : first) {
      if (i == a_.chrony_server || !chrony_first_sync_.count(i)) continue;
      chrony_first_all = std::max(chrony_first_all.value_or(0.0), chrony_first_sync_[i]);
    }
    if (a_.Has('c') && late != a_.chrony_server && chrony_first_sync_.count(late)) {
      chrony_first_late = chrony_first_sync_[late];
    }
    Log("chrony's first sync: slowest initial client " + (chrony_first_all ? Fmt("%.1f s", *chrony_first_all) : "-") +
        (a_.Has('c') ? ", late host " + (chrony_first_late ? Fmt("%.1f s", *chrony_first_late) : "-") : ""));
  }
  if (a_.settle_s > 0) {
    Log(Fmt("settling %.0f s before measuring", a_.settle_s));
    Sleep(a_.settle_s);
  }

  if (a_.Has('c')) {
    if (!tl_late.count(late)) Die("late agent " + HostName(late) + " never reached LOCKED (logs in " + work_ + ")");
    Log("late agent LOCKED " + Fmt("%.1f s", tl_late[late]) + " after it started");
    ScenarioResult r = Measure("c_late_join", a_.short_measure_s, everyone);
    r.time_to_locked_s = tl_late[late];
    r.chrony_time_to_first_sync_s = chrony_first_late;
    r.note = HostName(late) + Fmt(" started %.0f s after the others", a_.late_join_s);
    results['c'] = r;
  }
  if (a_.Has('a')) {
    results['a'] = Measure("a_idle", a_.measure_s, everyone);
    results['a'].time_to_locked_s = ttl_all;
    results['a'].chrony_time_to_first_sync_s = chrony_first_all;
  }
  if (a_.Has('b')) {
    results['b'] = ScenarioLoad(everyone);
    results['b'].time_to_locked_s = ttl_all;
    results['b'].chrony_time_to_first_sync_s = chrony_first_all;
  }
  if (a_.Has('e')) {
    results['e'] = ScenarioLinkDown(everyone);
    results['e'].time_to_locked_s = ttl_all;
    results['e'].chrony_time_to_first_sync_s = chrony_first_all;
  }
  if (a_.Has('d')) {
    results['d'] = ScenarioNodeDies(everyone);
    results['d'].time_to_locked_s = ttl_all;
    results['d'].chrony_time_to_first_sync_s = chrony_first_all;
  }
  return results;
}

// A source port whose flow src -> dst:kLoadPort is routed over `link`.
int Testbed::PickLoadPort(int src, int dst, const std::string& link) {
  for (int p = 40000; p < 40064; ++p) {
    std::string out = NetlabCmd({"path", "--name", a_.name, HostName(src), HostName(dst), "--sport",
                                 std::to_string(p), "--dport", std::to_string(kLoadPort), "--json"},
                                false);
    std::vector<std::string> links = PathLinks(out);
    if (std::find(links.begin(), links.end(), link) != links.end()) return p;
  }
  Die("no source port routes " + HostName(src) + "->" + HostName(dst) + " over " + link);
}

// The probe directions (i->j) that go up through `link` (leaf->spine).
std::vector<std::string> Testbed::ProbeFlowsThrough(const std::string& link) {
  std::vector<std::string> crossing;
  for (int i = 0; i < a_.hosts; ++i) {
    for (int j = 0; j < a_.hosts; ++j) {
      if (i == j) continue;
      std::string out = NetlabCmd({"path", "--name", a_.name, HostName(i), HostName(j), "--sport",
                                   std::to_string(kProbePort), "--dport", std::to_string(kProbePort), "--json"},
                                  false);
      std::vector<std::string> links = PathLinks(out);
      auto it = std::find(links.begin(), links.end(), link);
      if (it == links.end() || it == links.begin() || it + 1 == links.end()) continue;
      if ((it - 1)->rfind("h", 0) == 0) crossing.push_back(HostName(i) + "->" + HostName(j));
    }
  }
  return crossing;
}

ScenarioResult Testbed::ScenarioLoad(const std::vector<int>& everyone) {
  std::string loadgen = tools_.Loadgen();
  // Load from h0 (leaf l0) to h1 (leaf l1) over spine s0: shape l0->s0 only.
  const int src = 0, dst = 1;
  std::string leaf = topo_["hosts"][src]["rails"][0]["leaf"].get<std::string>();
  std::string link = leaf + "s0";
  int sport = PickLoadPort(src, dst, link);
  double rate = a_.shape_mbit * 1e6;
  double on_rate = rate * a_.load_fraction * 2;  // 50% duty cycle: mean = load_fraction * rate
  std::vector<std::string> crossing = ProbeFlowsThrough(link);
  std::string shape = Fmt("%g", a_.shape_mbit), burst = Fmt("%g", a_.burst_ms);
  Log("shaping " + link + " up (leaf->spine) to " + shape + " mbit (tbf); loadgen " + HostName(src) + "->" +
      HostName(dst) + " sport " + std::to_string(sport) + ": " + Fmt("%.0f", on_rate / 1e6) +
      " mbit bursts, exp on/off " + burst + "/" + burst + " ms (mean " + Fmt("%.0f", a_.load_fraction * 100) +
      "% of the shaped rate); " + std::to_string(crossing.size()) + " probe directions cross it");
  NetlabCmd({"shape", "--name", a_.name, link, "--rate", shape + "mbit", "--dir", "up"});
  double dur = a_.load_warmup_s + a_.measure_s + 5;
  const std::string& src_ip = ip0_[src];
  const std::string& dst_ip = ip0_[dst];
  aux_.push_back(Child::Spawn({loadgen, "sink", "--bind", dst_ip + ":" + std::to_string(kLoadPort), "--duration",
                               Fmt("%g", dur + 2), "--ns", ns_[dst]},
                              work_ + "/loadgen-sink.json"));
  aux_.push_back(Child::Spawn({loadgen, "send", "--to", dst_ip + ":" + std::to_string(kLoadPort), "--bind", src_ip,
                               "--sport", std::to_string(sport), "--flows", "1", "--rate",
                               Fmt("%.1fmbit", on_rate / 1e6), "--size", "1200", "--on-ms", burst, "--off-ms", burst,
                               "--pattern", "exp", "--seed", std::to_string(a_.seed), "--duration", Fmt("%g", dur),
                               "--ns", ns_[src]},
                              work_ + "/loadgen-send.json"));
  auto counters = [&] {
    nlohmann::json c = nlohmann::json::parse(NetlabCmd({"counters", "--name", a_.name, "--links", link}), nullptr,
                                             false);
    if (c.is_discarded() || !c.contains(link)) Die("netlab counters: no counters for " + link);
    return c[link];
  };
  nlohmann::json c0 = counters();
  Sleep(a_.load_warmup_s);
  ScenarioResult r = Measure("b_asym_bursty_load", a_.measure_s, everyone, {src});
  nlohmann::json c1 = counters();
  for (auto& c : aux_) c.Stop(3);
  NetlabCmd({"shape", "--name", a_.name, link, "--clear", "--dir", "up"});
  double span = a_.load_warmup_s + RoundTo(r.measure_s, 1);
  double up_mbit = (c1.value("up_bytes", 0.0) - c0.value("up_bytes", 0.0)) * 8 / span / 1e6;
  long long drops = c1.value("a_tx_dropped", 0LL) - c0.value("a_tx_dropped", 0LL);
  r.note = "tbf " + shape + " mbit on " + link + " (leaf->spine); loadgen mean " +
           Fmt("%.0f", a_.load_fraction * 100) + "% in exp " + burst + " ms bursts at " + Fmt("%.0f", on_rate / 1e6) +
           " mbit; measured " + Fmt("%.1f", up_mbit) + " mbit through it, " + std::to_string(drops) +
           " tbf drops; probe directions through it: " + std::to_string(crossing.size());
  r.shaped_link_mbit = up_mbit;
  r.probe_directions_through_shaped_link = crossing;
  return r;
}

ScenarioResult Testbed::ScenarioLinkDown(const std::vector<int>& everyone) {
  int victim = std::min(3, a_.hosts - 1);
  std::string link = topo_["hosts"][victim]["rails"][0]["link"].get<std::string>();
  double down_at = 2.0, up_at = 2.0 + a_.link_down_s;
  auto flap = [this, link](const std::string& state) {
    Log("netlab link " + link + " " + state);
    NetlabCmd({"link", "--name", a_.name, link, state});
  };
  std::vector<Event> events = {{down_at, [flap] { flap("down"); }}, {up_at, [flap] { flap("up"); }}};
  ScenarioResult r = Measure("e_link_down", a_.short_measure_s + a_.link_down_s + 2, everyone, {}, events);
  r.note = link + " (host " + HostName(victim) + " rail 0, its only probe path) down " +
           Fmt("%.0f s", a_.link_down_s);
  return r;
}

ScenarioResult Testbed::ScenarioNodeDies(const std::vector<int>& everyone) {
  int victim = std::min(5, a_.hosts - 1);
  Log("killing agent " + HostName(victim) + " (pid " + std::to_string(agents_[victim].pid()) + ")");
  agents_[victim].Signal(SIGKILL);
  agents_[victim].WaitFor(5);
  if (a_.chrony && victim != a_.chrony_server) StopChrony(victim);  // a client dies with its host
  std::vector<int> rest;
  for (int i : everyone) {
    if (i != victim) rest.push_back(i);
  }
  ScenarioResult r = Measure("d_node_dies", a_.short_measure_s + 4, rest);
  r.note = HostName(victim) + " killed (SIGKILL) at the start; scored over the other " + std::to_string(rest.size());
  if (a_.chrony && victim != a_.chrony_server) r.note += "; its chronyd (a client) killed too";
  return r;
}

}  // namespace lockstep::bench
