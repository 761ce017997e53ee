#include "fabric_agent_arm.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>

#include "clocksync_proc.h"

namespace lockstep::bench::fabric {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr double kWireBytesPerProbe = 54 + 8 + 20;  // payload (fabric_probe.h, version 3) + UDP + IPv4

struct Running {
  std::vector<Child> agents;
  std::vector<std::string> logs, ns;
  std::vector<double> started;
  double ready = 0;  // wall time every agent had every path up
};

std::vector<std::string> InNs(const std::string& ns, std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
  return argv;
}

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// utime + stime of a process in seconds; -1 if unreadable. `sys`: stime alone
// (in netlab it includes the emulated fabric: a probe's trip through the
// veths, routers and shapers of the lab runs in the sender's softirq).
double CpuSeconds(pid_t pid, double* sys = nullptr) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(stat.substr(close + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> f; ++i) {
    if (i == 14) utime = std::atof(f.c_str());
    if (i == 15) stime = std::atof(f.c_str());
  }
  if (sys) *sys = stime / double(::sysconf(_SC_CLK_TCK));
  return (utime + stime) / double(::sysconf(_SC_CLK_TCK));
}

// utime + stime of the agent's fabric prober thread (named "ls-fabric"), in
// seconds; -1 if not found.
double FabricThreadCpuSeconds(pid_t pid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task/";
  std::istringstream tids(RunCapture({"ls", task}).out);
  std::string tid;
  while (tids >> tid) {
    std::string comm = ReadFile(task + tid + "/comm");
    comm.erase(comm.find_last_not_of(" \n") + 1);
    if (comm != "ls-fabric") continue;
    const std::string stat = ReadFile(task + tid + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream in(stat.substr(close + 2));
    std::string f;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && in >> f; ++i) {
      if (i == 14) utime = std::atof(f.c_str());
      if (i == 15) stime = std::atof(f.c_str());
    }
    return (utime + stime) / double(::sysconf(_SC_CLK_TCK));
  }
  return -1;
}

double RssMb(pid_t pid) {
  std::istringstream in(ReadFile("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return -1;
}

// Sum of every sample of a metric family in a Prometheus text page.
double MetricSum(const std::string& page, const std::string& name) {
  std::istringstream in(page);
  std::string line;
  double sum = 0;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0 || (line.size() > name.size() && line[name.size()] != '{' &&
                                      line[name.size()] != ' ')) {
      continue;
    }
    sum += std::atof(line.substr(line.rfind(' ') + 1).c_str());
  }
  return sum;
}

bool AllPathsUp(const std::string& agent, const std::string& ns) {
  const RunResult r = RunCapture(InNs(ns, {agent, "fabric", "status", "--json"}));
  if (r.rc != 0) return false;
  const json j = json::parse(r.out, nullptr, false);
  if (!j.is_object() || !j.contains("paths") || j["paths"].empty()) return false;
  for (const auto& p : j["paths"]) {
    if (p.value("state", "") != "up") return false;
  }
  return true;
}

}  // namespace

