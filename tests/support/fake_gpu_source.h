// FakeGpuSource: the GpuSource port in memory. A test sets the snapshot (or
// makes NVML unavailable with a reason) and queues Xids; the next Read or
// DrainXids returns them. Counts reads. Not thread-safe: drive the agent
// manually (Agent::GpuTurn) while changing it.
//
//   auto source = std::make_unique<FakeGpuSource>();
//   FakeGpuSource& gpus = *source;
//   gpus.SetGpus(2);
//   gpus.snapshot.gpus[1].temperature_c = 93;
//   gpus.xids.push_back({0, "GPU-0", 79});
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/agent/gpu/gpu_source.h"

namespace lockstep::testing {

class FakeGpuSource final : public agent::gpu::GpuSource {
 public:
  // `count` healthy H100s: 45 C, slowdown 88 C, no ECC errors or remaps.
  void SetGpus(unsigned count) {
    snapshot.driver_version = "550.54.15";
    snapshot.gpus.clear();
    for (unsigned i = 0; i < count; ++i) {
      agent::gpu::GpuSample g;
      g.index = i;
      g.uuid = "GPU-" + std::to_string(i);
      g.name = "NVIDIA H100 80GB HBM3";
      g.temperature_c = 45;
      g.slowdown_c = 88;
      g.shutdown_c = 92;
      g.ecc.corrected_volatile = 0;
      g.ecc.uncorrected_volatile = 0;
      g.remapped_rows = agent::gpu::RemappedRows{};
      snapshot.gpus.push_back(std::move(g));
    }
  }

  Result<agent::gpu::GpuSnapshot> Read() override {
    ++reads;
    if (unavailable) return Unavailable(*unavailable);
    return snapshot;
  }
  std::vector<agent::gpu::XidEvent> DrainXids() override { return std::exchange(xids, {}); }

  agent::gpu::GpuSnapshot snapshot;
  std::optional<std::string> unavailable;  // e.g. "no NVIDIA driver (libnvidia-ml.so.1: ...)"
  std::vector<agent::gpu::XidEvent> xids;
  int reads = 0;
};

}  // namespace lockstep::testing
