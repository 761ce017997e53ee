// clocksync-sim: runs the clocksync library (the same Estimator and
// ClockDiscipline the agent uses) on synthetic probe data for 1k, 10k and 100k
// nodes and prints pairwise clock error percentiles vs N for
//   - Huygens with the network effect (random node pairs, fresh and 2 s old),
//   - Huygens per-edge fits only (edges),
// with the time and peak memory of one window solve. Ends with one JSON line.
//
//   build/dev/e2e/bench/clocksync-sim [--quick] [--max-nodes N] [--profile sw|nic|all]
//       [--windows W] [--rounds R] [--seed S] [--node-asym-ns A] [--wander-ppb P]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <malloc.h>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_cli.h"
#include "clocksync-sim-world.h"
#include "lockstep/clocksync/clock_discipline.h"
#include "lockstep/clocksync/estimator.h"

namespace lockstep::clocksync::sim {
namespace {

struct Flags {
  uint32_t max_nodes = 100000;
  std::string profile = "all";
  uint32_t windows = 3;
  uint32_t rounds = 10;
  uint64_t seed = 1;
  double node_asym_ns = 0;
  double wander_ppb = 2;
  uint32_t eval_pairs = 100000;
};

struct Stats {
  double p50 = 0, p99 = 0, max = 0;
};

Stats Percentiles(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  for (double& x : v) x = std::abs(x);
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))]; };
  s.p50 = at(0.5);
  s.p99 = at(0.99);
  s.max = v.back();
  return s;
}

struct Row {
  std::string profile;
  uint32_t nodes = 0;
  size_t edges = 0;
  uint64_t pairs = 0;
  double pure_fraction = 0;
  Stats net, net_aged, edge_only;
  double coverage = 0;       // fraction of pairs with |error| <= bound_i + bound_j
  double aged_coverage = 0;
  double bound_p50 = 0;      // median per-node error bound at the window end
  double solve_ms = 0, solve_ms_max = 0, solve_cpu_ms = 0, rss_mb = 0;
  uint32_t cg_iterations = 0, components = 0, invalid_nodes = 0;
};

// Returns freed heap to the OS, then restarts the kernel's peak-RSS counter, so
// VmHWM measures this configuration only.
bool ResetPeakRss() {
  malloc_trim(0);
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  return static_cast<bool>(f);
}

double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double PeakRssMb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return 0;
}