Arm MakeAgentArm(const std::string& agent, int paths_per_rail) {
  auto run = std::make_shared<Running>();
  Arm arm;
  arm.name = "lockstep";
  arm.start = [agent, run, paths_per_rail](const LabInfo& info) {
    *run = Running{};
    const std::string key = info.log_prefix + "-probe-key";
    WriteFile(key, "fabric-benchmark-probe-key-0123456789\n");
    std::string peers;
    for (const auto& h : info.topo.hosts) {
      peers += "  - {name: " + h.name + ", address: " + h.rails[0].ip + ", hostAddress: " + h.addr + "}\n";
    }
    for (const auto& h : info.topo.hosts) {
      const std::string base = info.log_prefix + "-agent-" + h.name;
      WriteFile(base + ".yaml", "nodeName: " + h.name + "\nprobeKeyFile: " + key +
                                    "\nhealthAddr: 127.0.0.1:9610\ntimeApiAddr: 127.0.0.1:9611\n"
                                    "fabric:\n  rails: [rail0, rail1]\n  pathsPerRail: " +
                                    std::to_string(paths_per_rail) + "\npeers:\n" + peers);
      run->agents.push_back(Child::Spawn(InNs(h.ns, {agent, "run", "--config", base + ".yaml"}), base + ".log"));
      run->logs.push_back(base + ".log");
      run->ns.push_back(h.ns);
      run->started.push_back(Now());
    }
    const double deadline = Now() + 60;
    for (const auto& ns : run->ns) {
      while (!AllPathsUp(agent, ns)) {
        if (Now() > deadline) Die("agent arm: the agents' paths did not all come up in 60 s; see " + run->logs[0]);
        Sleep(0.2);
      }
    }
    run->ready = WallNow();
    Log("agent arm: " + std::to_string(run->agents.size()) + " agents up, every path up");
  };
  arm.stop = [run](const LabInfo&) {
    for (auto& c : run->agents) c.Stop(3);
  };
  arm.report = [run](const LabInfo& info, double fault, double end) {
    std::optional<double> first_down, first_pin, first_alert;
    int alerts = 0, flaps = 0, early_downs = 0;
    std::vector<PathDown> downs;
    for (size_t i = 0; i < run->logs.size(); ++i) {
      const std::string host = i < info.topo.hosts.size() ? info.topo.hosts[i].name : std::to_string(i);
      std::istringstream in(ReadFile(run->logs[i]));
      std::string line;
      while (std::getline(in, line)) {
        const json j = json::parse(line, nullptr, false);
        if (!j.is_object()) continue;
        const double ts = j.value("ts", 0.0);
        const std::string msg = j.value("msg", "");
        if (msg == "fabric path state changed" && j.value("to", "") == "down") {
          downs.push_back({host, j.value("path", ""), ts});
        }
        // Paths declared down while every link was up (after the agents were
        // ready, before the fault): false alarms (congestion, CPU starvation).
        if (ts >= run->ready && ts < fault && msg == "fabric path state changed" && j.value("to", "") == "down") {
          ++early_downs;
        }
        if (ts < fault || ts > end) continue;
        if (msg == "fabric path state changed" && j.value("to", "") == "down") {
          if (!first_down || ts < *first_down) first_down = ts;
          if (j.value("flap", "") == "true") ++flaps;
        } else if (msg.rfind("pinned a peer", 0) == 0) {
          if (!first_pin || ts < *first_pin) first_pin = ts;
        } else if (msg.rfind("fabric flap alert", 0) == 0) {
          ++alerts;
          if (!first_alert || ts < *first_alert) first_alert = ts;
        }
      }
    }
    double cpu = 0, cpu_sys = 0, cpu_max = 0, rss = 0, kbps = 0, fabric_cpu = 0, fabric_s = 0, packets = 0;
    double stalls = 0;  // prober wake-ups late by more than the urgent timeout (timeouts excused), all agents
    for (size_t i = 0; i < run->agents.size(); ++i) {
      const double life = Now() - run->started[i];
      double sys = 0;
      const double c = 100.0 * CpuSeconds(run->agents[i].pid(), &sys) / life;
      cpu += c / double(run->agents.size());
      cpu_sys += 100.0 * sys / life / double(run->agents.size());
      cpu_max = std::max(cpu_max, c);
      rss = std::max(rss, RssMb(run->agents[i].pid()));
      const RunResult m = RunCapture(InNs(run->ns[i], {"curl", "-s", "127.0.0.1:9610/metrics"}));
      const double probes = MetricSum(m.out, "lockstep_fabric_probes_sent_total") +
                            MetricSum(m.out, "lockstep_fabric_probes_answered_total");
      stalls += MetricSum(m.out, "lockstep_fabric_prober_stalls_total");
      kbps += probes * kWireBytesPerProbe * 8 / life / 1000 / double(run->agents.size());
      // The prober thread alone, and its CPU per probe packet (probes + ack-only packets):
      // the figure that does not depend on how loaded the machine is.
      const double f = FabricThreadCpuSeconds(run->agents[i].pid());
      if (f >= 0) {
        fabric_cpu += 100.0 * f / life / double(run->agents.size());
        fabric_s += f;
        packets += probes;
      }
    }
    auto ms = [&](const std::optional<double>& t) -> ordered_json {
      if (!t) return nullptr;
      return std::round((*t - fault) * 1000.0);
    };
    const Detection d = ScoreDetection(downs, info.affected, run->ready, fault, end);
    ordered_json out = ToJson(d);
    out["faulted_link"] = info.faulted_link;
    std::vector<std::string> affected;
    for (const auto& p : info.affected) affected.push_back(p.host + ":" + p.path);
    out["affected"] = affected;
    // The earliest down on any path (the figure reported as detect_ms before
    // 2026-11-28: a coincident false down counted as detection).
    out["first_down_any_path_ms"] = ms(first_down);
    const ordered_json more{{"first_pin_ms", ms(first_pin)},
                        {"flaps_declared", flaps},
                        {"paths_down_before_fault", early_downs},
                        {"prober_stalls", stalls},
                        {"flap_alerts", alerts},
                        {"first_flap_alert_ms", ms(first_alert)},
                        {"agent_cpu_percent", std::round(cpu * 100) / 100},
                        {"agent_cpu_percent_max", std::round(cpu_max * 100) / 100},
                        {"agent_cpu_percent_system", std::round(cpu_sys * 100) / 100},
                        {"agent_rss_mb", std::round(rss * 10) / 10},
                        {"fabric_thread_cpu_percent", std::round(fabric_cpu * 100) / 100},
                        {"fabric_cpu_ms_per_1000_packets",
                         packets > 0 ? ordered_json(std::round(fabric_s / packets * 1e6 * 100) / 100) : ordered_json(nullptr)},
                        {"probe_kbps_per_node", std::round(kbps * 10) / 10}};
    for (const auto& [k, v] : more.items()) out[k] = v;
    return out;
  };
  return arm;
}

}  // namespace lockstep::bench::fabric
