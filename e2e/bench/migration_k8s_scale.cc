// migration-k8s-scale: the migration controller's side at scale (issue 23,
// "Scale benchmark on kwok nodes"). On a hermetic control plane with N kwok
// GPU nodes it creates J TrainingJobs (R ranks + S spares each, every pod
// asking for a whole 8-GPU node), lets the operator create their pods, and
// runs each job's coordinator as a local `lockstep-coordinator --kube`
// process with the arguments of the coordinator pod the operator made (kwok
// pods run no process). The ranks and spares are simulated members speaking
// the coordinator's HTTP API (migration_k8s_scale_member.h). Once everything
// settled it counts API requests per minute while nothing fails (operator and
// coordinators apart), then fails one rank per job, paced: its pod deleted
// (grace 0; the survivors' collective fails at once, as it would) or its node
// cordoned (the operator annotates the pod, a planned migration), and times
// each failure until the TrainingJob's status records the migration to the
// spare (watched), with the coordinator's own detected/decided/complete times
// as the breakdown. Prints a table and one JSON line.
//
//   build/ci/e2e/bench/migration-k8s-scale [--jobs 100] [--nodes 1000] [--ranks 4] [--spares 1]
//       [--failure-kinds pod,cordon] [--failure-interval 0.5] [--idle-seconds 60] [--keep]
//
// Run from the repository root. Needs the e2e/cluster tools (scripts/install-k8s-tools).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_cli.h"
#include "lockstep/common/log.h"
#include "lockstep/kube/informer.h"
#include "lockstep/kube/object_meta.h"
#include "migration_http.h"
#include "migration_k8s_scale_member.h"
#include "operator_scale_cluster.h"
#include "operator_scale_latency.h"
#include "operator_scale_metrics.h"
#include "operator_scale_nodes.h"
#include "operator_scale_proc.h"
#include "operator_scale_round.h"

namespace lockstep::bench {
namespace {

namespace fs = std::filesystem;
using kube::Json;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

constexpr const char* kNs = "training";
constexpr const char* kJobLabel = "lockstep.dev/job";
constexpr const char* kRoleLabel = "lockstep.dev/role";
const kube::Gvr kNamespaces{"", "v1", "namespaces", false, "Namespace"};

struct Flags {
  int jobs = 100;
  int nodes = 1000;
  int ranks = 4;
  int spares = 1;
  double rate = 20;
  std::vector<std::string> kinds = {"pod", "cordon"};
  double failure_interval = 0.5;
  int idle_seconds = 60;
  int settle_timeout = 600;
  int failure_timeout = 60;
  double heartbeat_interval = 0.75;
  std::string coordinator;
  // The coordinators' default 3 s heartbeat timeout declared simulated members
  // dead at formation on this shared 2-core machine (load 25-29: 500 member
  // threads, 100 coordinators and the control plane); neither measured path
  // (pod deleted: the pod checks; cordon: a planned migration) waits on it.
  std::vector<std::string> coordinator_flags = {"--heartbeat-timeout=10s"};
  BenchClusterOptions cluster{};
};

std::optional<int> ParseFlags(int argc, char** argv, Flags& f) {
  // The binaries of the build tree this benchmark lives in.
  const fs::path build = fs::absolute(fs::path(argv[0])).parent_path().parent_path().parent_path();
  f.cluster.operator_binary = (build / "operator/lockstep-operator").string();
  f.coordinator = (build / "migration/lockstep-coordinator").string();
  f.cluster.cpu_nodes = 2;  // the coordinator pods (kwok: 110 pods a node)
  CLI::App app{
      "migration-k8s-scale: TrainingJobs with spares on kwok GPU nodes; API requests while idle, and "
      "failure -> spare recorded in the TrainingJob status. Run from the repository root.",
      "migration-k8s-scale"};
  app.add_option("--jobs", f.jobs, "protected TrainingJobs")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--nodes", f.nodes, "kwok GPU nodes (one pod of a job per node)")
      ->check(CLI::Range(1, 20000))
      ->capture_default_str();
  app.add_option("--ranks", f.ranks, "ranks per job")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--spares", f.spares, "spares per job")->check(CLI::Range(1, 16))->capture_default_str();
  app.add_option("--rate", f.rate, "node and job creates per second")->check(Positive())->capture_default_str();
  app.add_option("--failure-kinds", f.kinds, "failures, cycled over the jobs: pod (delete), cordon")
      ->delimiter(',')
      ->check(CLI::IsMember({"pod", "cordon"}))
      ->capture_default_str();
  app.add_option("--failure-interval", f.failure_interval, "seconds between two failures (each in another job)")
      ->check(CLI::Range(0.0, 60.0))
      ->capture_default_str();
  app.add_option("--idle-seconds", f.idle_seconds, "idle window")->check(CLI::Range(1, 3600))->capture_default_str();
  app.add_option("--settle-timeout", f.settle_timeout, "max wait for every job to settle, s")
      ->check(CLI::Range(1, 7200))
      ->capture_default_str();
  app.add_option("--failure-timeout", f.failure_timeout, "max wait after the last failure, s")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--heartbeat-interval", f.heartbeat_interval, "simulated members' heartbeat interval, s")
      ->check(Positive())
      ->capture_default_str();
  app.add_option("--operator", f.cluster.operator_binary, "the operator binary")->capture_default_str();
  app.add_option("--coordinator", f.coordinator, "the coordinator binary")->capture_default_str();
  app.add_option("--coordinator-flag", f.coordinator_flags,
                 "coordinator flag added to the operator's arguments, repeatable (with =); replaces the default")
      ->allow_extra_args(false)
      ->capture_default_str();
  app.add_option("--operator-flag", f.cluster.operator_flags, "extra operator flag, repeatable (with =)")
      ->allow_extra_args(false);
  app.add_option("--repo", f.cluster.repo, "repository root")->capture_default_str();
  app.add_flag("--keep", f.cluster.keep, "keep the temp dir with the logs");
  if (const auto rc = ParseArgs(app, argc, argv)) return rc;
  return std::nullopt;
}

double WallNow() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }
double Round1(double v) { return std::round(v * 10) / 10; }
std::string JobName(int i) { return "job-" + std::to_string(i); }

bool WaitFor(double timeout_s, const std::function<bool()>& done, double poll_s = 0.05) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!g_stop) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
  return false;
}

