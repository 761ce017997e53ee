// NvmlGpuSource: the GpuSource adapter on NVML, loaded at run time with
// dlopen (libnvidia-ml.so.1 by default) so the agent runs on nodes without
// the NVIDIA driver. Absent library or failed nvmlInit: the source stays
// constructed, status() says why ("no NVIDIA driver (libnvidia-ml.so.1:
// <dlerror>)"), and Read() returns that as Unavailable; the caller logs it
// once and carries on.
//
// Required symbols: nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2,
// nvmlDeviceGetHandleByIndex_v2. Every other one is optional: missing, or
// NVML_ERROR_NOT_SUPPORTED for a GPU, leaves that field empty and names it in
// GpuSample::not_available. Xids come from an NVML event set registered for
// nvmlEventTypeXidCriticalError on every GPU at open, polled without waiting.
//
// Thread-safety: not thread-safe; one owner calls it. Owns the library
// handle, the NVML initialisation and the event set (released in the
// destructor, in reverse order).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lockstep/agent/gpu/gpu_source.h"

namespace lockstep::agent::gpu {

inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";
inline constexpr char kNvmlLibraryEnv[] = "LOCKSTEP_NVML_LIBRARY";

struct NvmlOptions {
  std::string library = kNvmlLibrary;  // a name the dynamic loader finds, or a path
};

// $LOCKSTEP_NVML_LIBRARY when set and not empty, else libnvidia-ml.so.1.
NvmlOptions NvmlOptionsFromEnv();

class NvmlGpuSource final : public GpuSource {
 public:
  explicit NvmlGpuSource(NvmlOptions options = {});
  ~NvmlGpuSource() override;
  NvmlGpuSource(const NvmlGpuSource&) = delete;
  NvmlGpuSource& operator=(const NvmlGpuSource&) = delete;

  // Ok when NVML loaded and initialised; else Unavailable with why.
  const Status& status() const { return status_; }
  // Whether Xid events are delivered (the event symbols exist and at least
  // one GPU accepted the registration).
  bool xid_events() const;

  Result<GpuSnapshot> Read() override;
  std::vector<XidEvent> DrainXids() override;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  Status status_;
};

}  // namespace lockstep::agent::gpu
