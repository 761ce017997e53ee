#include "operator_scale_round.h"

#include <cstdio>
#include <functional>
#include <iostream>
#include <set>
#include <thread>

#include "lockstep/kube/object_meta.h"
#include "operator_scale_proc.h"

namespace lockstep::bench {
namespace {

using kube::Json;

constexpr const char* kDaemonSet = "lockstep-agent-default";
constexpr const char* kPolicy = "default";
constexpr const char* kAgentSelector = "app.kubernetes.io/name=lockstep-agent";

double Seconds(Nanos d) { return std::chrono::duration<double>(d).count(); }
double Millis(Nanos d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Polls `done` every `poll` until it returns true (-> true), `timeout` passes
// or `stop` is set (-> false).
bool WaitFor(Clock& clock, Nanos timeout, const std::atomic<bool>& stop, const std::function<bool()>& done,
             Nanos poll = std::chrono::milliseconds(20)) {
  const MonoTime deadline = clock.Monotonic() + timeout;
  while (!stop) {
    if (done()) return true;
    if (clock.Monotonic() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return false;
}

Result<MetricSamples> Scrape(const BenchCluster& cluster) {
  auto text = HttpGet(cluster.metrics_port(), "/metrics", std::chrono::seconds(5));
  if (!text.ok()) return text.error();
  return MetricSamples::Parse(*text);
}

std::string Fixed(double v, int decimals = 0) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// What the operator did during a phase, from two scrapes of its /metrics.
std::string PhaseDetail(const MetricSamples& d) {
  std::string out;
  for (const char* ctl : {"fabrichealth", "fabricpolicy"}) {
    out += std::string(ctl) + " reconciles " + Fixed(d.Sum("lockstep_reconcile_total", {{"controller", ctl}})) +
           " (errors " + Fixed(d.Sum("lockstep_reconcile_total", {{"controller", ctl}, {"result", "error"}})) +
           ", requeues " + Fixed(d.Sum("lockstep_reconcile_total", {{"controller", ctl}, {"result", "requeue"}})) +
           "), mean " + Fixed(d.MeanMs("lockstep_reconcile_duration_seconds", {{"controller", ctl}}), 2) + " ms; ";
  }
  out += "API mean ms:";
  for (const char* verb : {"get", "list", "create", "update", "patch", "apply", "delete"}) {
    if (d.Sum("lockstep_kube_request_duration_seconds_count", {{"verb", verb}}) == 0) continue;
    out += std::string(" ") + verb + " " +
           Fixed(d.MeanMs("lockstep_kube_request_duration_seconds", {{"verb", verb}}), 1);
  }
  out += "; requests: " + CountRequests(d).non_lease_detail;
  return out;
}

Result<std::vector<Json>> ListAll(kube::KubeApi& api, const kube::Gvr& gvr, const std::string& ns,
                                  const std::string& selector = "") {
  std::vector<Json> items;
  kube::ListOptions lo{.label_selector = selector, .limit = 500};
  do {
    auto page = api.List(gvr, ns, lo);
    if (!page.ok()) return page.error();
    if (const Json* list = kube::FindPath(*page, {"items"}); list && list->is_array()) {
      for (const Json& item : *list) items.push_back(item);
    }
    lo.continue_token = kube::GetString(*page, {"metadata", "continue"});
  } while (!lo.continue_token.empty());
  return items;
}

std::string OwnerUid(const Json& health) {
  const Json* refs = kube::FindPath(health, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_array() || refs->empty()) return "";
  return kube::GetString((*refs)[0], {"uid"});
}

// The agent DaemonSet has rolled out to exactly `n` nodes and the policy's
// status (written by the operator) says so.
bool RolledOut(kube::KubeApi& api, int n) {
  auto ds = api.Get(kube::gvr::kDaemonSets, BenchCluster::kNamespace, kDaemonSet);
  auto policy = api.Get(kube::gvr::kFabricPolicies, "", kPolicy);
  if (!ds.ok() || !policy.ok()) return false;
  for (const char* f : {"desiredNumberScheduled", "updatedNumberScheduled", "numberReady", "numberAvailable"}) {
    if (kube::GetInt(*ds, {"status", f}, -1) != n) return false;
  }
  const std::string want = std::to_string(n) + "/" + std::to_string(n);
  return kube::GetString(*policy, {"status", "nodes"}) == want;
}

}  // namespace

std::vector<std::string> RoundNodeNames(int round, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("scale" + std::to_string(round) + "-" + std::to_string(i));
  return names;
}

void Progress(const std::string& message) {
  static const MonoTime start = std::chrono::steady_clock::now();
  char buf[32];
  std::snprintf(buf, sizeof buf, "+%.1fs", Seconds(std::chrono::steady_clock::now() - start));
  std::cerr << "[operator-scale " << buf << "] " << message << std::endl;
}

HealthWatch::HealthWatch(kube::KubeApi& api, Clock& clock)
    : clock_(clock), informer_(api, kube::gvr::kFabricHealths, {.watch_timeout_seconds = 1800}) {
  informer_.AddEventHandlers({.on_add = [this](const kube::ObjectPtr& o) {
    MonoTime now = clock_.Monotonic();
    std::lock_guard l(mu_);
    auto [it, inserted] = adds_.try_emplace(kube::Name(*o), now, 0);
    it->second.second++;
  }});
}

std::optional<MonoTime> HealthWatch::FirstSeen(const std::string& name) const {
  std::lock_guard l(mu_);
  auto it = adds_.find(name);
  if (it == adds_.end()) return std::nullopt;
  return it->second.first;
}

int HealthWatch::Adds(const std::string& name) const {
  std::lock_guard l(mu_);
  auto it = adds_.find(name);
  return it == adds_.end() ? 0 : it->second.second;
}

int HealthWatch::SeenCount(const std::vector<std::string>& names) const {
  std::lock_guard l(mu_);
  int n = 0;
  for (const auto& name : names) n += adds_.count(name) ? 1 : 0;
  return n;
}

Result<RoundResult> RunRound(BenchCluster& cluster, kube::KubeApi& api, HealthWatch& watch, Clock& clock,
                             const RoundOptions& options, const std::atomic<bool>& stop) {
  const int n = options.nodes;
  const std::vector<std::string> names = RoundNodeNames(options.round, n);
  auto ip0 = ReserveNodeIps(cluster.cluster_dir(), n);
  if (!ip0.ok()) return ip0.error();
  std::vector<Json> objects;
  for (int i = 0; i < n; ++i) objects.push_back(GpuNode(names[i], *ip0 + i));
  // Elements i written by the one thread that creates node i. Node i is timed
  // from just before its first create attempt.
  std::vector<std::optional<MonoTime>> before(n);
  std::vector<MonoTime> created(n);
  std::vector<std::string> uids(n);

  RoundResult r;
  r.nodes = n;
  auto requests0 = Scrape(cluster);
  auto proc0 = SampleProcess(cluster.operator_pid());
  if (!requests0.ok()) return requests0.error();
  if (!proc0.ok()) return proc0.error();
  Progress("creating " + std::to_string(n) + " GPU nodes at " + Fixed(options.pace.per_second, 1) +
           "/s from " + std::to_string(options.pace.threads) + " threads");
  const MonoTime t0 = clock.Monotonic();
  Status made = RunPaced(clock, n, options.pace, stop, [&](int i) -> Status {
    if (!before[i]) before[i] = clock.Monotonic();
    auto res = api.Create(kube::gvr::kNodes, "", objects[i]);
    if (!res.ok() && res.code() == ErrorCode::kAlreadyExists) {
      res = api.Get(kube::gvr::kNodes, "", names[i]);  // an earlier attempt went through
    }
    if (!res.ok()) return res.error();
    created[i] = clock.Monotonic();
    uids[i] = kube::Uid(*res);
    return Status::Ok();
  });
  if (!made.ok()) return made.error();
  if (stop) return Unavailable("interrupted");
  r.create_seconds = Seconds(clock.Monotonic() - t0);
  Progress("created " + std::to_string(n) + " nodes in " + Fixed(r.create_seconds, 1) +
           " s; waiting for their FabricHealths");

  MonoTime next_scrape = t0;
  r.converged = WaitFor(clock, options.converge_timeout, stop, [&] {
    if (clock.Monotonic() >= next_scrape) {  // the health work queue's backlog, 4 times a second
      next_scrape = clock.Monotonic() + std::chrono::milliseconds(250);
      if (auto m = Scrape(cluster); m.ok()) {
        r.max_queue_depth = std::max(r.max_queue_depth,
                                     m->Sum("lockstep_workqueue_depth", {{"controller", "fabrichealth"}}));
      }
    }
    return watch.SeenCount(names) == n || !cluster.OperatorRunning();
  });
  if (!cluster.OperatorRunning()) return Unavailable("the operator exited:\n" + cluster.OperatorLogTail(20));
  if (stop) return Unavailable("interrupted");
  const MonoTime t1 = clock.Monotonic();
  auto proc1 = SampleProcess(cluster.operator_pid());
  auto requests1 = Scrape(cluster);
  if (!proc1.ok()) return proc1.error();
  if (!requests1.ok()) return requests1.error();

  std::vector<std::optional<double>> latencies(n);
  std::vector<double> create_calls;
  MonoTime last_seen = t0;
  for (int i = 0; i < n; ++i) {
    create_calls.push_back(Millis(created[i] - *before[i]));
    auto seen = watch.FirstSeen(names[i]);
    if (!seen) continue;
    latencies[i] = Millis(*seen - *before[i]);
    last_seen = std::max(last_seen, *seen);
  }
  r.latency_ms = ScoreNodeLatencies(latencies);
  r.create_call_ms = Percentiles(create_calls);
  r.converge_seconds = Seconds(last_seen - t0);
  r.cpu_percent = 100 * (proc1->cpu_seconds - proc0->cpu_seconds) / Seconds(t1 - t0);
  r.rss_mb = proc1->rss_mb;
  r.hwm_mb = proc1->hwm_mb;
  const MetricSamples phase = requests1->Since(*requests0);
  r.requests_per_node = CountRequests(phase).non_lease() / n;
  r.phase_detail = PhaseDetail(phase);
  Progress(std::string(r.converged ? "all " : "NOT all ") + "FabricHealths seen (" +
           std::to_string(r.latency_ms.seen) + "/" + std::to_string(n) + "); checking them");

  // Exactly one FabricHealth per node of this round, owned by that node, and no others.
  auto healths = ListAll(api, kube::gvr::kFabricHealths, "");
  if (!healths.ok()) return healths.error();
  std::map<std::string, std::string> uid_by_name;
  for (int i = 0; i < n; ++i) uid_by_name[names[i]] = uids[i];
  for (const Json& h : *healths) {
    auto it = uid_by_name.find(kube::Name(h));
    if (it == uid_by_name.end()) {
      ++r.extra_healths;
      continue;
    }
    ++r.healths;
    if (OwnerUid(h) != it->second) ++r.wrong_owner;
  }
  for (const auto& name : names) r.duplicate_adds += watch.Adds(name) > 1 ? 1 : 0;

  Progress("waiting for the agent DaemonSet to roll out to " + std::to_string(n) + " nodes");
  r.settled = WaitFor(clock, options.settle_timeout, stop, [&] { return RolledOut(api, n); }, std::chrono::seconds(1));
  if (stop) return Unavailable("interrupted");
  if (!r.settled) Progress("WARNING: the rollout did not finish in time; measuring idle anyway");
  std::this_thread::sleep_for(options.quiet_before_idle);

  Progress("idle: counting the operator's API requests for " + Fixed(Seconds(options.idle)) + " s");
  auto idle_requests0 = Scrape(cluster);
  auto idle_proc0 = SampleProcess(cluster.operator_pid());
  const MonoTime i0 = clock.Monotonic();
  WaitFor(clock, options.idle, stop, [&] { return !cluster.OperatorRunning(); }, std::chrono::milliseconds(200));
  if (stop) return Unavailable("interrupted");
  if (!cluster.OperatorRunning()) return Unavailable("the operator exited:\n" + cluster.OperatorLogTail(20));
  const MonoTime i1 = clock.Monotonic();
  auto idle_requests1 = Scrape(cluster);
  auto idle_proc1 = SampleProcess(cluster.operator_pid());
  for (const Status& s : {Status::FromResult(idle_requests0), Status::FromResult(idle_requests1),
                          Status::FromResult(idle_proc0), Status::FromResult(idle_proc1)}) {
    if (!s.ok()) return s.error();
  }
  r.idle_seconds = Seconds(i1 - i0);
  const double minutes = r.idle_seconds / 60;
  RequestCounts idle = CountRequests(idle_requests1->Since(*idle_requests0));
  r.idle_requests_per_min = idle.total / minutes;
  r.idle_lease_requests_per_min = idle.leases / minutes;
  r.idle_non_lease_requests_per_min = idle.non_lease() / minutes;
  r.idle_non_lease_detail = idle.non_lease_detail;
  r.idle_cpu_percent = 100 * (idle_proc1->cpu_seconds - idle_proc0->cpu_seconds) / r.idle_seconds;
  return r;
}

Status DeleteRound(kube::KubeApi& api, HealthWatch& watch, Clock& clock, const std::vector<std::string>& names,
                   const PaceOptions& pace, Nanos timeout, const std::atomic<bool>& stop) {
  const int n = static_cast<int>(names.size());
  Progress("deleting the " + std::to_string(n) + " nodes");
  Status deleted = RunPaced(clock, n, pace, stop, [&](int i) -> Status {
    Status s = api.Delete(kube::gvr::kNodes, "", names[i]);
    return s.ok() || s.code() == ErrorCode::kNotFound ? Status::Ok() : s;
  });
  if (!deleted.ok()) return deleted;
  bool gone = WaitFor(clock, timeout, stop, [&] {
    for (const auto& name : names) {
      if (watch.store().Get("", name) != nullptr) return false;
    }
    auto pods = api.List(kube::gvr::kPods, BenchCluster::kNamespace, {.label_selector = kAgentSelector, .limit = 1});
    const Json* items = pods.ok() ? kube::FindPath(*pods, {"items"}) : nullptr;
    return items != nullptr && items->is_array() && items->empty();
  }, std::chrono::seconds(1));
  if (stop) return Unavailable("interrupted");
  Progress(gone ? "their FabricHealths and agent pods are gone"
                : "WARNING: some FabricHealths or agent pods are still there; continuing");
  return Status::Ok();
}

}  // namespace lockstep::bench
