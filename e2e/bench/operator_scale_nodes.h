// Fake GPU nodes for the operator-scale benchmark, shaped like the ones
// e2e/cluster/add-nodes makes, and a paced driver that creates or deletes them
// through the KubeApi at a steady rate from a few threads.
// GpuNode is pure; ReserveNodeIps locks a file; RunPaced is thread-safe and
// blocks until done.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/common/clock.h"
#include "lockstep/common/result.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::bench {

// A kwok-managed GPU node: annotation kwok.x-k8s.io/node=fake, labels type=kwok,
// nvidia.com/gpu.present=true, taint nvidia.com/gpu=present:NoSchedule,
// capacity cpu 96 / 1Ti / 110 pods / `gpus` GPUs, InternalIP 10.254.x.y for
// address index `ip_index` (the scheme of e2e/cluster/lib.sh).
kube::Json GpuNode(const std::string& name, int ip_index, int gpus = 8);

// Reserves `count` consecutive node address indices in a cluster dir, sharing
// DIR/state/node-ip-next (under flock) with e2e/cluster/add-nodes. Returns the first.
Result<int> ReserveNodeIps(const std::string& cluster_dir, int count);

struct PaceOptions {
  double per_second = 20;  // operation i starts at t0 + i / per_second (or later)
  int threads = 8;
  int attempts = 5;        // per operation, for kUnavailable errors (backs off 200 ms)
};

// Runs op(i) for i in [0, count) at the paced rate; stops early once `stop` is
// set. Returns the first error that survived its retries.
Status RunPaced(Clock& clock, int count, const PaceOptions& options, const std::atomic<bool>& stop,
                const std::function<Status(int)>& op);

}  // namespace lockstep::bench
