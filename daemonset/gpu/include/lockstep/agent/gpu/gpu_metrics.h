// GpuMetrics: the agent's GPU metric families, registered once on the
// agent's registry and set from each reading. NVML's cumulative counters
// (ECC, PCIe replays, NVLink errors) are exported as counters holding
// NVML's value (a volatile count restarts when the driver reloads, which
// Prometheus reads as a counter reset). Series of a GPU or link that went
// away are removed.
//
//   lockstep_gpu_nvml_available                              1 when NVML reads
//   lockstep_gpu_temperature_celsius{gpu,uuid}
//   lockstep_gpu_slowdown_margin_celsius{gpu,uuid}           slowdown threshold - temperature
//   lockstep_gpu_ecc_errors_total{gpu,uuid,type,counter}     type corrected|uncorrected, counter volatile|aggregate
//   lockstep_gpu_remapped_rows{gpu,uuid,kind}                kind correctable|uncorrectable
//   lockstep_gpu_remap_pending{gpu,uuid}                     1 while a remap waits for a reset
//   lockstep_gpu_remap_failed{gpu,uuid}
//   lockstep_gpu_retired_pages{gpu,uuid,cause}               cause multiple_single_bit|double_bit
//   lockstep_gpu_pcie_replays_total{gpu,uuid}
//   lockstep_gpu_nvlink_errors_total{gpu,uuid,link,kind}     kind replay|recovery|crc_flit|crc_data
//   lockstep_gpu_xid_events_total{gpu,uuid,xid}              counted by the agent as events arrive
//   lockstep_gpu_warning{gpu,uuid}                           1 while the GPU is in early warning
//
// Thread-safety: as the registry (thread-safe); Publish from one thread.
#pragma once

#include <set>

#include "lockstep/agent/gpu/gpu_health.h"
#include "lockstep/agent/gpu/gpu_sample.h"
#include "lockstep/common/metrics.h"

namespace lockstep::agent::gpu {

class GpuMetrics {
 public:
  explicit GpuMetrics(metrics::Registry& registry);

  // A reading and its verdict; `snapshot` null when NVML is unavailable.
  void Publish(const GpuSnapshot* snapshot, const NodeGpuVerdict& verdict);
  void CountXid(const XidEvent& x);

 private:
  void Forget(const metrics::LabelValues& gpu);

  metrics::Family& available_;
  metrics::Family& temperature_;
  metrics::Family& slowdown_margin_;
  metrics::Family& ecc_;
  metrics::Family& remapped_rows_;
  metrics::Family& remap_pending_;
  metrics::Family& remap_failed_;
  metrics::Family& retired_pages_;
  metrics::Family& pcie_replays_;
  metrics::Family& nvlink_errors_;
  metrics::Family& xids_;
  metrics::Family& warning_;
  std::set<metrics::LabelValues> gpus_;           // {gpu, uuid} published last time
  std::set<metrics::LabelValues> nvlink_series_;  // full label values published last time
};

}  // namespace lockstep::agent::gpu
