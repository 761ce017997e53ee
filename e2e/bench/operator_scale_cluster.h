// BenchCluster: the operator-scale benchmark's world, owned as one scope
// guard. In a fresh temp dir it starts a hermetic control plane
// (e2e/cluster/up), installs the chart with helm, mints the operator
// ServiceAccount's token and runs the operator binary as a child process, the
// way e2e/tests/lib.sh does. The destructor undoes whatever was started, in
// reverse: operator stopped by pid, `e2e/cluster/down DIR --purge`, temp dir
// removed (unless `keep`). Not thread-safe: use from the main thread.
//
//   BenchCluster c({.repo = ".", .operator_binary = "build/dev/operator/lockstep-operator"});
//   if (Status s = c.Up(); !s) ...
//   if (Status s = c.InstallChart(); !s) ...
//   if (Status s = c.StartOperator(); !s) ...
//   auto api = c.AdminApi();
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "lockstep/common/clock.h"
#include "lockstep/common/result.h"
#include "lockstep/kube/curl_kube_api.h"
#include "operator_scale_proc.h"

namespace lockstep::bench {

struct BenchClusterOptions {
  std::string repo = ".";  // repository root (holds e2e/cluster and charts/)
  std::string operator_binary = "build/dev/operator/lockstep-operator";
  std::vector<std::string> operator_flags{};  // appended to the operator's command line
  int node_lease_seconds = 120;
  int cpu_nodes = 1;
  bool keep = false;  // leave the temp dir (logs) behind
};

class BenchCluster {
 public:
  static constexpr const char* kNamespace = "lockstep-system";

  explicit BenchCluster(BenchClusterOptions options);
  ~BenchCluster();
  BenchCluster(const BenchCluster&) = delete;
  BenchCluster& operator=(const BenchCluster&) = delete;

  // e2e/cluster/up --nodes 0 --cpu-nodes M --node-lease-seconds S in a new temp dir.
  Status Up();
  // helm install of charts/lockstep (no in-cluster operator replicas: the
  // benchmark runs the operator itself) and the operator's token.
  Status InstallChart();
  // Starts the operator (leader election on, default timings) and waits until
  // it serves, its caches have synced and it holds the lease.
  Status StartOperator(Nanos timeout = std::chrono::seconds(60));

  // A client with the cluster's admin credentials (the benchmark's own traffic).
  Result<std::unique_ptr<kube::CurlKubeApi>> AdminApi(Clock& clock) const;

  // REQUIRES: Up() succeeded.
  const std::string& cluster_dir() const { return cluster_dir_; }
  // REQUIRES: StartOperator() succeeded.
  pid_t operator_pid() const { return operator_pid_; }
  int metrics_port() const { return metrics_port_; }
  bool OperatorRunning() const;
  // Last lines of the operator's log, for error messages.
  std::string OperatorLogTail(int lines) const;

 private:
  Result<std::string> Tool(const std::string& name, std::vector<std::string> args, const std::string& log) const;

  BenchClusterOptions options_;
  std::string root_;         // our temp dir (logs, the cluster dir)
  std::string cluster_dir_;  // root_/cluster, once up
  EnvVars env_;              // KUBECONFIG and friends, from cluster_dir_/env
  pid_t operator_pid_ = -1;
  int metrics_port_ = 0;
};

}  // namespace lockstep::bench
