// operator-scale: the operator against a real (hermetic) control plane with
// 100 and 1000 fake GPU nodes. For each N it creates N nodes at a paced rate
// and reports how long each node waits for its FabricHealth (p50/p99/max), that
// there is exactly one per node, the operator's CPU and memory, and how many API
// requests it makes per minute once nothing changes (goal: lease renewals only).
// Ends with one JSON line.
//
//   build/dev/e2e/bench/operator-scale [--quick] [--nodes 100,1000] [--rate 20] [--threads 8]
//       [--idle-seconds 60] [--converge-timeout 300] [--settle-timeout 300]
//       [--operator build/dev/operator/lockstep-operator] [--operator-flag=--workers=8]
//       [--repo .] [--keep]
//
// Run from the repository root. Needs the e2e/cluster tools (scripts/install-k8s-tools).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_cli.h"
#include "lockstep/common/log.h"
#include "operator_scale_cluster.h"
#include "operator_scale_round.h"

namespace lockstep::bench {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

const char* kAbout =
    "operator-scale: the operator against a real (hermetic) control plane with fake GPU nodes; time to each "
    "node's FabricHealth, the operator's cost, and its API traffic once idle. Run from the repository root.";

struct Flags {
  std::vector<int> nodes = {100, 1000};
  PaceOptions pace{};
  int idle_seconds = 60;
  int converge_timeout = 300;
  int settle_timeout = 300;
  BenchClusterOptions cluster{};
};

// The flags; nullopt to go on, else the exit code (--help: 0; bad usage: 2).
std::optional<int> ParseFlags(int argc, char** argv, Flags& f) {
  CLI::App app{kAbout, "operator-scale"};
  bool quick = false;
  CLI::Option* nodes = app.add_option("--nodes", f.nodes, "GPU node counts, one round each, e.g. 100,1000")
                           ->delimiter(',')
                           ->check(CLI::Range(1, 20000))
                           ->capture_default_str();
  app.add_flag("--quick", quick, "--nodes 100 (unless --nodes is given)");
  app.add_option("--rate", f.pace.per_second, "node creates (and deletes) per second")
      ->check(CLI::Range(0.1, 1000.0))
      ->capture_default_str();
  app.add_option("--threads", f.pace.threads, "client threads creating nodes")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--idle-seconds", f.idle_seconds, "idle window per round")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--converge-timeout", f.converge_timeout, "max wait for every FabricHealth, s")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--settle-timeout", f.settle_timeout, "max wait for the agent rollout before idling, s")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  app.add_option("--operator", f.cluster.operator_binary, "the operator binary")->capture_default_str();
  app.add_option("--operator-flag", f.cluster.operator_flags,
                 "extra operator flag, repeatable; give it with = (--operator-flag=--workers=8)")
      ->allow_extra_args(false);
  app.add_option("--repo", f.cluster.repo, "repository root")->capture_default_str();
  app.add_flag("--keep", f.cluster.keep, "keep the temp dir with the logs");
  if (const auto rc = ParseArgs(app, argc, argv)) return rc;
  if (quick && nodes->count() == 0) f.nodes = {100};
  return std::nullopt;
}

double Round1(double v) { return std::round(v * 10) / 10; }

// A latency in ms for the table: "never" when unbounded (nodes never seen).
std::string Ms(std::optional<double> v) {
  if (!v) return "never";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", *v);
  return buf;
}

nlohmann::json MsJson(std::optional<double> v) { return v ? nlohmann::json(Round1(*v)) : nlohmann::json(nullptr); }

void PrintTable(const std::vector<RoundResult>& results) {
  std::printf("\noperator-scale: node create call started -> FabricHealth seen, operator cost, idle API traffic\n"
              "(round 1 is cold: the first nodes after the operator started; 'never': some nodes' health never seen)\n\n");
  std::printf("%5s %6s %8s %6s %6s %8s %8s %8s %8s %8s %8s %7s %7s %7s %8s %9s %9s %9s %7s\n", "round", "nodes",
              "healths", "extra", "never", "create/s", "p50 ms", "p99 ms", "max ms", "call p99", "conv s", "cpu %",
              "rss MB", "hwm MB", "req/node", "idle/min", "non-lease", "lease/min", "idle %");
  for (size_t k = 0; k < results.size(); ++k) {
    const RoundResult& r = results[k];
    std::printf("%5zu %6d %8d %6d %6zu %8.1f %8s %8s %8s %8.0f %8.1f %7.1f %7.1f %7.1f %8.2f %9.1f %9.1f %9.1f %7.2f\n",
                k + 1, r.nodes, r.healths, r.extra_healths, r.latency_ms.never_seen,
                r.nodes / std::max(r.create_seconds, 1e-9), Ms(r.latency_ms.p50).c_str(),
                Ms(r.latency_ms.p99).c_str(), Ms(r.latency_ms.max).c_str(), r.create_call_ms.p99,
                r.converge_seconds,
                r.cpu_percent, r.rss_mb, r.hwm_mb, r.requests_per_node, r.idle_requests_per_min,
                r.idle_non_lease_requests_per_min, r.idle_lease_requests_per_min, r.idle_cpu_percent);
  }
  std::printf("\n");
  for (const RoundResult& r : results) {
    std::printf("%d nodes: create calls p50 %.0f / p99 %.0f / max %.0f ms; created in %.1f s; %s; duplicate adds %d, wrong owner %d; rollout %s; idle %.0f s, "
                "non-lease requests: %s\n",
                r.nodes, r.create_call_ms.p50, r.create_call_ms.p99, r.create_call_ms.max, r.create_seconds,
                r.converged ? "converged" : "DID NOT CONVERGE", r.duplicate_adds,
                r.wrong_owner, r.settled ? "complete" : "INCOMPLETE", r.idle_seconds, r.idle_non_lease_detail.c_str());
    std::printf("  phase: max fabrichealth queue depth %.0f; %s\n", r.max_queue_depth, r.phase_detail.c_str());
  }
  std::printf("\n");
}