Json TrainingJob(const std::string& name, int ranks, int spares) {
  const Json gpus = {{"nvidia.com/gpu", "8"}};
  Json container = {
      {"name", "trainer"}, {"image", "lockstep/train:dev"}, {"resources", {{"requests", gpus}, {"limits", gpus}}}};
  Json pod_spec = {{"tolerations", Json::array({{{"operator", "Exists"}}})}, {"containers", Json::array({container})}};
  Json spec = {{"replicas", ranks}, {"spares", spares}, {"template", {{"spec", pod_spec}}}};
  return {{"apiVersion", "lockstep.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", kNs}}},
          {"spec", spec}};
}

// One failure and what was seen of it.
struct Failure {
  std::string kind;  // pod | cordon
  int rank = -1;
  std::string pod, node;
  double at = 0;                                      // wall time just before the API call
  std::optional<double> recorded;                     // the TrainingJob status shows the migration (watch)
  std::optional<double> detected, decided, complete;  // the coordinator's history (wall)
  std::string to_pod, cause;
};

struct JobSim {
  std::string name;
  pid_t pid = -1;
  std::atomic<int> port{0};
  std::string dir;
  std::mutex mu;
  std::vector<std::unique_ptr<SimMember>> members;  // GUARDED_BY(mu)
  std::set<std::string> simulated_pods;             // GUARDED_BY(mu)
  std::optional<Failure> failure;                   // GUARDED_BY(mu)
  int migrations_seen = 0;                          // GUARDED_BY(mu)
  std::string url() const {
    const int p = port.load();
    return p ? "http://127.0.0.1:" + std::to_string(p) : "";
  }
};

// The coordinators and the simulated members; stops them all when destroyed.
class Sim {
 public:
  Sim(const Flags& flags, std::string dir, std::string kubeconfig)
      : flags_(flags), dir_(std::move(dir)), kubeconfig_(std::move(kubeconfig)) {
    for (int i = 0; i < flags.jobs; ++i) {
      auto j = std::make_unique<JobSim>();
      j->name = JobName(i);
      j->dir = dir_ + "/" + j->name;
      fs::create_directories(j->dir);
      by_name_[j->name] = j.get();
      jobs_.push_back(std::move(j));
    }
  }
  ~Sim() {
    for (auto& j : jobs_) {
      std::lock_guard l(j->mu);
      for (auto& m : j->members) m->Stop();
    }
    for (auto& j : jobs_) {
      if (j->pid > 0) StopProcess(j->pid, std::chrono::seconds(5));
    }
  }