Row Run(const Flags& flags, const Profile& profile, uint32_t nodes) {
  WorldOptions wo;
  wo.nodes = nodes;
  wo.windows = flags.windows;
  wo.rounds = flags.rounds;
  wo.seed = flags.seed + nodes;
  wo.node_asym_ns = flags.node_asym_ns;
  wo.wander_ppb_per_sqrt_s = flags.wander_ppb;
  World world(wo, profile);

  EstimatorOptions eo;
  eo.max_node_id = nodes;
  Estimator est = std::move(Estimator::Create(eo)).value();
  est.Reserve(world.PairsPerWindow());

  Row row;
  row.profile = profile.name;
  row.nodes = nodes;
  row.edges = world.edges().size();
  std::optional<Solution> sol;
  for (uint32_t w = 0; w < flags.windows; ++w) {
    world.Window(w, [&](const ProbePair& p) { (void)est.AddPair(p); });
    sol.reset();  // free the previous window's solution before measuring the next
    ResetPeakRss();
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ThreadCpuMs();
    Result<Solution> r = est.Solve(static_cast<int64_t>((w + 1) * wo.window_ns));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    row.solve_cpu_ms = ThreadCpuMs() - cpu_start;
    if (!r.ok()) {
      std::fprintf(stderr, "Solve failed: %s\n", r.error().ToString().c_str());
      std::exit(1);
    }
    sol = std::move(r).value();
    row.rss_mb = std::max(row.rss_mb, PeakRssMb());
    row.solve_ms = ms;  // the last (steady-state, warm-started) window
    row.solve_ms_max = std::max(row.solve_ms_max, ms);
  }
  row.pairs = sol->stats.pairs;
  row.pure_fraction = static_cast<double>(sol->stats.pure_pairs) / std::max<uint64_t>(1, sol->stats.pairs);
  row.cg_iterations = sol->stats.cg_iterations;
  row.components = sol->num_components;
  for (const NodeEstimate& n : sol->nodes) row.invalid_nodes += !n.valid;

  // Evaluate at the end of the last window (T) and one window later (T + W: the
  // oldest an estimate gets before the next solve lands).
  const double t_end = flags.windows * wo.window_ns;
  const double t_aged = t_end + wo.window_ns;
  Rng rng(flags.seed * 7919 + nodes);
  std::vector<double> net, aged, bounds;
  size_t covered = 0, aged_covered = 0;
  auto reading = [&](NodeId i, double t) {
    ClockDiscipline d;
    const int64_t now = std::llround(world.Clock(i, t_end));
    d.Update(sol->Model(i), now);
    return d.Now(std::llround(world.Clock(i, t)));
  };
  for (uint32_t s = 0; s < flags.eval_pairs; ++s) {
    const NodeId i = rng.Below(nodes), j = rng.Below(nodes);
    if (i == j || !sol->nodes[i].valid || !sol->nodes[j].valid) continue;
    const TimeReading ri = reading(i, t_end), rj = reading(j, t_end);
    const double e = static_cast<double>(rj.fabric_ns - ri.fabric_ns);
    net.push_back(e);
    covered += std::abs(e) <= ri.error_bound_ns + rj.error_bound_ns;
    const TimeReading ai = reading(i, t_aged), aj = reading(j, t_aged);
    const double ea = static_cast<double>(aj.fabric_ns - ai.fabric_ns);
    aged.push_back(ea);
    aged_covered += std::abs(ea) <= ai.error_bound_ns + aj.error_bound_ns;
  }
  for (const NodeEstimate& n : sol->nodes) if (n.valid) bounds.push_back(n.error_bound_ns);
  std::vector<double> edge_err;
  const size_t stride = std::max<size_t>(1, sol->edges.size() / flags.eval_pairs);
  for (size_t k = 0; k < sol->edges.size(); k += stride) {
    const EdgeReport& r = sol->edges[k];
    const double la = world.Clock(r.fit.a, t_end);
    const double pred = r.fit.offset_ns + r.fit.drift * (la - static_cast<double>(r.fit.t_ref_ns));
    edge_err.push_back(pred - (world.Clock(r.fit.b, t_end) - la));
  }
  row.net = Percentiles(net);
  row.net_aged = Percentiles(aged);
  row.edge_only = Percentiles(edge_err);
  row.coverage = net.empty() ? 0 : static_cast<double>(covered) / static_cast<double>(net.size());
  row.aged_coverage = aged.empty() ? 0 : static_cast<double>(aged_covered) / static_cast<double>(aged.size());
  row.bound_p50 = Percentiles(bounds).p50;
  return row;
}

void PrintHeader(const Flags& f) {
  std::printf("clocksync-sim: K=10-20 peers/node, %u probing rounds per edge per 2 s window "
              "(a coded pair each way), %u windows, seed %" PRIu64 "\n",
              f.rounds, f.windows, f.seed);
  std::printf("clocks: offset +-100 ms, drift +-50 ppm, wander %.1f ppb/sqrt(s); "
              "errors are |pairwise| in ns at the last window's end\n",
              f.wander_ppb);
  std::printf("sw: 300 ns exp stamping + 1%% 20 us spikes, +-600 ns per-edge asymmetry, Pareto queueing; "
              "nic: 8 ns stamping, +-20 ns asymmetry, same queueing\n\n");
  std::printf("%-4s %7s %8s %5s | %-24s %7s | %-24s | %5s %6s | %-14s %4s %6s\n", "prof", "nodes",
              "edges", "pure", "Huygens+net: p50 p99 max", "+2s p99", "per-edge: p50 p99 max",
              "cover", "bound", "solve wall/cpu", "cg", "peakMB");
}

void PrintRow(const Row& r) {
  std::printf("%-4s %7u %8zu %4.0f%% | %7.1f %7.1f %8.1f %7.1f | %7.1f %7.1f %8.1f | %5.3f %6.1f | %6.0f/%5.0fms %4u %6.0f\n",
              r.profile.c_str(), r.nodes, r.edges, 100 * r.pure_fraction, r.net.p50, r.net.p99,
              r.net.max, r.net_aged.p99, r.edge_only.p50, r.edge_only.p99, r.edge_only.max,
              r.coverage, r.bound_p50, r.solve_ms, r.solve_cpu_ms, r.cg_iterations,
              r.rss_mb);
  std::fflush(stdout);
}