nlohmann::json ToJson(const RoundResult& r, size_t round) {
  return {{"round", round + 1},
          {"cold", round == 0},
          {"nodes", r.nodes},
          {"nodes_never_seen", r.latency_ms.never_seen},
          {"healths", r.healths},
          {"extra_healths", r.extra_healths},
          {"duplicate_adds", r.duplicate_adds},
          {"converged", r.converged},
          {"node_to_health_from", "before the node's create call"},
          {"node_to_health_p50_ms", MsJson(r.latency_ms.p50)},
          {"node_to_health_p99_ms", MsJson(r.latency_ms.p99)},
          {"node_to_health_max_ms", MsJson(r.latency_ms.max)},
          {"create_call_p50_ms", Round1(r.create_call_ms.p50)},
          {"create_call_p99_ms", Round1(r.create_call_ms.p99)},
          {"creates_per_s", Round1(r.nodes / std::max(r.create_seconds, 1e-9))},
          {"converge_s", Round1(r.converge_seconds)},
          {"operator_cpu_percent", Round1(r.cpu_percent)},
          {"operator_rss_mb", Round1(r.rss_mb)},
          {"operator_rss_hwm_mb", Round1(r.hwm_mb)},
          {"operator_requests_per_node", std::round(r.requests_per_node * 100) / 100},
          {"max_health_queue_depth", r.max_queue_depth},
          {"idle_seconds", Round1(r.idle_seconds)},
          {"idle_requests_per_min", Round1(r.idle_requests_per_min)},
          {"idle_non_lease_requests_per_min", Round1(r.idle_non_lease_requests_per_min)},
          {"idle_lease_requests_per_min", Round1(r.idle_lease_requests_per_min)},
          {"idle_operator_cpu_percent", std::round(r.idle_cpu_percent * 100) / 100},
          {"rollout_settled", r.settled}};
}

int Run(const Flags& flags) {
  Clock& clock = SystemClock::Instance();
  BenchCluster cluster(flags.cluster);  // scope guard: the destructor tears everything down
  Progress("starting a cluster (0 GPU + " + std::to_string(flags.cluster.cpu_nodes) + " CPU nodes)");
  Status s = cluster.Up();
  if (s.ok()) {
    Progress("installing the chart");
    s = cluster.InstallChart();
  }
  if (s.ok()) {
    Progress("starting the operator (leader election on)");
    s = cluster.StartOperator();
  }
  if (!s.ok()) {
    std::cerr << "operator-scale: " << s.error().message << "\n";
    return 1;
  }
  auto api = cluster.AdminApi(clock);
  if (!api.ok()) {
    std::cerr << "operator-scale: " << api.error().message << "\n";
    return 1;
  }
  HealthWatch watch(**api, clock);
  watch.Start();
  Progress("operator is the leader; waiting for the agent DaemonSet and the health informer");
  const MonoTime deadline = clock.Monotonic() + std::chrono::seconds(60);
  while (!g_stop && !(watch.HasSynced() && (*api)->Get(kube::gvr::kDaemonSets, BenchCluster::kNamespace,
                                                         "lockstep-agent-default").ok())) {
    if (clock.Monotonic() > deadline) {
      std::cerr << "operator-scale: the operator did not create its DaemonSet within 60 s\n"
                << cluster.OperatorLogTail(20);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  std::vector<RoundResult> results;
  for (size_t k = 0; k < flags.nodes.size() && !g_stop; ++k) {
    RoundOptions ro{.round = static_cast<int>(k),
                    .nodes = flags.nodes[k],
                    .pace = flags.pace,
                    .converge_timeout = std::chrono::seconds(flags.converge_timeout),
                    .settle_timeout = std::chrono::seconds(flags.settle_timeout),
                    .idle = std::chrono::seconds(flags.idle_seconds)};
    auto r = RunRound(cluster, **api, watch, clock, ro, g_stop);
    if (!r.ok()) {
      std::cerr << "operator-scale: round with " << ro.nodes << " nodes: " << r.error().message << "\n";
      return g_stop ? 130 : 1;
    }
    results.push_back(*r);
    if (k + 1 < flags.nodes.size()) {
      Status d = DeleteRound(**api, watch, clock, RoundNodeNames(ro.round, ro.nodes), flags.pace,
                             std::chrono::seconds(300), g_stop);
      if (!d.ok()) {
        std::cerr << "operator-scale: deleting the nodes: " << d.error().message << "\n";
        return g_stop ? 130 : 1;
      }
    }
  }
  if (g_stop) return 130;

  PrintTable(results);
  nlohmann::json out = {{"bench", "operator-scale"},
                        {"rate_per_s", flags.pace.per_second},
                        {"operator_flags", flags.cluster.operator_flags},
                        {"results", nlohmann::json::array()}};
  for (size_t k = 0; k < results.size(); ++k) out["results"].push_back(ToJson(results[k], k));
  std::cout << out.dump() << std::endl;
  bool ok = true;
  for (const RoundResult& r : results) {
    ok = ok && r.converged && r.latency_ms.never_seen == 0 && r.healths == r.nodes && r.extra_healths == 0;
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  using namespace lockstep;
  bench::Flags flags;
  if (const auto rc = bench::ParseFlags(argc, argv, flags)) return *rc;
  log::SetLevel(log::Level::kWarn);
  log::SetComponent("operator-scale");
  std::signal(SIGINT, bench::OnSignal);
  std::signal(SIGTERM, bench::OnSignal);
  return bench::Run(flags);
}