  std::vector<std::unique_ptr<JobSim>>& jobs() { return jobs_; }
  JobSim* Find(const std::string& name) {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

  // The coordinator pod's arguments, run here: --listen on loopback, the spare
  // template from the job's ConfigMap in a file, the admin kubeconfig.
  Status StartCoordinator(JobSim& j, const Json& coordinator_pod, const Json& configmap) {
    const Json* args = kube::FindPath(coordinator_pod, {"spec", "containers"});
    if (!args || !args->is_array() || args->empty() || !(*args)[0].contains("args")) {
      return Internal("coordinator pod of " + j.name + " has no args");
    }
    const std::string tpl = j.dir + "/spare-pod.json";
    std::ofstream(tpl) << kube::GetString(configmap, {"data", "spare-pod.json"});
    std::vector<std::string> argv = {flags_.coordinator};
    // A --coordinator-flag replaces the operator's value of the same flag (the
    // coordinator takes each flag once).
    std::set<std::string> replaced;
    for (const std::string& f : flags_.coordinator_flags) replaced.insert(f.substr(0, f.find('=')));
    const Json& a = (*args)[0]["args"];
    for (size_t k = 0; k < a.size(); ++k) {
      std::string v = a[k].get<std::string>();
      if (replaced.count(v.substr(0, v.find('=')))) {
        if (v.find('=') == std::string::npos) ++k;  // and its value
        continue;
      }
      argv.push_back(v);
      if (k + 1 < a.size() && (v == "--listen" || v == "--spare-pod-template")) {
        argv.push_back(v == "--listen" ? "127.0.0.1:0" : tpl);
        ++k;
      }
    }
    for (const std::string& extra : {"--kubeconfig=" + kubeconfig_, "--port-file=" + j.dir + "/port"}) {
      argv.push_back(extra);
    }
    argv.insert(argv.end(), flags_.coordinator_flags.begin(), flags_.coordinator_flags.end());
    auto pid = SpawnProcess(argv, j.dir + "/coordinator.log");
    if (!pid.ok()) return pid.error();
    j.pid = *pid;
    return Status::Ok();
  }

  // Reads the port files of started coordinators; true once all are known.
  bool ReadPorts() {
    bool all = true;
    for (auto& j : jobs_) {
      if (j->port.load() || j->pid <= 0) continue;
      std::ifstream in(j->dir + "/port");
      int p = 0;
      if (in >> p && p > 0) {
        j->port = p;
      } else {
        all = false;
      }
    }
    return all;
  }

  // A member for a pod of the job (rank >= 0: that rank's pod; -1: a spare),
  // once per pod.
  void AddMember(JobSim& j, const std::string& pod, const std::string& uid, int rank) {
    std::lock_guard l(j.mu);
    if (!j.simulated_pods.insert(pod).second) return;
    const int n = next_host_++;
    MemberOptions o{.id = pod,
                    .rank = rank,
                    .pod = pod,
                    .uid = uid,
                    .host = "10.200." + std::to_string(n / 250) + "." + std::to_string(n % 250 + 1),
                    .url = [&j] { return j.url(); },
                    .heartbeat_interval_s = flags_.heartbeat_interval};
    auto m = std::make_unique<SimMember>(std::move(o));
    m->Start();
    j.members.push_back(std::move(m));
  }

  // The member holding `rank`, or null.
  SimMember* Holder(JobSim& j, int rank) {
    std::lock_guard l(j.mu);
    for (auto& m : j.members) {
      if (!m->ended() && m->rank() == rank) return m.get();
    }
    return nullptr;
  }

  // Spare members registered and waiting (not ended, holding no rank).
  int WaitingSpares(JobSim& j) {
    std::lock_guard l(j.mu);
    int n = 0;
    for (auto& m : j.members) n += m->registered() && !m->ended() && m->rank() < 0 ? 1 : 0;
    return n;
  }

  long FailedCalls() {
    long n = 0;
    for (auto& j : jobs_) {
      std::lock_guard l(j->mu);
      for (auto& m : j->members) n += m->failed_calls();
    }
    return n;
  }
  long Calls() {
    long n = 0;
    for (auto& j : jobs_) {
      std::lock_guard l(j->mu);
      for (auto& m : j->members) n += m->calls();
    }
    return n;
  }

 private:
  const Flags& flags_;
  std::string dir_, kubeconfig_;
  std::vector<std::unique_ptr<JobSim>> jobs_;
  std::map<std::string, JobSim*> by_name_;
  int next_host_ = 0;  // GUARDED_BY: callers serialise AddMember per job; the counter races benignly
};

std::optional<double> WallSeconds(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

struct CoordinatorsSample {
  double cpu_seconds = 0, rss_mb = 0;
  int running = 0;
};
CoordinatorsSample SampleCoordinators(Sim& sim) {
  CoordinatorsSample s;
  for (auto& j : sim.jobs()) {
    if (j->pid <= 0) continue;
    auto p = SampleProcess(j->pid);
    if (!p.ok()) continue;
    ++s.running;
    s.cpu_seconds += p->cpu_seconds;
    s.rss_mb += p->rss_mb;
  }
  return s;
}

// lockstep_kube_requests_total of every coordinator, summed by series.
RequestCounts CoordinatorRequests(Sim& sim, std::map<std::string, MetricSamples>& before, bool first) {
  RequestCounts total;
  std::map<std::string, double> detail;
  for (auto& j : sim.jobs()) {
    if (!j->port.load()) continue;
    auto text = HttpGet(j->port.load(), "/metrics", std::chrono::seconds(5));
    if (!text.ok()) continue;
    MetricSamples now = MetricSamples::Parse(*text);
    if (first) {
      before[j->name] = now;
      continue;
    }
    const MetricSamples d = now.Since(before[j->name]);
    RequestCounts c = CountRequests(d);
    total.total += c.total;
    total.leases += c.leases;
    for (const auto& [labels, v] : d.Series("lockstep_kube_requests_total")) detail[labels] += v;
  }
  for (const auto& [labels, v] : detail) {
    total.non_lease_detail += (total.non_lease_detail.empty() ? "" : ", ") + labels + ": " + std::to_string(long(v));
  }
  if (total.non_lease_detail.empty()) total.non_lease_detail = "none";
  return total;
}

struct Outcome {
  int jobs = 0, nodes = 0, coordinators = 0, settled_jobs = 0;
  double setup_s = 0, settle_s = 0;
  double idle_s = 0, idle_op_per_min = 0, idle_op_non_lease_per_min = 0, idle_coord_per_min = 0;
  std::string idle_op_detail, idle_coord_detail;
  double idle_op_cpu = 0, idle_coord_cpu = 0;
  double op_cpu = 0, op_rss = 0, op_hwm = 0, coord_cpu = 0, coord_rss_total = 0;
  std::vector<Failure> failures;
  long member_calls = 0, member_failed_calls = 0;
  int skipped = 0;  // settled jobs not failed: no live member held the rank any more
};

std::string Ms(std::optional<double> v) {
  if (!v) return "never";
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", *v);
  return b;
}
Json MsJson(std::optional<double> v) { return v ? Json(Round1(*v)) : Json(nullptr); }

// p50/p99/max over failures of (to - at) in ms; a failure without `to` is unbounded.
NodeLatencyStats Stats(const std::vector<Failure>& fs, const std::string& kind, std::optional<double> Failure::*to) {
  std::vector<std::optional<double>> v;
  for (const Failure& f : fs) {
    if (!kind.empty() && f.kind != kind) continue;
    v.push_back((f.*to) ? std::optional<double>(1000 * (*(f.*to) - f.at)) : std::nullopt);
  }
  return ScoreNodeLatencies(v);
}

int Run(const Flags& flags) {
  Clock& clock = SystemClock::Instance();
  Outcome r;
  r.jobs = flags.jobs;
  r.nodes = flags.nodes;
  const double t_start = WallNow();
  if (flags.jobs * (flags.ranks + flags.spares) > flags.nodes) {
    std::cerr << "migration-k8s-scale: " << flags.jobs << " jobs of " << flags.ranks + flags.spares
              << " pods need as many nodes (each pod takes a whole node); --nodes is " << flags.nodes << "\n";
    return 2;
  }
  if (::access(flags.coordinator.c_str(), X_OK) != 0) {
    std::cerr << "migration-k8s-scale: " << flags.coordinator << " not found (--coordinator)\n";
    return 2;
  }
  BenchCluster cluster(flags.cluster);
  Progress("starting a cluster (" + std::to_string(flags.cluster.cpu_nodes) + " CPU nodes)");
  Status s = cluster.Up();
  if (s.ok()) {
    Progress("installing the chart");
    s = cluster.InstallChart();
  }
  if (s.ok()) {
    Progress("starting the operator");
    s = cluster.StartOperator();
  }
  if (!s.ok()) {
    std::cerr << "migration-k8s-scale: " << s.error().message << "\n";
    return 1;
  }
  auto api_r = cluster.AdminApi(clock);
  if (!api_r.ok()) {
    std::cerr << "migration-k8s-scale: " << api_r.error().message << "\n";
    return 1;
  }
  kube::KubeApi& api = **api_r;
  const std::string sim_dir = cluster.cluster_dir() + "/../k8s-scale";
  fs::create_directories(sim_dir);
  Sim sim(flags, sim_dir, cluster.cluster_dir() + "/kubeconfig");

  // Watches: the job's pods (spares to simulate) and the TrainingJobs (status).
  kube::Informer pods(api, kube::gvr::kPods, {.ns = kNs});
  kube::Informer tjobs(api, kube::gvr::kTrainingJobs, {.ns = kNs});
  std::atomic<bool> members_on{false};
  auto on_pod = [&](const kube::ObjectPtr& p) {
    if (!members_on || kube::GetString(*p, {"metadata", "labels", kRoleLabel}) != "spare") return;
    if (kube::FindPath(*p, {"metadata", "deletionTimestamp"})) return;
    if (kube::GetString(*p, {"status", "phase"}) != "Running") return;
    JobSim* j = sim.Find(kube::GetString(*p, {"metadata", "labels", kJobLabel}));
    if (j) sim.AddMember(*j, kube::Name(*p), kube::Uid(*p), -1);
  };
  pods.AddEventHandlers(
      {.on_add = on_pod, .on_update = [&](const kube::ObjectPtr&, const kube::ObjectPtr& p) { on_pod(p); }});
  auto on_job = [&](const kube::ObjectPtr& o) {
    const double now = WallNow();
    JobSim* j = sim.Find(kube::Name(*o));
    if (!j) return;
    const Json* n = kube::FindPath(*o, {"status", "migrations"});
    const int migrations = n && n->is_number_integer() ? n->get<int>() : 0;
    std::lock_guard l(j->mu);
    if (migrations <= j->migrations_seen) return;
    j->migrations_seen = migrations;
    if (j->failure && !j->failure->recorded) {
      j->failure->recorded = now;
      j->failure->to_pod = kube::GetString(*o, {"status", "lastMigration", "toPod"});
    }
  };
  tjobs.AddEventHandlers(
      {.on_add = on_job, .on_update = [&](const kube::ObjectPtr&, const kube::ObjectPtr& o) { on_job(o); }});
  pods.Start();
  tjobs.Start();

  // 1. Nodes.
  Progress("creating " + std::to_string(flags.nodes) + " kwok GPU nodes");
  auto first_ip = ReserveNodeIps(cluster.cluster_dir(), flags.nodes);
  if (!first_ip.ok()) {
    std::cerr << "migration-k8s-scale: " << first_ip.error().message << "\n";
    return 1;
  }
  PaceOptions pace{.per_second = flags.rate, .threads = 8};
  s = RunPaced(clock, flags.nodes, pace, g_stop, [&](int i) {
    auto c = api.Create(kube::gvr::kNodes, "", GpuNode("gpu-" + std::to_string(i), *first_ip + i));
    return c.ok() || c.code() == ErrorCode::kAlreadyExists ? Status::Ok() : Status(c.error());
  });
  if (s.ok()) {
    auto ns =
        api.Create(kNamespaces, "", Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}});
    if (!ns.ok() && ns.code() != ErrorCode::kAlreadyExists) s = ns.error();
  }
  // 2. TrainingJobs.
  if (s.ok()) {
    Progress("creating " + std::to_string(flags.jobs) + " TrainingJobs");
    s = RunPaced(clock, flags.jobs, pace, g_stop, [&](int i) {
      auto c = api.Create(kube::gvr::kTrainingJobs, kNs, TrainingJob(JobName(i), flags.ranks, flags.spares));
      return c.ok() || c.code() == ErrorCode::kAlreadyExists ? Status::Ok() : Status(c.error());
    });
  }
  if (!s.ok()) {
    std::cerr << "migration-k8s-scale: " << s.error().message << "\n";
    return g_stop ? 130 : 1;
  }
  // 3. Their rank pods running and their coordinator pods made: start the coordinators.
  Progress("waiting for the rank pods and coordinator pods; starting the coordinators here");
  auto ready_to_start = [&](JobSim& j, Json* coord, Json* cm) {
    kube::ObjectPtr cp = pods.store().Get(kNs, j.name + "-coordinator");
    if (!cp) return false;
    for (int r = 0; r < flags.ranks; ++r) {
      kube::ObjectPtr p = pods.store().Get(kNs, j.name + "-rank-" + std::to_string(r));
      if (!p || kube::GetString(*p, {"status", "phase"}) != "Running") return false;
    }
    auto c = api.Get(kube::gvr::kConfigMaps, kNs, j.name + "-coordinator");
    if (!c.ok()) return false;
    *coord = *cp;
    *cm = *c;
    return true;
  };
  members_on = true;
  std::set<std::string> started;
  const bool all_started = WaitFor(
      flags.settle_timeout,
      [&] {
        for (auto& j : sim.jobs()) {
          if (started.count(j->name)) continue;
          Json coord, cm;
          if (!ready_to_start(*j, &coord, &cm)) continue;
          if (Status st = sim.StartCoordinator(*j, coord, cm); !st.ok()) {
            Progress("WARNING: " + j->name + ": " + st.error().message);
            continue;
          }
          started.insert(j->name);
          for (int rk = 0; rk < flags.ranks; ++rk) {
            kube::ObjectPtr p = pods.store().Get(kNs, j->name + "-rank-" + std::to_string(rk));
            sim.AddMember(*j, kube::Name(*p), kube::Uid(*p), rk);
          }
        }
        sim.ReadPorts();
        // Spares created before members_on was read are picked up here.
        for (const auto& p : pods.store().List()) {
          if (kube::GetString(*p, {"metadata", "labels", kRoleLabel}) == "spare") on_pod(p);
        }
        return static_cast<int>(started.size()) == flags.jobs;
      },
      0.5);
  r.coordinators = static_cast<int>(started.size());
  r.setup_s = WallNow() - t_start;
  if (!all_started) {
    Progress("WARNING: only " + std::to_string(started.size()) + " of " + std::to_string(flags.jobs) +
             " jobs got their pods in time");
  }
  // 4. Settled: generation 0 complete, spares waiting, the TrainingJob Running.
  Progress("waiting for every job to settle (generation 0 complete, spares waiting, TrainingJob Running)");
  const double t_settle0 = WallNow();
  std::set<std::string> settled;
  WaitFor(
      flags.settle_timeout,
      [&] {
        sim.ReadPorts();
        for (auto& j : sim.jobs()) {
          if (settled.count(j->name) || !j->port.load()) continue;
          if (sim.WaitingSpares(*j) < flags.spares) continue;
          kube::ObjectPtr tj = tjobs.store().Get(kNs, j->name);
          if (!tj || kube::GetString(*tj, {"status", "phase"}) != "Running") continue;
          const Json* spares = kube::FindPath(*tj, {"status", "availableSpares"});
          if (!spares || !spares->is_number_integer() || spares->get<int>() < flags.spares) continue;
          auto st = migration::HttpCall("GET", j->url() + "/v1/state", "", 3.0);
          if (st.status != 200) continue;
          Json state = Json::parse(st.body, nullptr, false);
          if (!state.is_object() || !state.contains("history") || state["history"].empty() ||
              state["history"].back().value("status", "") != "complete") {
            continue;
          }
          settled.insert(j->name);
        }
        return static_cast<int>(settled.size()) == r.coordinators;
      },
      1.0);
  r.settled_jobs = static_cast<int>(settled.size());
  r.settle_s = WallNow() - t_settle0;
  Progress(std::to_string(r.settled_jobs) + " of " + std::to_string(flags.jobs) + " jobs settled in " +
           std::to_string(static_cast<int>(r.settle_s)) + " s");
  if (g_stop) return 130;

