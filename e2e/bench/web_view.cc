// web-view: the cost of the operator's web page at fleet scale, without an
// API server. Builds objects shaped like the cluster's (N FabricHealths with R
// rail conditions and a clock, J TrainingJobs of K ranks + 1 spare each with
// their pods, one FleetAudit over the N nodes whose NodeAudits hold C checks
// each) and times BuildWebView (operator/src/web_view.cc), which runs for
// every GET /api/view (the page refreshes every 10 s), and the size of the
// JSON it serves. Prints a table, then one JSON line.
//
//   build/ci/e2e/bench/web-view [--nodes 1000] [--rails 8] [--jobs 50] [--ranks 64] [--checks 40] [--runs 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/web_view.h"

namespace {

using lockstep::kube::Json;

std::string Node(int i) { return "gpu-node-" + std::to_string(i); }

Json Health(int i, int rails) {
  Json conds = Json::array();
  conds.push_back({{"type", "Ready"}, {"status", "True"}, {"reason", "ClockLocked"}, {"message", "ok"}});
  for (int r = 0; r < rails; ++r) {
    bool down = (i * 7 + r) % 97 == 0;
    conds.push_back({{"type", "Rail-rail" + std::to_string(r)},
                     {"status", down ? "False" : "True"},
                     {"reason", down ? "RailDown" : "RailUp"},
                     {"message", "every path delivers"},
                     {"lastTransitionTime", "2026-11-29T10:00:00Z"}});
  }
  return {{"metadata", {{"name", Node(i)}}},
          {"status",
           {{"phase", "Healthy"},
            {"policy", "default"},
            {"railsUp", rails},
            {"railsTotal", rails},
            {"flapsLastHour", 0},
            {"lastReportTime", "2026-11-29T10:00:00Z"},
            {"auditResult", "Pass"},
            {"clock", {{"state", "LOCKED"}, {"errorBoundNs", 150 + i % 50}, {"offsetNs", 3}, {"peers", 16}}},
            {"conditions", conds}}}};
}

Json Pod(const std::string& job, const std::string& name, const char* role, int rank, int node) {
  Json labels = {{"lockstep.dev/job", job}, {"lockstep.dev/role", role}};
  if (rank >= 0) labels["lockstep.dev/rank"] = std::to_string(rank);
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", labels}}},
          {"spec", {{"nodeName", Node(node)}}},
          {"status", {{"phase", "Running"}}}};
}

Json NodeAudit(int i, int checks) {
  Json cs = Json::array();
  const char* areas[] = {"software", "memory", "pcie", "node", "frontend", "backend"};
  for (int c = 0; c < checks; ++c) {
    cs.push_back({{"id", std::string(areas[c % 6]) + ".check_" + std::to_string(c)},
                  {"subject", "dev" + std::to_string(c % 8)},
                  {"observed", "16"},
                  {"expected", "16"},
                  {"verdict", "Pass"},
                  {"rule", "majority"}});
  }
  return {{"metadata", {{"name", "fleet." + Node(i)}}},
          {"spec", {{"fleetAudit", "fleet"}, {"nodeName", Node(i)}}},
          {"status", {{"phase", "Completed"}, {"verdict", "Pass"}, {"passed", checks}, {"checks", cs}}}};
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 1000, rails = 8, jobs = 50, ranks = 64, checks = 40, runs = 5;
  CLI::App app{"web-view: BuildWebView's time and the /api/view size at fleet scale"};
  app.add_option("--nodes", nodes)->check(CLI::Range(1, 100000));
  app.add_option("--rails", rails)->check(CLI::Range(0, 64));
  app.add_option("--jobs", jobs)->check(CLI::Range(0, 10000));
  app.add_option("--ranks", ranks)->check(CLI::Range(1, 4096));
  app.add_option("--checks", checks)->check(CLI::Range(0, 1024));
  app.add_option("--runs", runs)->check(CLI::Range(1, 1000));
  if (auto rc = lockstep::bench::ParseArgs(app, argc, argv)) return *rc;

  std::vector<Json> healths, tjs, pods, audits, node_audits;
  std::vector<Json> policies = {{{"metadata", {{"name", "default"}}}}};
  for (int i = 0; i < nodes; ++i) healths.push_back(Health(i, rails));
  for (int j = 0; j < jobs; ++j) {
    std::string name = "job-" + std::to_string(j);
    tjs.push_back({{"metadata", {{"name", name}, {"namespace", "ml"}}},
                   {"spec", {{"replicas", ranks}, {"spares", 1}}},
                   {"status", {{"phase", "Running"}, {"readyReplicas", ranks}, {"migrations", 0}}}});
    for (int r = 0; r < ranks; ++r) {
      pods.push_back(Pod(name, name + "-rank-" + std::to_string(r), "rank", r, (j * ranks + r) % nodes));
    }
    pods.push_back(Pod(name, name + "-spare-0", "spare", -1, j % nodes));
    pods.push_back(Pod(name, name + "-coordinator", "coordinator", -1, j % nodes));
  }
  audits.push_back({{"metadata", {{"name", "fleet"}, {"creationTimestamp", "2026-11-29T09:00:00Z"}}},
                    {"status", {{"phase", "Completed"}, {"nodes", nodes}, {"passed", nodes}}}});
  for (int i = 0; i < nodes; ++i) node_audits.push_back(NodeAudit(i, checks));

  lockstep::op::WebViewInputs in;
  auto ptrs = [](const std::vector<Json>& v) {
    std::vector<const Json*> out;
    for (const Json& j : v) out.push_back(&j);
    return out;
  };
  in.healths = ptrs(healths);
  in.policies = ptrs(policies);
  in.training_jobs = ptrs(tjs);
  in.job_pods = ptrs(pods);
  in.fleet_audits = ptrs(audits);
  in.node_audits = ptrs(node_audits);

  std::vector<double> build_ms, dump_ms;
  size_t bytes = 0;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    Json view = lockstep::op::BuildWebView(in);
    auto t1 = std::chrono::steady_clock::now();
    std::string body = lockstep::kube::DumpJson(view);
    auto t2 = std::chrono::steady_clock::now();
    bytes = body.size();
    build_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    dump_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::sort(build_ms.begin(), build_ms.end());
  std::sort(dump_ms.begin(), dump_ms.end());
  double build = build_ms[build_ms.size() / 2], dump = dump_ms[dump_ms.size() / 2];
  std::printf("%-8s %-6s %-6s %-6s %-7s %-12s %-12s %-10s\n", "nodes", "rails", "jobs", "ranks", "checks", "build_ms",
              "dump_ms", "view_kib");
  std::printf("%-8d %-6d %-6d %-6d %-7d %-12.1f %-12.1f %-10zu\n", nodes, rails, jobs, ranks, checks, build, dump,
              bytes / 1024);
  std::printf(
      "{\"bench\":\"web-view\",\"nodes\":%d,\"rails\":%d,\"jobs\":%d,\"ranks\":%d,\"checks\":%d,\"runs\":%d,"
      "\"build_ms_median\":%.1f,\"dump_ms_median\":%.1f,\"view_bytes\":%zu}\n",
      nodes, rails, jobs, ranks, checks, runs, build, dump, bytes);
  return 0;
}
