#include "lockstep/agent/app/gpu_report.h"

#include <algorithm>
#include <cmath>

#include "lockstep/api/fabric_health.h"

namespace lockstep::agent {
namespace {

constexpr size_t kMaxDevices = 64;  // status.gpu.devices maxItems
constexpr size_t kMaxXids = 64;     // status.gpu.devices[].xids maxItems

std::string Cut(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n); }

const gpu::GpuVerdict* VerdictOf(const gpu::NodeGpuVerdict& v, unsigned index) {
  auto it = std::find_if(v.gpus.begin(), v.gpus.end(), [&](const gpu::GpuVerdict& g) { return g.index == index; });
  return it == v.gpus.end() ? nullptr : &*it;
}

api::GpuDeviceStatus DeviceOf(const gpu::GpuSample& g, const gpu::GpuMonitorState& s) {
  api::GpuDeviceStatus d;
  d.index = static_cast<int>(g.index);
  if (!g.uuid.empty()) d.uuid = Cut(g.uuid, 96);
  if (g.error) {
    d.state = gpu::GpuStateName(gpu::GpuState::kUnavailable);
    return d;
  }
  const gpu::GpuVerdict* v = VerdictOf(s.verdict, g.index);
  d.state = gpu::GpuStateName(v ? v->state : gpu::GpuState::kHealthy);
  d.temperature_celsius = g.temperature_c;
  if (g.temperature_c && g.slowdown_c) d.slowdown_margin_celsius = *g.slowdown_c - *g.temperature_c;
  if (auto it = s.corrected_ecc_per_hour.find(g.index); it != s.corrected_ecc_per_hour.end()) {
    d.ecc_single_bit_per_hour = std::llround(it->second);
  }
  if (g.ecc.uncorrected_volatile) d.ecc_uncorrected = static_cast<int64_t>(*g.ecc.uncorrected_volatile);
  if (g.remapped_rows) d.row_remap_pending = g.remapped_rows->pending;
  for (const gpu::XidEvent& x : s.recent_xids) {
    if (x.gpu_index != g.index || x.xid < 1 || x.xid > 65535 || d.xids.size() >= kMaxXids) continue;
    const int xid = static_cast<int>(x.xid);
    if (std::find(d.xids.begin(), d.xids.end(), xid) == d.xids.end()) d.xids.push_back(xid);
  }
  return d;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : "; ") + s;
  return out;
}

}  // namespace

GpuReport GpuReportOf(const gpu::GpuMonitorState& s, bool required) {
  GpuReport r;
  const gpu::GpuCondition c = gpu::ConditionFor(s.verdict, required);
  r.condition = {c.type, c.status, c.reason, c.message};
  api::GpuHealthStatus& g = r.status;
  g.state = gpu::GpuStateName(s.verdict.state);
  if (s.snapshot && !s.snapshot->driver_version.empty()) g.driver_version = Cut(s.snapshot->driver_version, 64);
  if (s.verdict.state == gpu::GpuState::kUnavailable || !s.snapshot) return r;
  g.warnings = static_cast<int>(std::count_if(s.verdict.gpus.begin(), s.verdict.gpus.end(),
                                              [](const auto& v) { return v.state == gpu::GpuState::kWarning; }));
  for (const gpu::GpuSample& sample : s.snapshot->gpus) {
    if (g.devices.size() >= kMaxDevices) break;
    g.devices.push_back(DeviceOf(sample, s));
  }
  return r;
}

std::vector<GpuLogLine> GpuLog::Next(const gpu::NodeGpuVerdict& v) {
  using Level = GpuLogLine::Level;
  std::vector<GpuLogLine> out;
  if (v.state == gpu::GpuState::kUnavailable) {
    if (unavailable_ != v.unavailable_reason) {
      unavailable_ = v.unavailable_reason;
      if (required_) {
        out.push_back({Level::kError,
                       "GPU health: NVML cannot be read; GPUHealthy is False (gpu.mode Required)",
                       {{"reason", v.unavailable_reason}}});
      } else {
        out.push_back({Level::kInfo,
                       "GPU health: NVML cannot be read; GPUHealthy is Unknown and the agent carries on",
                       {{"reason", v.unavailable_reason}}});
      }
    }
  } else if (unavailable_ != "") {
    unavailable_ = "";
    out.push_back(
        {Level::kInfo, "GPU health: reading the node's GPUs through NVML", {{"gpus", std::to_string(v.gpus.size())}}});
  }
  if (v.state != state_) {
    if (v.state == gpu::GpuState::kWarning) {
      out.push_back({Level::kWarn, "GPU early warning", {{"reasons", Join(v.reasons)}}});
    } else if (v.state == gpu::GpuState::kHealthy && state_ == gpu::GpuState::kWarning) {
      out.push_back({Level::kInfo, "GPU early warning cleared", {}});
    }
    state_ = v.state;
  }
  return out;
}

}  // namespace lockstep::agent