  // 5. Idle.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  Progress("idle: counting API requests for " + std::to_string(flags.idle_seconds) + " s");
  std::map<std::string, MetricSamples> coord_before;
  CoordinatorRequests(sim, coord_before, true);
  auto op0 = HttpGet(cluster.metrics_port(), "/metrics", std::chrono::seconds(5));
  auto op_proc0 = SampleProcess(cluster.operator_pid());
  const CoordinatorsSample c0 = SampleCoordinators(sim);
  const double i0 = WallNow();
  WaitFor(
      flags.idle_seconds, [] { return false; }, 0.2);
  if (g_stop) return 130;
  r.idle_s = WallNow() - i0;
  auto op1 = HttpGet(cluster.metrics_port(), "/metrics", std::chrono::seconds(5));
  auto op_proc1 = SampleProcess(cluster.operator_pid());
  const CoordinatorsSample c1 = SampleCoordinators(sim);
  const RequestCounts coord_idle = CoordinatorRequests(sim, coord_before, false);
  const double minutes = r.idle_s / 60;
  if (op0.ok() && op1.ok()) {
    RequestCounts op = CountRequests(MetricSamples::Parse(*op1).Since(MetricSamples::Parse(*op0)));
    r.idle_op_per_min = op.total / minutes;
    r.idle_op_non_lease_per_min = op.non_lease() / minutes;
    r.idle_op_detail = op.non_lease_detail;
  }
  if (op_proc0.ok() && op_proc1.ok()) r.idle_op_cpu = 100 * (op_proc1->cpu_seconds - op_proc0->cpu_seconds) / r.idle_s;
  r.idle_coord_per_min = coord_idle.total / minutes;
  r.idle_coord_detail = coord_idle.non_lease_detail;
  r.idle_coord_cpu = 100 * (c1.cpu_seconds - c0.cpu_seconds) / r.idle_s;

