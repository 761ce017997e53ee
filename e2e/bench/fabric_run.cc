#include "fabric_run.h"

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "clocksync_proc.h"

namespace lockstep::bench::fabric {
namespace {

using nlohmann::json;

constexpr int kStreamPort = 5001;
constexpr int kMasterPort = 29500;
constexpr int kProbePort = 7312;  // the agents' fabric.port (default)

double Wall() {
  timeval tv{};
  ::gettimeofday(&tv, nullptr);
  return double(tv.tv_sec) + double(tv.tv_usec) / 1e6;
}

std::string Netlab(const Tools& t, std::vector<std::string> args) {
  args.insert(args.begin(), t.netlab);
  const RunResult r = RunCapture(args);
  if (r.rc != 0) {
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    Die("netlab failed (" + std::to_string(r.rc) + "): " + cmd + ": " + r.err);
  }
  return r.out;
}

// `netlab link`: when the link changed. netlab logs "(changed at B, after A)":
// the change happened between A (its `ip` command started) and B (it
// returned), before routes re-converge. Returns A (so detection and failover
// times are upper bounds) and sets `spread` to B - A; `fallback` if absent.
double NetlabLink(const Tools& t, std::vector<std::string> args, double fallback, double* spread = nullptr) {
  args.insert(args.begin(), t.netlab);
  const RunResult r = RunCapture(args);
  if (r.rc != 0) {
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    Die("netlab failed (" + std::to_string(r.rc) + "): " + cmd + ": " + r.err);
  }
  const auto c = ParseLinkChange(r.err);
  if (!c) return fallback;
  if (spread) *spread = c->at - c->after;
  return c->after;
}

// A flap train run by one `netlab link LINK flap` process (its stdout and
// stderr to `log`): on_change is called once netlab logged its first change
// (while the train goes on); returns when the train is over.
struct FlapTrain {
  double last_up = 0;  // netlab's `asked` of the last up
  std::vector<double> downs;  // netlab's `asked` of every down
  nlohmann::ordered_json achieved;
};

FlapTrain RunFlapTrain(const Tools& t, const std::string& lab, const std::string& link, const Action& a,
                       const std::string& log, const std::function<void(const LinkChange&)>& on_change) {
  char period_ms[32], down_ms[32];
  std::snprintf(period_ms, sizeof period_ms, "%.3f", a.period_s * 1000);
  std::snprintf(down_ms, sizeof down_ms, "%.3f", a.down_s * 1000);
  Child c = Child::Spawn({t.netlab, "link", "--name", lab, link, "flap", "--count", std::to_string(a.count),
                          "--period-ms", period_ms, "--down-ms", down_ms},
                         log);
  const double planned = (a.count - 1) * a.period_s + a.down_s;
  bool seen = false;
  while (!seen && c.Alive()) {
    if (const auto first = ParseLinkChange(ReadFile(log))) {
      seen = true;
      on_change(*first);
    } else {
      Sleep(0.005);
    }
  }
  if (!c.WaitFor(planned + 60)) {
    c.Stop(2);
    Die("netlab link " + link + " flap did not end in " + std::to_string(int(planned + 60)) + " s; see " + log);
  }
  // Its report is the JSON line among netlab's log lines.
  std::istringstream lines(ReadFile(log));
  json report;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '{') report = json::parse(line, nullptr, false);
  }
  if (c.ExitCode() != 0 || !report.is_object() || !report.contains("achieved")) {
    Die("netlab link " + link + " flap failed (" + std::to_string(c.ExitCode()) + "); see " + log);
  }
  if (!seen) {
    if (const auto first = ParseLinkChange(ReadFile(log))) on_change(*first);
  }
  FlapTrain f;
  for (const auto& e : report["events"]) {
    if (e.value("action", "") == "up") f.last_up = e.value("asked", 0.0);
    if (e.value("action", "") == "down") f.downs.push_back(e.value("asked", 0.0));
  }
  f.achieved = nlohmann::ordered_json::parse(report["achieved"].dump());
  return f;
}

