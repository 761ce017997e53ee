// GpuSource: the port through which the agent reads GPU health. The adapter
// is NvmlGpuSource (NVML loaded at run time); tests use it on the fake NVML
// library, or a fake of this interface.
//
// Thread-safety: implementations need not be thread-safe; one caller (the
// GpuMonitor's loop) uses a source.
#pragma once

#include <vector>

#include "lockstep/agent/gpu/gpu_sample.h"
#include "lockstep/common/result.h"

namespace lockstep::agent::gpu {

class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // Reads every GPU. Unavailable when GPUs cannot be read at all (no NVIDIA
  // driver, NVML failed to initialise), with the reason; a GPU that cannot
  // be read is a sample with `error` set.
  virtual Result<GpuSnapshot> Read() = 0;
  // The Xid events since the last call, oldest first; never blocks.
  virtual std::vector<XidEvent> DrainXids() = 0;
};

}  // namespace lockstep::agent::gpu