  // 6. Failures, one per settled job, paced.
  Progress("failing one rank in each of " + std::to_string(settled.size()) + " jobs, every " +
           std::to_string(flags.failure_interval) + " s");
  auto f_proc0 = SampleProcess(cluster.operator_pid());
  const CoordinatorsSample fc0 = SampleCoordinators(sim);
  const double f0 = WallNow();
  int k = 0;
  std::vector<JobSim*> failed;
  for (auto& j : sim.jobs()) {
    if (g_stop || !settled.count(j->name)) continue;
    Failure f;
    f.kind = flags.kinds[k % flags.kinds.size()];
    f.rank = k % flags.ranks;
    ++k;
    SimMember* holder = sim.Holder(*j, f.rank);
    if (!holder) {  // the job lost the rank's member since it settled (a member declared dead under load)
      ++r.skipped;
      continue;
    }
    f.pod = holder->pod();
    kube::ObjectPtr p = pods.store().Get(kNs, f.pod);
    if (!p) continue;
    f.node = kube::GetString(*p, {"spec", "nodeName"});
    {
      std::lock_guard l(j->mu);
      j->failure = f;
      j->failure->at = WallNow();
    }
    Status st;
    if (f.kind == "pod") {
      holder->Kill();
      st = api.Delete(kube::gvr::kPods, kNs, f.pod, "", 0);
      std::lock_guard l(j->mu);
      for (auto& m : j->members) {
        if (m.get() != holder && m->rank() >= 0) m->PeerError();
      }
    } else {
      auto pr = api.MergePatch(kube::gvr::kNodes, "", f.node, Json{{"spec", {{"unschedulable", true}}}});
      if (!pr.ok()) st = pr.error();
    }
    if (!st.ok()) Progress("WARNING: failing " + f.pod + ": " + st.error().message);
    failed.push_back(j.get());
    std::this_thread::sleep_for(std::chrono::duration<double>(flags.failure_interval));
  }
  auto all_recorded = [&] {
    for (JobSim* j : failed) {
      std::lock_guard l(j->mu);
      if (!j->failure->recorded) return false;
    }
    return true;
  };
  WaitFor(flags.failure_timeout, all_recorded, 0.1);
  const double f1 = WallNow();
  auto f_proc1 = SampleProcess(cluster.operator_pid());
  const CoordinatorsSample fc1 = SampleCoordinators(sim);
  if (f_proc0.ok() && f_proc1.ok()) {
    r.op_cpu = 100 * (f_proc1->cpu_seconds - f_proc0->cpu_seconds) / (f1 - f0);
    r.op_rss = f_proc1->rss_mb;
    r.op_hwm = f_proc1->hwm_mb;
  }
  r.coord_cpu = 100 * (fc1.cpu_seconds - fc0.cpu_seconds) / (f1 - f0);
  r.coord_rss_total = fc1.rss_mb;
  // The coordinators' own times of each failure (the last generation).
  for (JobSim* j : failed) {
    Failure f;
    {
      std::lock_guard l(j->mu);
      f = *j->failure;
    }
    auto st = migration::HttpCall("GET", j->url() + "/v1/state", "", 3.0);
    Json state = st.status == 200 ? Json::parse(st.body, nullptr, false) : Json();
    if (state.is_object() && state.contains("history") && state["history"].size() > 1) {
      const Json& g = state["history"].back();
      f.detected = WallSeconds(g, "detected_at");
      f.decided = WallSeconds(g, "decided_at");
      if (g.value("status", "") == "complete") f.complete = WallSeconds(g, "complete_at");
      f.cause = g.value("cause", "");
    }
    r.failures.push_back(f);
  }
  r.member_calls = sim.Calls();
  r.member_failed_calls = sim.FailedCalls();

