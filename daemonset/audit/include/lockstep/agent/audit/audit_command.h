// `lockstep-agent audit`: runs the fleet audit's checks on this node once and
// prints the results, for nodes without Kubernetes (and for a look at one
// node). Without a pool to compare with, the checks are judged by their
// absolute rules and the --expect values only.
//
//   audit [--root DIR] [--rail IF]... [--require-module M]... [--expect ID=VALUE]...
//         [--library PATH] [--no-nvml] [--json] [--node NAME]
//     --root            the sysfs/procfs root (default /)
//     --rail            a rail NIC, in rail order (default: the RDMA devices' net devices)
//     --require-module  a kernel module whose absence fails the node
//     --expect          an expected value: ID (every subject) or ID[SUBJECT]
//     --library         the NVML library (default $LOCKSTEP_NVML_LIBRARY, else libnvidia-ml.so.1)
//     --no-nvml         do not load NVML
//     --json            print JSON instead of the table
//
// Returns the exit code: 0 every check passed or is not present, 1 a check
// failed, 2 a usage error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lockstep/agent/audit/sysfs_collector.h"
#include "lockstep/agent/gpu/nvml_gpu_source.h"
#include "lockstep/audit/check.h"

namespace lockstep::agent::audit {

// This node's checks, as the command and the Kubernetes runner run them:
// the collectors on `collect.root`, NVML through `nvml` (nullopt: not
// loaded), `required_modules` added to the watched ones. Rails given in
// `collect.rails` are configured ones (a missing NIC fails).
std::vector<lockstep::audit::Check> RunNodeChecks(CollectOptions collect, const std::optional<gpu::NvmlOptions>& nvml,
                                                  const std::vector<std::string>& required_modules);

// `args`: the arguments after the subcommand's name. Output goes to `out`
// (stdout in the binary), errors to stderr.
int AuditMain(const std::vector<std::string>& args, std::string& out);
int AuditMain(const std::vector<std::string>& args);

}  // namespace lockstep::agent::audit
