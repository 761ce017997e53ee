// lockstep-gpu-status: `lockstep-agent gpu-status` as a binary of its own
// that needs nothing but glibc >= 2.34 and libstdc++, for checking NVML on a
// GPU machine without installing the agent (daemonset/gpu/check_on_gpu.sh).
#include <string>
#include <vector>

#include "lockstep/agent/gpu/gpu_status_command.h"

int main(int argc, char** argv) {
  return lockstep::agent::gpu::GpuStatusMain(std::vector<std::string>(argv + 1, argv + argc));
}