void PrintJson(const Flags& f, const std::vector<Row>& rows) {
  std::printf("{\"bench\":\"clocksync-sim\",\"k\":\"10-20\",\"rounds\":%u,\"windows\":%u,\"seed\":%" PRIu64
              ",\"results\":[", f.rounds, f.windows, f.seed);
  for (size_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    std::printf("%s{\"nodes\":%u,\"profile\":\"%s\",\"edges\":%zu,\"p50_error_ns\":%.1f,\"p99_error_ns\":%.1f,"
                "\"max_error_ns\":%.1f,\"p99_error_2s_ns\":%.1f,\"edge_only_p50_error_ns\":%.1f,"
                "\"edge_only_p99_error_ns\":%.1f,\"bound_coverage\":%.4f,\"bound_coverage_2s\":%.4f,"
                "\"bound_p50_ns\":%.1f,\"solve_ms\":%.1f,\"solve_ms_max\":%.1f,\"solve_cpu_ms\":%.1f,\"rss_mb\":%.0f,"
                "\"cg_iterations\":%u,\"components\":%u}",
                k ? "," : "", r.nodes, r.profile.c_str(), r.edges, r.net.p50, r.net.p99, r.net.max,
                r.net_aged.p99, r.edge_only.p50, r.edge_only.p99,
                r.coverage, r.aged_coverage, r.bound_p50, r.solve_ms, r.solve_ms_max, r.solve_cpu_ms, r.rss_mb,
                r.cg_iterations, r.components);
  }
  std::printf("]}\n");
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app{"clocksync-sim: the clocksync library on synthetic probe data for 1k, 10k and 100k nodes",
               "clocksync-sim"};
  bool quick = false;
  app.add_flag("--quick", quick, "1k and 10k nodes, 2 windows (explicit flags win)");
  CLI::Option* max_nodes = app.add_option("--max-nodes", f.max_nodes, "largest N of 1000, 10000, 100000 to run")
                               ->capture_default_str();
  app.add_option("--profile", f.profile, "timestamping: software, NIC, or both")
      ->check(CLI::IsMember({"sw", "nic", "all"}))
      ->capture_default_str();
  CLI::Option* windows =
      app.add_option("--windows", f.windows, "solve windows")->check(CLI::Range(1u, 1'000'000u))->capture_default_str();
  app.add_option("--rounds", f.rounds, "probe rounds per window")->check(CLI::Range(1u, 1'000'000u))->capture_default_str();
  app.add_option("--seed", f.seed, "synthetic data")->capture_default_str();
  app.add_option("--node-asym-ns", f.node_asym_ns, "per-node stamping asymmetry up to A ns (undetectable by design)")
      ->capture_default_str();
  app.add_option("--wander-ppb", f.wander_ppb, "clock wander, ppb")->capture_default_str();
  app.add_option("--eval-pairs", f.eval_pairs, "random node pairs scored")
      ->check(CLI::Range(1u, 100'000'000u))
      ->capture_default_str();
  if (const auto rc = lockstep::bench::ParseArgs(app, argc, argv)) return *rc;
  if (quick) {
    if (max_nodes->count() == 0) f.max_nodes = 10000;
    if (windows->count() == 0) f.windows = 2;
  }
  std::vector<Profile> profiles;
  if (f.profile != "nic") profiles.push_back(Profile::Software());
  if (f.profile != "sw") profiles.push_back(Profile::Nic());
  PrintHeader(f);
  std::vector<Row> rows;
  for (const Profile& p : profiles) {
    for (uint32_t n : {1000u, 10000u, 100000u}) {
      if (n > f.max_nodes) continue;
      rows.push_back(Run(f, p, n));
      PrintRow(rows.back());
    }
  }
  std::printf("\nHuygens+net: random node pairs after the network-effect solve (each node's\n"
              "ClockDiscipline reading); +2s: the same pairs one window later (extrapolated);\n"
              "per-edge: direct peers only. cover: share of pairs within the sum of\n"
              "their error bounds; bound: median per-node bound (ns). solve: one warm window solve, wall and\n"
              "thread-CPU time; peakMB: process peak RSS during it.\n");
  PrintJson(f, rows);
  return 0;
}

}  // namespace
}  // namespace lockstep::clocksync::sim

int main(int argc, char** argv) { return lockstep::clocksync::sim::Main(argc, argv); }