// The lab of one run: up on construction, down (with every process left in
// its namespaces) on destruction, even when the run throws.
class LabGuard {
 public:
  LabGuard(const Tools& t, const Options& o, int leaves) : t_(t) {
    info_.name = "fb" + std::to_string(::getpid() % 100000);
    std::vector<std::string> up = {"up",     "--name",   info_.name, "--hosts",     std::to_string(o.hosts),
                                   "--rails", "2",     "--leaves", std::to_string(leaves),        "--spines", "2",
                                   "--link-rate", o.link_rate, "--replace"};
    if (o.napi_threads) up.push_back("--napi-threads");
    const std::string path = Netlab(t, up);
    std::string p = path;
    p.erase(p.find_last_not_of(" \n") + 1);
    const json j = json::parse(ReadFile(p), nullptr, false);
    auto topo = netlab::TopologyFromJson(j);
    if (!topo.ok()) Die("cannot read " + p + ": " + topo.error().message);
    info_.topo = std::move(*topo);
    // A shallow queue on every host link, as in a datacenter fabric (netlab's
    // default tbf queue is 50 ms: a bulk stream then delays whatever shares
    // the link, probes included, by up to 50 ms).
    for (const auto& h : info_.topo.hosts) {
      for (const auto& r : h.rails) {
        Netlab(t, {"shape", "--name", info_.name, r.link, "--rate", o.link_rate, "--latency",
                   std::to_string(o.queue_ms) + "ms", "--dir", "both"});
      }
    }
  }
  LabGuard(const LabGuard&) = delete;
  LabGuard& operator=(const LabGuard&) = delete;
  ~LabGuard() { RunCapture({t_.netlab, "down", "--name", info_.name}); }
  const LabInfo& info() const { return info_; }

 private:
  const Tools& t_;
  LabInfo info_;
};

// Children that must not outlive the run.
class Children {
 public:
  Child& Add(Child c) {
    all_.push_back(std::make_unique<Child>(c));
    return *all_.back();
  }
  ~Children() {
    for (auto& c : all_) c->Stop(2);
  }

 private:
  std::vector<std::unique_ptr<Child>> all_;
};

std::vector<std::string> InNs(const std::string& ns, std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
  return argv;
}

// Polls until `ready` or `timeout_s`; false on timeout.
template <typename F>
bool WaitUntil(double timeout_s, F ready) {
  const double end = Now() + timeout_s;
  while (Now() < end) {
    if (ready()) return true;
    Sleep(0.2);
  }
  return ready();
}

long long HostLinkUpBytes(const Tools& t, const std::string& lab, const std::string& link) {
  const json c = json::parse(Netlab(t, {"counters", "--name", lab, "--links", link}), nullptr, false);
  if (!c.is_object() || !c.contains(link)) Die("netlab counters: no " + link);
  return c[link].value("up_bytes", 0LL);
}


// The links a probe of `from`'s agent takes to `to` out of `rail` on path
// `index` (the agents send from the host address to the peer's host address,
// from the path's source port to fabric.port, bound to the rail's
// interface), by the lab's FIB.
std::vector<std::string> ProbeLinks(const Tools& t, const std::string& lab, const netlab::Host& from,
                                    const netlab::Host& to, const std::string& rail, int index) {
  const std::string port = std::to_string(kProbePort);
  const std::string sport = std::to_string(index == 0 ? kProbePort : kProbePort + index);
  const json p = json::parse(Netlab(t, {"path", "--name", lab, from.addr, to.addr, "--proto", "udp", "--sport", sport,
                                        "--dport", port, "--oif", rail, "--json"}),
                             nullptr, false);
  std::vector<std::string> links;
  if (p.is_object() && p.contains("links")) {
    for (const auto& l : p["links"]) links.push_back(l.get<std::string>());
  }
  return links;
}

}  // namespace