  // 7. Report.
  std::printf(
      "\nmigration-k8s-scale: %d TrainingJobs (%d ranks + %d spare) on %d kwok GPU nodes; %d coordinators "
      "run here as processes, members simulated\n\n",
      flags.jobs, flags.ranks, flags.spares, flags.nodes, r.coordinators);
  std::printf("setup %.0f s, settle %.0f s (%d of %d jobs settled)\n", r.setup_s, r.settle_s, r.settled_jobs,
              flags.jobs);
  std::printf("idle %.0f s: operator %.1f requests/min (%.1f not leases: %s), %.2f%% CPU\n", r.idle_s,
              r.idle_op_per_min, r.idle_op_non_lease_per_min, r.idle_op_detail.c_str(), r.idle_op_cpu);
  std::printf("idle: coordinators %.1f requests/min in all (%.1f per job): %s; %.1f%% CPU in all\n",
              r.idle_coord_per_min, r.idle_coord_per_min / std::max(1, r.coordinators), r.idle_coord_detail.c_str(),
              r.idle_coord_cpu);
  if (r.skipped > 0)
    std::printf("WARNING: %d settled jobs not failed: the rank had no live member any more\n", r.skipped);
  std::printf(
      "failures (%zu over %.0f s): operator %.1f%% CPU, RSS %.1f MB (peak %.1f); coordinators %.1f%% CPU, "
      "RSS %.0f MB in all\n\n",
      r.failures.size(), f1 - f0, r.op_cpu, r.op_rss, r.op_hwm, r.coord_cpu, r.coord_rss_total);
  std::printf("%-8s %6s %-22s %8s %8s %8s %8s\n", "kind", "count", "failure ->", "p50 ms", "p99 ms", "max ms", "never");
  std::vector<std::string> kinds = flags.kinds;
  kinds.push_back("");
  for (const std::string& kind : kinds) {
    for (auto [label, to] : std::vector<std::pair<const char*, std::optional<double> Failure::*>>{
             {"detected (coordinator)", &Failure::detected},
             {"spare assigned", &Failure::decided},
             {"generation complete", &Failure::complete},
             {"recorded in status", &Failure::recorded}}) {
      NodeLatencyStats st = Stats(r.failures, kind, to);
      std::printf("%-8s %6zu %-22s %8s %8s %8s %8zu\n", kind.empty() ? "all" : kind.c_str(), st.nodes, label,
                  Ms(st.p50).c_str(), Ms(st.p99).c_str(), Ms(st.max).c_str(), st.never_seen);
    }
  }
  std::printf("\nsimulated members: %ld calls to the coordinators, %ld not 200\n\n", r.member_calls,
              r.member_failed_calls);
  const NodeLatencyStats all = Stats(r.failures, "", &Failure::recorded);
  Json out = {{"bench", "migration-k8s-scale"},
              {"jobs", flags.jobs},
              {"nodes", flags.nodes},
              {"ranks", flags.ranks},
              {"spares", flags.spares},
              {"coordinators", r.coordinators},
              {"settled_jobs", r.settled_jobs},
              {"failures", r.failures.size()},
              {"jobs_not_failed", r.skipped},
              {"failures_never_recorded", all.never_seen},
              {"failure_to_spare_p50_ms", MsJson(all.p50)},
              {"failure_to_spare_p99_ms", MsJson(all.p99)},
              {"failure_to_spare_max_ms", MsJson(all.max)},
              {"failure_to_assigned_p50_ms", MsJson(Stats(r.failures, "", &Failure::decided).p50)},
              {"failure_to_assigned_p99_ms", MsJson(Stats(r.failures, "", &Failure::decided).p99)},
              {"operator_cpu_percent", Round1(r.op_cpu)},
              {"operator_rss_mb", Round1(r.op_rss)},
              {"operator_rss_hwm_mb", Round1(r.op_hwm)},
              {"coordinators_cpu_percent", Round1(r.coord_cpu)},
              {"coordinators_rss_mb", Round1(r.coord_rss_total)},
              {"idle_seconds", Round1(r.idle_s)},
              {"idle_requests_per_min", Round1(r.idle_op_per_min + r.idle_coord_per_min)},
              {"idle_operator_requests_per_min", Round1(r.idle_op_per_min)},
              {"idle_operator_non_lease_requests_per_min", Round1(r.idle_op_non_lease_per_min)},
              {"idle_coordinator_requests_per_min", Round1(r.idle_coord_per_min)},
              {"idle_operator_cpu_percent", Round1(r.idle_op_cpu)},
              {"idle_coordinators_cpu_percent", Round1(r.idle_coord_cpu)}};
  for (const std::string& kind : flags.kinds) {
    const NodeLatencyStats st = Stats(r.failures, kind, &Failure::recorded);
    out[kind] = {{"count", st.nodes}, {"never", st.never_seen}, {"p50_ms", MsJson(st.p50)}, {"p99_ms", MsJson(st.p99)}};
  }
  std::cout << out.dump() << std::endl;
  return r.settled_jobs == flags.jobs && all.never_seen == 0 && !r.failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  using namespace lockstep;
  bench::Flags flags;
  if (const auto rc = bench::ParseFlags(argc, argv, flags)) return *rc;
  log::SetLevel(log::Level::kWarn);
  log::SetComponent("migration-k8s-scale");
  std::signal(SIGINT, bench::OnSignal);
  std::signal(SIGTERM, bench::OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  // 100 coordinators and a thread per simulated member: more descriptors than the default 1024.
  rlimit fd{};
  if (::getrlimit(RLIMIT_NOFILE, &fd) == 0 && fd.rlim_cur < fd.rlim_max) {
    fd.rlim_cur = std::min<rlim_t>(fd.rlim_max, 65536);
    ::setrlimit(RLIMIT_NOFILE, &fd);
  }
  return bench::Run(flags);
}
