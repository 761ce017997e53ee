// One round of the operator-scale benchmark: create N GPU nodes at a paced
// rate, time node-created -> FabricHealth-seen for each, check there is exactly
// one FabricHealth per node, then let the cluster settle and count the
// operator's API requests while nothing changes. Also the teardown between
// rounds. Runs on the main thread; HealthWatch is thread-safe.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/common/clock.h"
#include "lockstep/kube/informer.h"
#include "operator_scale_cluster.h"
#include "operator_scale_latency.h"
#include "operator_scale_metrics.h"
#include "operator_scale_nodes.h"

namespace lockstep::bench {

// When each FabricHealth was first seen (ADDED) by the benchmark's informer.
class HealthWatch {
 public:
  // REQUIRES: `api` and `clock` outlive the watch.
  HealthWatch(kube::KubeApi& api, Clock& clock);
  void Start() { informer_.Start(); }
  bool HasSynced() const { return informer_.HasSynced(); }
  const kube::Store& store() const { return informer_.store(); }

  // First ADDED time of health `name`, if seen.
  std::optional<MonoTime> FirstSeen(const std::string& name) const;
  // ADDED events for `name` so far (more than one: deleted and recreated).
  int Adds(const std::string& name) const;
  int SeenCount(const std::vector<std::string>& names) const;

 private:
  Clock& clock_;
  kube::Informer informer_;
  mutable std::mutex mu_;
  std::map<std::string, std::pair<MonoTime, int>> adds_;  // GUARDED_BY(mu_); first time, count
};

// The nodes of round `round`: "scale<round>-<i>", i in [0, n).
std::vector<std::string> RoundNodeNames(int round, int n);

struct RoundOptions {
  int round = 0;  // names the nodes (see RoundNodeNames)
  int nodes = 100;
  PaceOptions pace{};
  Nanos converge_timeout = std::chrono::seconds(300);
  Nanos settle_timeout = std::chrono::seconds(300);
  Nanos quiet_before_idle = std::chrono::seconds(5);
  Nanos idle = std::chrono::seconds(60);
};

struct RoundResult {
  int nodes = 0;
  bool converged = false;      // every node's health seen before the timeout
  bool settled = false;        // agent DaemonSet and policy status caught up before idling
  int healths = 0;             // FabricHealths listed that belong to this round's nodes
  int extra_healths = 0;       // FabricHealths for no current GPU node
  int duplicate_adds = 0;      // healths ADDED more than once (deleted and recreated)
  int wrong_owner = 0;         // healths whose ownerReference is not their node's uid
  double create_seconds = 0;   // first create .. last create returned
  double converge_seconds = 0; // first create .. last health seen
  NodeLatencyStats latency_ms{};  // before the node's create call -> its health seen (never seen: failure)
  LatencyStats create_call_ms{};  // the create calls themselves (the API server's share)
  double cpu_percent = 0;      // operator, % of one core, first create .. convergence
  double rss_mb = 0, hwm_mb = 0;
  double requests_per_node = 0;  // operator API requests (non-lease) during the phase / N
  double max_queue_depth = 0;    // fabrichealth work queue, sampled every 250 ms
  std::string phase_detail;      // reconciles, API latencies and requests during the phase
  double idle_seconds = 0;
  double idle_cpu_percent = 0;
  double idle_requests_per_min = 0, idle_non_lease_requests_per_min = 0, idle_lease_requests_per_min = 0;
  std::string idle_non_lease_detail;  // which requests, when there were any
};

// Runs one round. `stop` aborts (Ctrl-C).
Result<RoundResult> RunRound(BenchCluster& cluster, kube::KubeApi& api, HealthWatch& watch, Clock& clock,
                             const RoundOptions& options, const std::atomic<bool>& stop);

// Deletes a round's nodes and waits (up to `timeout`) until their healths
// and agent pods are gone, so the next round starts from an empty cluster.
Status DeleteRound(kube::KubeApi& api, HealthWatch& watch, Clock& clock, const std::vector<std::string>& names,
                   const PaceOptions& pace, Nanos timeout, const std::atomic<bool>& stop);

// Progress line on stderr: "[operator-scale +12.3s] message".
void Progress(const std::string& message);

}  // namespace lockstep::bench
