// `lockstep-agent gpu-status` (and the standalone `lockstep-gpu-status`):
// reads this node's GPUs once through NVML and prints what it reports as
// JSON (the reading, the Xids pending in the event set, the verdict under
// the default early-warning policy). Without a driver it prints one line,
// "no NVIDIA driver: <why>" (a driver NVML cannot initialise: NVML's error),
// and exits 0: a node without GPUs is not an error.
//
//   gpu-status [--library PATH] [--json]
//     --library  the NVML library to load (default $LOCKSTEP_NVML_LIBRARY,
//                else libnvidia-ml.so.1)
//     --json     print the unavailable case as JSON too
//
// Returns the exit code: 0, or 2 on a usage error.
#pragma once

#include <string>
#include <vector>

namespace lockstep::agent::gpu {

// `args`: the arguments after the subcommand's name.
int GpuStatusMain(const std::vector<std::string>& args);

}  // namespace lockstep::agent::gpu
