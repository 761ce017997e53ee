// NodeAuditRunner: the agent's side of a FleetAudit, in Kubernetes mode. It
// watches only its own node's NodeAudits (label selector
// lockstep.dev/node=<node>: the API server sends it nothing about other
// nodes), and for each one without a status runs the checks once and writes
// the status (every check with its rule, so the operator judges the pool):
// one status patch per node per audit. The checks run on the runner's own
// thread: reading sysfs and NVML never delays a probe.
//
// Thread-safety: construct, Start() and Stop() from one owning thread;
// RunPending() is for tests that drive it without Start().
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/audit/check.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/informer.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::agent::audit {

// Runs this node's checks; `required_modules` from the NodeAudit's spec.
// Unavailable (or any error) becomes the NodeAudit's phase Error.
using NodeChecksFn =
    std::function<Result<std::vector<lockstep::audit::Check>>(const std::vector<std::string>& required_modules)>;

struct NodeAuditRunnerOptions {
  std::string node_name;
  Nanos retry = std::chrono::seconds(5);  // after a failed status write
  int watch_timeout_seconds = 1800;
  std::optional<uint64_t> informer_seed{};
};

class NodeAuditRunner {
 public:
  // REQUIRES: api, clock and registry outlive the runner.
  NodeAuditRunner(kube::KubeApi& api, Clock& clock, NodeChecksFn checks, NodeAuditRunnerOptions options,
                  metrics::Registry& registry);
  ~NodeAuditRunner();  // Stop()s
  NodeAuditRunner(const NodeAuditRunner&) = delete;
  NodeAuditRunner& operator=(const NodeAuditRunner&) = delete;

  void Start();
  void Stop();

  // Runs and writes every NodeAudit in the cache that has no status yet and
  // was not written by this runner; returns how many were written.
  int RunPending();

  kube::Informer& informer() { return informer_; }

 private:
  void Loop();

  kube::KubeApi& api_;
  Clock& clock_;
  NodeChecksFn checks_;
  const NodeAuditRunnerOptions options_;
  kube::Informer informer_;
  metrics::Family& runs_;
  std::set<std::string> written_;  // uids; only RunPending's thread touches it
  bool pending_retry_ = false;     // a write failed in the last RunPending; same thread

  std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = false;  // GUARDED_BY(mu_)
  bool stop_ = false;   // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace lockstep::agent::audit