std::vector<PathRef> AffectedPaths(const Tools& t, const LabInfo& info, const std::string& link, int paths_per_rail) {
  std::vector<PathRef> out;
  const auto& hosts = info.topo.hosts;
  for (const auto& a : hosts) {
    for (const auto& b : hosts) {
      if (a.name == b.name) continue;
      for (size_t r = 0; r < a.rails.size(); ++r) {
        for (int i = 0; i < std::max(1, paths_per_rail); ++i) {
          const auto there = ProbeLinks(t, info.name, a, b, a.rails[r].ifname, i);
          bool crosses = std::find(there.begin(), there.end(), link) != there.end();
          // The acks come back on the peer's probes (of the same index,
          // mostly) out of the interface the probes arrived on.
          std::string back_rail;
          for (const auto& br : b.rails) {
            if (!there.empty() && br.link == there.back()) back_rail = br.ifname;
          }
          if (!crosses && !back_rail.empty()) {
            const auto back = ProbeLinks(t, info.name, b, a, back_rail, i);
            crosses = std::find(back.begin(), back.end(), link) != back.end();
          }
          if (crosses) out.push_back({a.name, b.name + "/rail" + std::to_string(r) + "/path" + std::to_string(i)});
        }
      }
    }
  }
  return out;
}

void TuneStaticHosts(const LabInfo& info) {
  for (const auto& h : info.topo.hosts) {
    std::vector<std::string> cmd = {"ip", "netns", "exec", h.ns, "sysctl", "-qw",
                                    "net.ipv4.conf.all.ignore_routes_with_linkdown=1",
                                    "net.ipv4.conf.default.ignore_routes_with_linkdown=1"};
    for (const auto& r : h.rails) cmd.push_back("net.ipv4.conf." + r.ifname + ".ignore_routes_with_linkdown=1");
    if (const RunResult rr = RunCapture(cmd); rr.rc != 0) Die("static_tuned: sysctl in " + h.ns + ": " + rr.err);
    // netlab's static-ECMP route (routes.cc HostEcmpRoute) with rto_min 10ms.
    std::vector<std::string> route = {"ip", "-n", h.ns, "route", "replace", info.topo.host_subnet, "src", h.addr,
                                      "proto", "static", "rto_min", "10ms"};
    for (const auto& r : h.rails) route.insert(route.end(), {"nexthop", "via", r.gateway, "dev", r.ifname, "onlink"});
    if (const RunResult rr = RunCapture(route); rr.rc != 0) Die("static_tuned: ip route in " + h.ns + ": " + rr.err);
  }
}


std::vector<Scenario> Scenarios(const Options& o) {
  const double f = o.fault_s;
  std::vector<Scenario> out;
  out.push_back({"link-down", "the sender's rail link (the one its stream uses) goes down (carrier loss) for " +
                                  std::to_string(int(f)) + " s",
                 {{0, Role::kSenderLink, "down"}, {f, Role::kSenderLink, "up"}}, f + 5, false});
  // A real flap train (a marginal optic, a bad cable): the link drops, spends
  // seconds retraining, comes up briefly and drops again. Down periods of a
  // few seconds outlast TCP's early retransmissions, so a blackholed flow's
  // backoff grows past the brief up windows and keeps missing them. One
  // `netlab link ... flap` process keeps the timetable (one `netlab link` per
  // change took ~340 ms each under load) and reports what it achieved.
  const double period = o.flap_down_s + o.flap_up_s;
  char what[128];
  std::snprintf(what, sizeof what, "the same link flaps 10 times (%g s down, %g s up)", o.flap_down_s, o.flap_up_s);
  Action train{0, Role::kSenderLink, "flap"};
  train.count = 10;
  train.period_s = period;
  train.down_s = o.flap_down_s;
  out.push_back({"flap", what, {train}, 10 * period + 5, false});
  out.push_back({"rail-down", "the receiver's rail (NIC) that its traffic back to the sender leaves by goes down for " +
                                  std::to_string(int(f)) + " s",
                 {{0, Role::kReceiverLink, "down"}, {f, Role::kReceiverLink, "up"}}, f + 5, false});
  out.push_back({"repair", "the sender's link down for 5 s, then repaired: is it used again?",
                 {{0, Role::kSenderLink, "down"}, {5, Role::kSenderLink, "up"}}, 15, true});
  out.push_back({"silent", "the sender's link drops every packet, carrier and routes stay up, for " +
                               std::to_string(int(f)) + " s",
                 {{0, Role::kSenderLink, "silent"}, {f, Role::kSenderLink, "up"}}, f + 5, false});
  // Faults the sender's kernel cannot see. The far side: the link the stream
  // arrives on at the receiver loses carrier (the fabric withdraws it and
  // reroutes the stream to the receiver's other link over a spine).
  out.push_back({"far-link-down", "the receiver's link the stream arrives on goes down (carrier loss) for " +
                                      std::to_string(int(f)) + " s",
                 {{0, Role::kReceiverInLink, "down"}, {f, Role::kReceiverInLink, "up"}}, f + 5, false});
  // A gray failure inside the fabric: with 4 leaves h0 and h2 share none, so
  // the stream crosses a spine; the first leaf-spine link on its path drops
  // everything with carrier and routes up (ECMP keeps hashing onto it).
  Scenario gray{"fabric-gray", "the leaf-spine link on the stream's path (h0 -> h2, 4 leaves) drops every packet, "
                               "carrier and routes up, for " + std::to_string(int(f)) + " s",
                {{0, Role::kFabricLink, "silent"}, {f, Role::kFabricLink, "up"}}, f + 5, false};
  gray.leaves = 4;
  gray.stream_to = 2;
  out.push_back(gray);
  // One direction: the sender's link drops what the sender sends (data
  // lost, acks and probes towards the sender still arrive).
  Action one{0, Role::kSenderLink, "silent"};
  one.one_way = "up";
  out.push_back({"one-way", "the sender's link drops what the sender sends (the other direction flows), carrier "
                            "and routes up, for " + std::to_string(int(f)) + " s",
                 {one, {f, Role::kSenderLink, "up"}}, f + 5, false});
  return out;
}

