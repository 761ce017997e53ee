// fabric: the failover benchmark of issue 8 on a netlab fabric. Needs root.
// Prints a table and ONE JSON line. See kAbout and --help.
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <set>

#include <CLI/CLI.hpp>

#include "bench_cli.h"
#include "clocksync_proc.h"
#include "fabric_agent_arm.h"
#include "fabric_report.h"
#include "fabric_run.h"

namespace lockstep::bench::fabric {
namespace {

const char* kAbout = R"(fabric: failover benchmark on an emulated multi-rail fabric (e2e/netlab).

4 hosts x 2 rails, striped over 2 leaves and 2 spines, every host link
rate-limited (tbf, both directions, a --queue-ms deep queue). Each host has a host address
(10.B.200.(h+1) on host0) and the static-ECMP route over both rails that users
configure. Real traffic on host addresses: a PyTorch DDP loop
(e2e/workloads/ddp_loop.py, gloo, CPU) on every host and a TCP bulk stream
h0 -> h1 (bulk-stream). The faulted link is the one the stream really uses:
netlab path for its 5-tuple (the FIB, the agents' /32 pins included), asked
before and after a second of per-link byte counters; all three must agree
(else asked again, up to 5 times). Fault times are netlab's (just before it
changed the link), so detection and failover times are upper bounds. The lab
forwards in its own kernel threads (netlab up --napi-threads), as switches do
not share the hosts' cores; otherwise forwarding runs in the softirq of
whatever thread sent a packet, probers included.

Scenarios (a fresh lab for each scenario and arm):
  link-down  the sender's rail link goes down (carrier loss) for --fault-s
  flap       that link flaps 10 times: --flap-down-s down, --flap-up-s up (a
             real flap train: seconds of retraining, brief ups), run by one
             `netlab link ... flap`; the timing it achieved is reported
  rail-down  the receiver's rail (NIC) its traffic back to the sender (the
             stream's acks, its gloo flows to h0) leaves by goes down for --fault-s
  repair     the sender's link down for 5 s, then up: is it used again (bytes on
             it in the 10 s after the repair)?
  silent     the sender's link drops everything, carrier and routes up, for --fault-s
  far-link-down  the receiver's link the stream arrives on loses carrier for --fault-s
  fabric-gray    a lab with 4 leaves, the stream h0 -> h2 (they share no leaf):
             the leaf-spine link the stream crosses first drops everything,
             carrier and routes up, for --fault-s
  one-way    the sender's link drops only what the sender sends (netlab
             --silent --one-way up), for --fault-s

Arms: static_untuned (static ECMP, kernel defaults: ignore_routes_with_linkdown=0,
rto_min 200 ms), static_tuned (the same route with rto_min 10ms and
ignore_routes_with_linkdown=1: the kernel routes around a rail that lost
carrier by itself) and lockstep (one standalone lockstep-agent per host
namespace: fabric.rails [rail0, rail1], fabric.pathsPerRail --paths-per-rail
(each path its own UDP source port, so the leaves hash them over the spines),
every peer's host address; started before the workloads once every path is
up, stopped after). Every arm reports
the training loop's longest step stall and the stream's total stalled time,
for the scenario and per fault. The lockstep arm also reports detection per
affected path (the probe paths whose probes or acks cross the faulted link,
by netlab path for their 5-tuples: median, max, never detected), false downs
before the fault and after it (paths that do not cross the link), the first
pin, prober stalls, flaps, flap alerts (flapAlertPerHour 8), agent CPU, RSS
and fabric probe bandwidth per node.

The DDP loop's collective timeout is --hang-s (default gloo's 30 min, so a
stall is measured, not cut short); a loop survived when no rank failed and it
was stepping at the end of observation. Run from the repository root as root
after building fabric, netlab, netlab-loadgen and bulk-stream.
)";

std::string SelfDir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) Die("readlink /proc/self/exe failed");
  const std::string exe(buf, size_t(n));
  return exe.substr(0, exe.rfind('/'));
}

bool Executable(const std::string& p) { return ::access(p.c_str(), X_OK) == 0; }

Tools FindTools() {
  const std::string dir = SelfDir();  // build/<preset>/e2e/bench
  Tools t{dir + "/../netlab/netlab", dir + "/../workloads/bulk-stream", "/usr/bin/python3",
          std::string(LOCKSTEP_SOURCE_DIR) + "/e2e/workloads/ddp_loop.py"};
  if (!Executable(t.netlab)) Die("no netlab at " + t.netlab + "; cmake --build --preset dev --target netlab");
  if (!Executable(t.bulk_stream)) {
    Die("no bulk-stream at " + t.bulk_stream + "; cmake --build --preset dev --target bulk-stream");
  }
  if (::access(t.ddp_loop.c_str(), R_OK) != 0) Die("no " + t.ddp_loop);
  const RunResult py = RunCapture({t.python, "-c", "import torch.distributed as d; assert d.is_gloo_available()"});
  if (py.rc != 0) Die("/usr/bin/python3 has no torch with gloo (Debian package python3-torch): " + py.err);
  return t;
}

