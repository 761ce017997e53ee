// The GPU part of the agent's FabricHealth report (status.gpu and the
// GPUHealthy condition) from what its GpuMonitor last saw, and what the
// agent logs about GPUs (once per change, not per poll). Pure; thread-safe.
//
//   GpuReport r = GpuReportOf(monitor.State(), /*required=*/false);
//   // r.condition: {GPUHealthy, False, EarlyWarning, "GPU 1 (GPU-...) temperature 93 C >= 90 C"}
//   // r.status.devices[1]: {index 1, temperatureCelsius 93, slowdownMarginCelsius -5, ...}
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/agent/gpu/gpu_monitor.h"
#include "lockstep/agent/kube/health_status.h"

namespace lockstep::agent {

// `required`: agent.yaml gpu.mode Required (NVML unavailable reads False,
// not Unknown). Devices are listed only when GPUs were read (at most 64,
// each with at most 64 Xids: the CRD's bounds); a GPU NVML cannot read is
// Unavailable.
GpuReport GpuReportOf(const gpu::GpuMonitorState& state, bool required);

// What the agent says about its GPUs after a poll, said once per change:
// NVML unavailable (with why: "no NVIDIA driver (...)") or readable again,
// and the node going into or out of early warning. GpuLog holds what was
// said last; Next returns the lines to log now.
struct GpuLogLine {
  enum class Level { kInfo, kWarn, kError } level = Level::kInfo;
  std::string message{};
  std::vector<std::pair<std::string, std::string>> fields{};
  bool operator==(const GpuLogLine&) const = default;
};
class GpuLog {
 public:
  explicit GpuLog(bool required) : required_(required) {}
  std::vector<GpuLogLine> Next(const gpu::NodeGpuVerdict& v);

 private:
  bool required_;
  std::optional<std::string> unavailable_;  // the reason said last; "" once readable was said
  gpu::GpuState state_ = gpu::GpuState::kUnavailable;
};

}  // namespace lockstep::agent
