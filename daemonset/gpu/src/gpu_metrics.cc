#include "lockstep/agent/gpu/gpu_metrics.h"

#include <string>

namespace lockstep::agent::gpu {
namespace {

using metrics::LabelValues;

LabelValues With(LabelValues base, std::initializer_list<std::string> more) {
  base.insert(base.end(), more);
  return base;
}

const char* const kEccTypes[] = {"corrected", "uncorrected"};
const char* const kEccCounters[] = {"volatile", "aggregate"};
const char* const kRowKinds[] = {"correctable", "uncorrectable"};
const char* const kRetiredCauses[] = {"multiple_single_bit", "double_bit"};
const char* const kLinkKinds[] = {"replay", "recovery", "crc_flit", "crc_data"};

}  // namespace

GpuMetrics::GpuMetrics(metrics::Registry& r)
    : available_(r.Gauge("lockstep_gpu_nvml_available", "1 when the agent reads GPUs through NVML, 0 when it cannot")),
      temperature_(r.Gauge("lockstep_gpu_temperature_celsius", "GPU core temperature", {"gpu", "uuid"})),
      slowdown_margin_(r.Gauge("lockstep_gpu_slowdown_margin_celsius",
                               "Degrees below the temperature at which the driver slows the GPU down",
                               {"gpu", "uuid"})),
      ecc_(r.Counter("lockstep_gpu_ecc_errors_total", "ECC memory errors as NVML counts them",
                     {"gpu", "uuid", "type", "counter"})),
      remapped_rows_(r.Gauge("lockstep_gpu_remapped_rows", "Memory rows remapped", {"gpu", "uuid", "kind"})),
      remap_pending_(
          r.Gauge("lockstep_gpu_remap_pending", "1 while a row remap waits for a GPU reset", {"gpu", "uuid"})),
      remap_failed_(r.Gauge("lockstep_gpu_remap_failed", "1 when a row remap has failed", {"gpu", "uuid"})),
      retired_pages_(r.Gauge("lockstep_gpu_retired_pages", "Retired memory pages", {"gpu", "uuid", "cause"})),
      pcie_replays_(r.Counter("lockstep_gpu_pcie_replays_total", "PCIe replays", {"gpu", "uuid"})),
      nvlink_errors_(r.Counter("lockstep_gpu_nvlink_errors_total", "NVLink data-link errors per active link",
                               {"gpu", "uuid", "link", "kind"})),
      xids_(r.Counter("lockstep_gpu_xid_events_total", "Xid events seen by the agent", {"gpu", "uuid", "xid"})),
      warning_(
          r.Gauge("lockstep_gpu_warning", "1 while the GPU is beyond an early-warning threshold", {"gpu", "uuid"})) {}

void GpuMetrics::Forget(const LabelValues& gpu) {
  temperature_.Remove(gpu);
  slowdown_margin_.Remove(gpu);
  for (const char* t : kEccTypes) {
    for (const char* c : kEccCounters) ecc_.Remove(With(gpu, {t, c}));
  }
  for (const char* k : kRowKinds) remapped_rows_.Remove(With(gpu, {k}));
  remap_pending_.Remove(gpu);
  remap_failed_.Remove(gpu);
  for (const char* c : kRetiredCauses) retired_pages_.Remove(With(gpu, {c}));
  pcie_replays_.Remove(gpu);
  warning_.Remove(gpu);
}

void GpuMetrics::Publish(const GpuSnapshot* snapshot, const NodeGpuVerdict& verdict) {
  available_.Set(snapshot ? 1 : 0);
  std::set<LabelValues> now, links_now;
  if (snapshot) {
    for (const GpuSample& g : snapshot->gpus) {
      const LabelValues gpu = {std::to_string(g.index), g.uuid};
      now.insert(gpu);
      if (g.temperature_c) temperature_.Set(gpu, *g.temperature_c);
      if (g.temperature_c && g.slowdown_c) slowdown_margin_.Set(gpu, *g.slowdown_c - *g.temperature_c);
      const std::optional<uint64_t>* ecc[2][2] = {{&g.ecc.corrected_volatile, &g.ecc.corrected_aggregate},
                                                  {&g.ecc.uncorrected_volatile, &g.ecc.uncorrected_aggregate}};
      for (int t = 0; t < 2; ++t) {
        for (int c = 0; c < 2; ++c) {
          if (*ecc[t][c]) ecc_.Set(With(gpu, {kEccTypes[t], kEccCounters[c]}), static_cast<double>(**ecc[t][c]));
        }
      }
      if (g.remapped_rows) {
        remapped_rows_.Set(With(gpu, {kRowKinds[0]}), g.remapped_rows->correctable);
        remapped_rows_.Set(With(gpu, {kRowKinds[1]}), g.remapped_rows->uncorrectable);
        remap_pending_.Set(gpu, g.remapped_rows->pending ? 1 : 0);
        remap_failed_.Set(gpu, g.remapped_rows->failed ? 1 : 0);
      }
      if (g.retired_pages_single_bit) retired_pages_.Set(With(gpu, {kRetiredCauses[0]}), *g.retired_pages_single_bit);
      if (g.retired_pages_double_bit) retired_pages_.Set(With(gpu, {kRetiredCauses[1]}), *g.retired_pages_double_bit);
      if (g.pcie_replays) pcie_replays_.Set(gpu, *g.pcie_replays);
      for (const NvLinkErrors& l : g.nvlinks) {
        const std::optional<uint64_t>* v[4] = {&l.replay, &l.recovery, &l.crc_flit, &l.crc_data};
        for (int k = 0; k < 4; ++k) {
          if (!*v[k]) continue;
          LabelValues lv = With(gpu, {std::to_string(l.link), kLinkKinds[k]});
          nvlink_errors_.Set(lv, static_cast<double>(**v[k]));
          links_now.insert(std::move(lv));
        }
      }
    }
    for (const GpuVerdict& v : verdict.gpus) {
      warning_.Set({std::to_string(v.index), v.uuid}, v.state == GpuState::kWarning ? 1 : 0);
    }
  }
  for (const LabelValues& gone : gpus_) {
    if (!now.count(gone)) Forget(gone);
  }
  for (const LabelValues& gone : nvlink_series_) {
    if (!links_now.count(gone)) nvlink_errors_.Remove(gone);
  }
  gpus_ = std::move(now);
  nvlink_series_ = std::move(links_now);
}

void GpuMetrics::CountXid(const XidEvent& x) {
  xids_.Inc({std::to_string(x.gpu_index), x.uuid, std::to_string(x.xid)});
}

}  // namespace lockstep::agent::gpu
