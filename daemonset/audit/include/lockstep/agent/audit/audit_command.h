// `lockstep-agent audit`: runs the fleet audit's checks on this node once and
// prints the results, for nodes without Kubernetes (and for a look at one
// node). Without a pool to compare with, the checks are judged by their
// absolute rules and the --expect values only.
//
//   audit [--root DIR] [--rail IF]... [--require-module M]... [--expect ID=VALUE]...
//         [--library PATH] [--no-nvml] [--json] [--node NAME] [--api-server URL]
//         [--fabric ADDR | --fabric-status FILE] [--trace] [--trace-target PEER=IP]...
//         [--trace-ports N]
//   audit judge [--json] [--pool NAME] FILE...
//     --root            the sysfs/procfs root (default /)
//     --rail            a rail NIC, in rail order (default: the RDMA devices' net devices)
//     --require-module  a kernel module whose absence fails the node
//     --expect          an expected value: ID (every subject) or ID[SUBJECT]
//     --library         the NVML library (default $LOCKSTEP_NVML_LIBRARY, else libnvidia-ml.so.1)
//     --no-nvml         do not load NVML
//     --api-server      the API server whose name frontend.api_dns resolves ("" for
//                       none; default: $KUBERNETES_SERVICE_HOST, else the server of
//                       $KUBECONFIG's first file)
//     --json            print JSON instead of the table
//     --fabric          the running agent's status address (its GET /fabric, the
//                       time API's address): path state and one-way delays per
//                       rail x peer (backend.connectivity, backend.latency_*)
//     --fabric-status   the same from a file (`lockstep-agent fabric status --json`)
//     --trace           TTL-limited route traces out of every rail to every peer's
//                       host address, over --trace-ports source ports (default 8)
//     --trace-target    also trace to this address of PEER (another rail's: the
//                       spines between leaves)
//   judge: each FILE is a node's `audit --json` output; the nodes are judged
//   together as one pool (majority, median, delays against the pool, pair
//   attribution) and the verdicts printed; exit 1 when any node fails.
//
// Returns the exit code: 0 every check passed or is not present, 1 a check
// failed, 2 a usage error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lockstep/agent/audit/network_collector.h"
#include "lockstep/agent/audit/sysfs_collector.h"
#include "lockstep/agent/gpu/nvml_gpu_source.h"
#include "lockstep/audit/check.h"

namespace lockstep::agent::audit {

// This node's checks, as the command and the Kubernetes runner run them:
// the collectors on `collect.root`, NVML through `nvml` (nullopt: not
// loaded), `required_modules` added to the watched ones. Rails given in
// `collect.rails` are configured ones (a missing NIC fails).
// `network`: the back-end network facts when collected (else NotPresent).
std::vector<lockstep::audit::Check> RunNodeChecks(CollectOptions collect, const std::optional<gpu::NvmlOptions>& nvml,
                                                  const std::vector<std::string>& required_modules,
                                                  std::optional<lockstep::audit::NetworkFacts> network = std::nullopt);

// The API server this node would use: $KUBERNETES_SERVICE_HOST (in a pod),
// else the server of the first file in $KUBECONFIG; "" when neither.
std::string DefaultApiServer();

// The network facts from a fabric status (nullptr: `unavailable` says why),
// with route traces when `trace` (rails and peers from the status, plus
// `extra_targets`).
lockstep::audit::NetworkFacts CollectNetwork(const nlohmann::json* fabric_status, const std::string& unavailable,
                                             bool trace, const std::vector<TraceTarget>& extra_targets,
                                             RouteTracer& tracer, const TraceOptions& options);

// `args`: the arguments after the subcommand's name. Output goes to `out`
// (stdout in the binary), errors to stderr.
int AuditMain(const std::vector<std::string>& args, std::string& out);
int AuditMain(const std::vector<std::string>& args);

}  // namespace lockstep::agent::audit