// The arms, in the order they run (the agent arm: fabric_agent_arm.h).
std::vector<Arm> Arms(const Options& o) {
  std::vector<Arm> arms;
  arms.push_back({"static_untuned", true, "", nullptr, nullptr, nullptr});
  arms.push_back({"static_tuned", true, "", TuneStaticHosts, nullptr, nullptr});
  const std::string agent = SelfDir() + "/../../daemonset/lockstep-agent";
  if (Executable(agent)) {
    arms.push_back(MakeAgentArm(agent, o.paths_per_rail));
  } else {
    arms.push_back({"lockstep", false, "no lockstep-agent at " + agent + " (build it)", nullptr, nullptr, nullptr});
  }
  return arms;
}

int Main(int argc, char** argv) {
  Options o;
  std::vector<std::string> names, only, only_arms;
  for (const auto& sc : Scenarios(o)) names.push_back(sc.name);
  bool softirq = false;
  CLI::App app{kAbout, "fabric"};
  app.add_option("--scenarios", only, "only these, e.g. link-down,flap (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(names));
  app.add_option("--arms", only_arms, "only these arms, e.g. static_tuned,lockstep (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"static_untuned", "static_tuned", "lockstep"}));
  app.add_option("--link-rate", o.link_rate, "host link rate")->capture_default_str();
  app.add_option("--queue-ms", o.queue_ms, "host link queue (tbf latency)")
      ->check(Positive())
      ->capture_default_str();
  app.add_flag("--softirq-fabric", softirq,
               "forward in the senders' softirq (the lab's default before 2026-11-26) instead of napi threads "
               "(netlab --napi-threads)");
  app.add_option("--flap-down-s", o.flap_down_s, "flap: each down period")
      ->check(Positive())
      ->capture_default_str();
  app.add_option("--flap-up-s", o.flap_up_s, "flap: each up period")->check(Positive())->capture_default_str();
  app.add_option("--hang-s", o.hang_s, "the loop's collective timeout (gloo's default 1800 s)")
      ->check(Positive())
      ->capture_default_str();
  app.add_option("--fault-s", o.fault_s, "length of the long faults")->check(Positive())->capture_default_str();
  app.add_option("--paths-per-rail", o.paths_per_rail,
                 "the agents' fabric.pathsPerRail (probe paths per rail and peer, each its own UDP source port)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_option("--hidden", o.hidden, "DDP MLP width (128: ~82k parameters)")
      ->check(Positive())
      ->capture_default_str();
  app.add_option("--batch", o.batch, "DDP batch per rank")->check(Positive())->capture_default_str();
  app.add_option("--workdir", o.workdir, "logs (default /tmp/fabric-bench-PID)");
  if (const auto rc = ParseArgs(app, argc, argv)) return *rc;
  o.napi_threads = !softirq;
  const std::set<std::string> wanted(only.begin(), only.end());
  if (::geteuid() != 0) Die("needs root (network namespaces)");
  if (o.workdir.empty()) o.workdir = "/tmp/fabric-bench-" + std::to_string(::getpid());
  if (RunCapture({"mkdir", "-p", o.workdir}).rc != 0) Die("cannot create " + o.workdir);
  const Tools tools = FindTools();
  std::vector<Scenario> scenarios;
  for (const auto& sc : Scenarios(o)) {
    if (wanted.empty() || wanted.count(sc.name)) scenarios.push_back(sc);
  }
  if (scenarios.empty()) Die("no scenario matches --scenarios");
  Log("logs in " + o.workdir);
  std::vector<ScenarioResult> results;
  for (const auto& sc : scenarios) {
    ScenarioResult r{sc, {}};
    for (const auto& arm : Arms(o)) {
      if (!only_arms.empty() && std::find(only_arms.begin(), only_arms.end(), arm.name) == only_arms.end()) continue;
      Log(sc.name + ": " + sc.what + " (arm " + arm.name + ")");
      // A set-up that fails (on a loaded machine the loop may not start in 90 s) is
      // tried once more on a fresh lab before it ends the run.
      for (int attempt = 1;; ++attempt) {
        try {
          r.arms.push_back(RunArm(tools, o, sc, arm));
          break;
        } catch (const Fatal& e) {
          if (attempt == 2) throw;
          Log(sc.name + " / " + arm.name + ": " + e.what() + "; once more on a fresh lab");
        }
      }
    }
    results.push_back(r);
  }
  std::cout << Table(results);
  std::cout << Summary(o, results).dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace lockstep::bench::fabric

int main(int argc, char** argv) {
  using namespace lockstep::bench;
  SetLogTag("fabric");
  InstallSignalHandlers();
  try {
    return fabric::Main(argc, argv);
  } catch (const Interrupted&) {
    Log("interrupted; labs torn down");
    return 130;
  } catch (const Fatal& e) {
    Log(std::string("error: ") + e.what());
    return 1;
  }
}
