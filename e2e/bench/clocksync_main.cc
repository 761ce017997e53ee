// clocksync: real lockstep-agents on a netlab namespace fabric, scored against
// the ground truth of their virtual clocks. Needs root. Prints a table per
// scenario, then ONE JSON line (headline = scenario b). See kAbout and --help.
#include <unistd.h>

#include <iostream>
#include <map>
#include <optional>

#include <CLI/CLI.hpp>

#include "bench_cli.h"
#include "clocksync_testbed.h"

namespace lockstep::bench {
namespace {

const char* kAbout = R"(clocksync testbed: real lockstep-agents on a netlab namespace fabric,
scored against the ground truth of their virtual clocks, side by side with
real chrony on the same fabric in the same run.

Brings up a netlab leaf-spine fabric (NAME-h0..hN-1), runs one lockstep-agent
per host namespace (standalone mode, clock sync only unless --fabric, bound to
the host's rail-0 address, every other host a peer at its rail-0 address, a
shared random probe key, a virtual clock with a known offset (<= +-100 ms),
drift (<= +-50 ppm) and wander, all seeded), and runs the scenarios in
sequence on the same agents:

  c  late join: all but the last agent start together, the last 10 s later
     (its time to LOCKED), then a short measurement with everyone
  a  idle fabric
  b  asymmetric bursty load: tbf on one leaf->spine direction, netlab-loadgen
     bursts averaging ~80% of the shaped rate through it (one direction only)
  e  probe path down: one host's rail-0 link down for a few seconds
  d  one agent killed: the rest must stay LOCKED with unchanged error

chrony (unless --no-chrony): every host namespace also runs chronyd -x (it
never touches the clock): host --chrony-server-host is the server (local
stratum 1, allow), every other host a client (server IP iburst minpoll -4
maxpoll -4 xleave, kernel timestamps), on the default NTP port, so under the
same load and failures as the agents (c: the late host's chronyd starts with
its agent; d: the killed host's chronyd is killed too). Every namespace shares
the one system clock and chronyd -x only keeps its correction to it in a
register, so the correction `chronyc tracking` reports as "System time" is
chrony's error, in full; chrony is scored like the agents: |e_i - e_j| for
every pair of synchronised hosts, server included (its correction is 0).
chrony's clocks have no offset or drift to find (the agents' virtual clocks
do): that favours chrony.

Scoring (agents): each agent's GET /status gives fabric time `now_ns` at local reading
`local_ns` plus the truth `true_offset_ns` = local - base, where the base clock
is shared by every agent process (CLOCK_MONOTONIC_RAW with a shared anchor).
So e_i = now_ns - (local_ns - true_offset_ns) is node i's fabric-time error
against a common reference, and e_i - e_j at the same base instant is the
pairwise error. All agents are queried in one burst (sockets opened in each
namespace through setns(), requests sent back to back); the remaining spread
of sample instants (~0.1-1 ms) is removed with the fabric's rate against the
base (fitted per scenario), so it contributes < 1 ns.

fabric probing (--fabric): every agent also runs fabric failover probing, as
in production: its agent.yaml gets `fabric: {rails: [rail0, rail1],
hostAddress: <its host address>}` and every peer its `hostAddress` (netlab's
host addresses, topology.json .hosts[i].addr; the lab is built with --rails
2), so each agent probes every peer on every rail on the fabric port (7312)
beside clock sync's 7311, on its host address (where path probes are
addressed; clock sync's socket stays on the rail-0 address). Clock sync then
runs on the fabric prober's thread, as in production.
Before the first measurement the testbed waits (--lock-timeout-s) until every
path of every agent delivers (up, suspect or recovering); each scenario adds
fabric probe packets/s, misses, route changes, the path downs the agents
logged during it (in a: false alarms) and the paths up at its end. In e the
failover pins /32 routes to the host addresses only, so clock sync's rail-0
probes are untouched. The rail-0 tx bandwidth then includes fabric probes.

Output: a table per scenario (its header says whether fabric probing was on),
then ONE JSON line (headline = scenario b; "fabric": true/false).
Needs root. Everything is torn down on exit (also on Ctrl-C / errors).

Tools: lockstep-agent and netlab-loadgen from $LOCKSTEP_BUILD_DIR, the build
dir this binary lives in, build/dev or build/ci ($LOCKSTEP_AGENT and
$NETLAB_LOADGEN override); netlab from $NETLAB, <build>/e2e/netlab/netlab, or
the repository's e2e/netlab/netlab.
)";

// The flags into o; nullopt to go on, else the exit code (--help: 0; bad usage: 2).
std::optional<int> ParseFlags(int argc, char** argv, Options& o) {
  CLI::App app{kAbout, "clocksync"};
  bool no_chrony = false;
  const auto opt = [&app](const std::string& name, auto& field, const std::string& help) {
    return app.add_option(name, field, help)->capture_default_str();
  };
  opt("--hosts", o.hosts, "hosts");
  opt("--name", o.name, "netlab lab name, namespaces NAME-hN");
  opt("--scenarios", o.scenarios, "subset of a,b,c,d,e, run in the order c a b e d");
  opt("--seed", o.seed, "virtual clocks and load pattern");
  opt("--measure-s", o.measure_s, "measurement period for a and b");
  opt("--short-measure-s", o.short_measure_s, "measurement period for c, d, e");
  opt("--sample-ms", o.sample_ms, "/status sampling period");
  opt("--late-join-s", o.late_join_s, "c: the last agent starts this much later");
  opt("--settle-s", o.settle_s, "wait this long after every agent is LOCKED before measuring");
  opt("--asymmetry-allowance-ns", o.asymmetry_allowance_ns,
      "the agents' clockSync.asymmetryAllowanceNs, added to every bound (0: score the bare estimate; the product "
      "default is 100)");
  app.add_flag("--no-chrony", no_chrony, "do not run chrony");
  app.add_flag("--fabric", o.fabric, "agents also run fabric failover probing on both rails (see above)");
  opt("--chrony-server-host", o.chrony_server, "host index of the chrony server");
  opt("--chrony-poll", o.chrony_poll, "chrony minpoll = maxpoll, log2 seconds (-4: 16 Hz)");
  opt("--chrony-sample-ms", o.chrony_sample_ms, "chronyc tracking period");
  opt("--lock-timeout-s", o.lock_timeout_s, "time allowed to reach LOCKED");
  opt("--link-down-s", o.link_down_s, "e: how long the link is down");
  opt("--shape-mbit", o.shape_mbit, "b: tbf rate of the shaped direction");
  opt("--load-fraction", o.load_fraction, "b: mean load as a fraction of the shaped rate");
  opt("--burst-ms", o.burst_ms, "b: mean on and off time of the bursts");
  opt("--load-warmup-s", o.load_warmup_s, "b: load before measuring");
  opt("--interval-ms", o.interval_ms, "agent probe.intervalMs");
  opt("--peers-per-node", o.peers_per_node, "agent probe.peersPerNode");
  opt("--wander", o.wander, "virtual clock wander, ppb/sqrt(s)");
  app.add_option("--work-dir", o.work_dir, "configs and agent logs (default: a new temp dir)");
  app.add_flag("--check", o.check, "exit 1 unless every scored pair is within bound_i + bound_j and < 10 us");
  opt("--max-violation-fraction", o.max_violation_fraction,
      "--check: fraction of pair samples allowed outside bound_i + bound_j");
  if (const auto rc = ParseArgs(app, argc, argv)) return rc;
  o.chrony = !no_chrony;
  return std::nullopt;
}

void Validate(const Options& o) {
  if (o.hosts < 2) Die("--hosts must be >= 2");
  if (o.scenarios.empty() || o.scenarios.find_first_not_of("abcde") != std::string::npos) {
    Die("--scenarios: letters a-e");
  }
  if (!(o.sample_ms > 0)) Die("--sample-ms must be > 0");
  if (o.chrony_server < 0 || o.chrony_server >= o.hosts) Die("--chrony-server-host must be a host index (0..hosts-1)");
  if (o.chrony_poll < -7 || o.chrony_poll > 24) Die("--chrony-poll must be in -7..24 (chrony's range)");
  if (!(o.chrony_sample_ms > 0)) Die("--chrony-sample-ms must be > 0");
  if (!(o.asymmetry_allowance_ns >= 0) || o.asymmetry_allowance_ns > 1e6 ||
      o.asymmetry_allowance_ns != static_cast<double>(static_cast<long long>(o.asymmetry_allowance_ns))) {
    Die("--asymmetry-allowance-ns must be an integer in 0..1000000");
  }
}

// Runs the testbed; the results, or an exit code.
int RunTestbed(const Options& o, std::map<char, ScenarioResult>& results) {
  Testbed tb(o, LocateTools(o.chrony));
  int rc = 0;
  try {
    results = tb.Run();
  } catch (const Interrupted&) {
    Log("interrupted");
    rc = 130;
  } catch (const std::exception& e) {
    Log(std::string("ERROR: ") + e.what());
    rc = 1;
  }
  Log("tearing down (agent logs and configs in " + tb.work() + ")");
  tb.Teardown();
  return rc;
}

int Main(int argc, char** argv) {
  Options o;
  if (const auto rc = ParseFlags(argc, argv, o)) return *rc;
  try {
    if (::geteuid() != 0) Die("needs root (network namespaces)");
    Validate(o);
    InstallSignalHandlers();
    double t0 = Now();
    std::map<char, ScenarioResult> results;
    Log(std::string("fabric probing ") + (o.fabric ? "on (--fabric)" : "off"));
    if (int rc = RunTestbed(o, results); rc != 0) return rc;
    for (char k : RunOrder(results)) std::cout << Table(results.at(k));
    std::cout << "\n" << Summary(results, Now() - t0, o.asymmetry_allowance_ns).dump() << std::endl;
    if (o.check) {
      std::vector<std::string> bad = CheckFailures(results, o.max_violation_fraction);
      for (const auto& b : bad) Log("CHECK FAILED: " + b);
      if (!bad.empty()) return 1;
      Log("check passed");
    }
    return 0;
  } catch (const std::exception& e) {
    Log(std::string("ERROR: ") + e.what());
    return 1;
  }
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Main(argc, argv); }