ArmResult RunArm(const Tools& tools, const Options& o, const Scenario& sc, const Arm& arm) {
  ArmResult res;
  res.arm = arm.name;
  if (!arm.implemented) {
    res.note = arm.note;
    return res;
  }
  LabGuard lab(tools, o, sc.leaves);
  const std::string prefix = o.workdir + "/" + sc.name + "-" + arm.name;
  LabInfo info = lab.info();
  info.log_prefix = prefix;
  const auto& hosts = info.topo.hosts;
  if (arm.start) arm.start(info);
  struct StopArm {
    const Arm& a;
    const LabInfo& i;
    ~StopArm() {
      if (a.stop) a.stop(i);
    }
  } stop_arm{arm, info};

  Children kids;
  const std::string sink_log = prefix + "-stream.jsonl";
  const auto& receiver = hosts[size_t(sc.stream_to)];
  const std::string rname = receiver.name;
  const std::string dst = receiver.addr + ":" + std::to_string(kStreamPort);
  Child& sink = kids.Add(Child::Spawn(
      InNs(receiver.ns, {tools.bulk_stream, "sink", "--bind", dst, "--log", sink_log, "--duration", "3600"}),
      prefix + "-sink.out"));
  Sleep(0.3);
  const std::string send_out = prefix + "-send.out";
  Child& sender = kids.Add(Child::Spawn(
      InNs(hosts[0].ns, {tools.bulk_stream, "send", "--bind", hosts[0].addr, "--to", dst, "--duration", "3600"}),
      send_out));
  std::vector<Child*> ranks;
  for (int r = 0; r < int(hosts.size()); ++r) {
    ranks.push_back(&kids.Add(Child::Spawn(
        InNs(hosts[r].ns, {tools.python, tools.ddp_loop, "--rank", std::to_string(r), "--world-size",
                           std::to_string(hosts.size()), "--addr", hosts[r].addr, "--ifname", hosts[r].addr_if,
                           "--master-addr", hosts[0].addr, "--master-port", std::to_string(kMasterPort), "--hidden",
                           std::to_string(o.hidden), "--batch", std::to_string(o.batch), "--duration", "3600",
                           "--hang-s", std::to_string(o.hang_s)}),
        prefix + "-rank" + std::to_string(r) + ".jsonl")));
  }
  const std::string rank0 = prefix + "-rank0.jsonl";
  if (!WaitUntil(180, [&] {  // torch imports slowly on a loaded machine
        LoopLog l;
        ParseLoopLog(ReadFile(rank0), l);
        return l.steps.size() >= 5 || !l.errors.empty();
      })) {
    Die("the DDP loop made no 5 steps in 180 s; see " + rank0);
  }
  Sleep(o.warmup_s);

  // The stream's real 5-tuple, its path by the FIB, and the busiest link by counters.
  const std::string sout = ReadFile(send_out);
  const auto at = sout.find("connected ");
  if (at == std::string::npos) Die("the bulk stream did not connect; see " + send_out);
  const std::string local = sout.substr(at + 10, sout.find(' ', at + 10) - at - 10);
  const std::string sport = local.substr(local.rfind(':') + 1);
  // The stream's path by the FIB (the agents' /32 pins included: netlab path
  // asks `ip route get` for the real 5-tuple), checked against the byte
  // counters over the next second and asked again after it: an agent that
  // moved the stream meanwhile (a path it declared down) makes them disagree,
  // and the check is repeated (up to 5 times) so the fault hits the link that
  // carries the stream.
  const auto stream_path = [&] {
    const json path = json::parse(Netlab(tools, {"path", "--name", info.name, "h0a", rname + "a", "--proto", "tcp",
                                                 "--sport", sport, "--dport", std::to_string(kStreamPort), "--json"}),
                                  nullptr, false);
    if (!path.is_object() || path["links"].size() < 2) Die("netlab path gave no links for the stream");
    std::vector<std::string> links;
    for (const auto& l : path["links"]) links.push_back(l.get<std::string>());
    return links;
  };
  std::vector<std::string> links;
  for (int attempt = 1;; ++attempt) {
    links = stream_path();
    std::map<std::string, long long> before;
    for (const auto& r : hosts[0].rails) before[r.link] = HostLinkUpBytes(tools, info.name, r.link);
    Sleep(1);
    long long most = -1;
    for (const auto& r : hosts[0].rails) {
      const long long d = HostLinkUpBytes(tools, info.name, r.link) - before[r.link];
      if (d > most) {
        most = d;
        res.busiest_link = r.link;
      }
    }
    const auto again = stream_path();
    if (again == links && res.busiest_link == links.front()) break;
    Log(sc.name + " / " + arm.name + ": the stream moved while it was located (FIB " + links.front() + " then " +
        again.front() + ", counters " + res.busiest_link + "); attempt " + std::to_string(attempt));
    if (attempt == 5) {
      res.path_checked = false;
      links = again;
      break;
    }
  }
  for (const auto& l : links) res.stream_path += (res.stream_path.empty() ? "" : " ") + l;
  // The receiver's link its traffic back to the sender leaves by (the
  // stream's acks; with the hosts' L3 hash, every h1 -> h0 flow, gloo's
  // included): the one whose loss the baseline cannot route around. The link
  // the stream arrives on may be h1's other rail, whose loss the fabric
  // repairs for the baseline too (its leaf reroutes over a spine).
  const json back = json::parse(Netlab(tools, {"path", "--name", info.name, rname + "a", "h0a", "--proto", "tcp", "--sport",
                                               std::to_string(kStreamPort), "--dport", sport, "--json"}),
                                nullptr, false);
  if (!back.is_object() || back["links"].empty()) Die("netlab path gave no links for the stream's acks");
  const std::string sender_link = links.front(), receiver_link = back["links"].front().get<std::string>();
  std::string fabric_link;  // the first leaf-spine link the stream crosses
  for (const auto& l : links) {
    const netlab::Link* lk = netlab::FindLink(info.topo, l);
    if (fabric_link.empty() && lk && lk->kind == "fabric") fabric_link = l;
  }

  // The faults, on their timetable.
  const auto link_of = [&](Role role) -> std::string {
    switch (role) {
      case Role::kSenderLink: return sender_link;
      case Role::kReceiverLink: return receiver_link;
      case Role::kReceiverInLink: return links.back();
      case Role::kFabricLink:
        if (fabric_link.empty()) Die(sc.name + ": the stream crosses no leaf-spine link (" + res.stream_path + ")");
        return fabric_link;
    }
    return sender_link;
  };
  res.link = link_of(sc.actions.front().role);
  info.faulted_link = res.link;
  // The agents' probe paths that cross it (only for an arm that reports on them).
  if (arm.report) info.affected = AffectedPaths(tools, info, res.link, o.paths_per_rail);
  // The stream's TCP state just before the fault (ss -tin: rto, rtt): its
  // retransmission timer decides when it resumes after a path change.
  {
    const RunResult ss = RunCapture(InNs(hosts[0].ns, {"ss", "-tinH", "src", local}));
    WriteFile(prefix + "-ss-before-fault.txt", ss.out);
    const auto at = ss.out.find(" rto:");
    if (at != std::string::npos) res.stream_rto_ms = std::atof(ss.out.c_str() + at + 5);
  }
  Log(sc.name + " / " + arm.name + ": fault on " + res.link + " (stream " + local + " -> " + dst + " via " +
      res.stream_path + ")");
  Window w{0, 0, 0, o.hang_s, {}};
  const double t0 = Now();
  long long at_repair = 0;
  // How the stream's TCP recovers: its socket (ss -tin) and h0's qdiscs,
  // sampled for 0.6 s after the first fault (for the logs, not the score).
  const auto first_fault = [&](double at, double asked, double spread) {
    w.fault = at;
    res.fault_lag_ms = (at - asked) * 1000;
    res.fault_spread_ms = spread * 1000;
    char b[64];
    std::snprintf(b, sizeof b, "%.6f", at);
    Log(sc.name + " / " + arm.name + ": fault at " + b);
    std::string trace;
    const double until = Wall() + 0.6;
    while (Wall() < until) {
      char t[64];
      std::snprintf(t, sizeof t, "@%.3f\n", Wall() - w.fault);
      trace += t + RunCapture(InNs(hosts[0].ns, {"ss", "-tinmH", "src", local})).out;
    }
    trace += "qdiscs:\n" + RunCapture({"tc", "-n", hosts[0].ns, "-s", "qdisc", "show"}).out;
    WriteFile(prefix + "-ss-after-fault.txt", trace);
  };
  // Times are netlab's: when the link really changed (not when we asked).
  for (const auto& a : sc.actions) {
    Sleep(std::max(0.0, t0 + a.at - Now()));
    const std::string link = link_of(a.role);
    if (a.what == "flap") {
      const double asked = Wall();
      const FlapTrain f = RunFlapTrain(tools, info.name, link, a, prefix + "-flap.out", [&](const LinkChange& c) {
        if (w.fault == 0) first_fault(c.after, asked, c.at - c.after);
      });
      w.repair = f.last_up;
      res.flap_timing = f.achieved;
      w.faults = f.downs;
      if (!w.faults.empty()) w.faults.front() = w.fault;  // the first as for a single fault: netlab's `ip` start
      continue;
    }
    if (a.what == "up") {
      w.repair = NetlabLink(tools, {"link", "--name", info.name, link, "up"}, Wall());
      at_repair = HostLinkUpBytes(tools, info.name, res.link);
    } else {
      std::vector<std::string> cmd = {"link", "--name", info.name, link, "down"};
      if (a.what == "silent") cmd.push_back("--silent");
      if (!a.one_way.empty()) cmd.insert(cmd.end(), {"--one-way", a.one_way});
      const double asked = Wall();
      double spread = 0;
      const double at = NetlabLink(tools, cmd, asked, &spread);
      if (w.fault == 0) first_fault(at, asked, spread);
      w.faults.push_back(at);
    }
  }
  Sleep(std::max(0.0, t0 + sc.observe_s - Now()));
  w.end = Wall();
  info.faults = w.faults;
  if (arm.report) res.arm_report = arm.report(info, w.fault, w.end);
  if (sc.check_reuse) {
    const long long d = HostLinkUpBytes(tools, info.name, res.link) - at_repair;
    res.reused_mbytes = double(d) / 1e6;
    res.reused = d > 1'000'000;
    for (const auto& l : stream_path()) res.stream_path_at_end += (res.stream_path_at_end.empty() ? "" : " ") + l;
  }

  // Stop: rank 0 ends the loop at its next step; a dead loop is killed.
  for (Child* r : ranks) r->Signal(SIGTERM);
  for (Child* r : ranks) r->Stop(5);
  sender.Stop(2);
  sink.Stop(2);
  LoopLog loop;
  for (int r = 0; r < int(hosts.size()); ++r) ParseLoopLog(ReadFile(prefix + "-rank" + std::to_string(r) + ".jsonl"), loop);
  res.score = ScoreArm(loop, ParseStreamLog(ReadFile(sink_log)), w);
  res.ran = true;
  return res;
}

}  // namespace lockstep::bench::fabric
