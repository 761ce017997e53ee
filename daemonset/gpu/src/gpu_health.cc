#include "lockstep/agent/gpu/gpu_health.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lockstep::agent::gpu {
namespace {

constexpr size_t kMaxMessage = 1024;

std::string Format(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

void Judge(const GpuSample& g, const GpuHealthInput& in, const GpuHealthPolicy& p, GpuVerdict& v) {
  const std::string who = GpuLabel(g.index, g.uuid);
  auto warn = [&](const std::string& what) { v.reasons.push_back(who + " " + what); };
  if (g.error) {
    warn("cannot be read: " + *g.error);
    return;
  }
  if (g.temperature_c) {
    const int t = *g.temperature_c;
    if (t >= p.temp_celsius) {
      warn("temperature " + std::to_string(t) + " C >= " + std::to_string(p.temp_celsius) + " C");
    } else if (g.slowdown_c && t >= *g.slowdown_c - p.slowdown_margin_celsius) {
      warn("temperature " + std::to_string(t) + " C within " + std::to_string(p.slowdown_margin_celsius) +
           " C of slowdown (" + std::to_string(*g.slowdown_c) + " C)");
    }
  }
  if (auto it = in.corrected_ecc_per_hour.find(g.index);
      it != in.corrected_ecc_per_hour.end() && it->second >= p.ecc_corrected_per_hour) {
    warn("corrected ECC rate " + Format(it->second) + "/h >= " + Format(p.ecc_corrected_per_hour) + "/h");
  }
  if (g.ecc.uncorrected_volatile && *g.ecc.uncorrected_volatile > 0) {
    warn("uncorrected ECC errors: " + std::to_string(*g.ecc.uncorrected_volatile) + " since the driver loaded");
  }
  if (p.pending_row_remaps && g.remapped_rows && g.remapped_rows->pending)
    warn("pending row remap (needs a GPU reset)");
  if (g.remapped_rows && g.remapped_rows->failed) warn("row remap failed");
  std::vector<uint64_t> seen;
  for (const XidEvent& x : in.recent_xids) {
    if (x.gpu_index != g.index) continue;
    if (std::find(p.xids.begin(), p.xids.end(), static_cast<int64_t>(x.xid)) == p.xids.end()) continue;
    if (std::find(seen.begin(), seen.end(), x.xid) != seen.end()) continue;
    seen.push_back(x.xid);
    warn("Xid " + std::to_string(x.xid));
  }
}

}  // namespace

std::string GpuLabel(unsigned index, const std::string& uuid) {
  std::string s = "GPU " + std::to_string(index);
  if (!uuid.empty()) s += " (" + uuid + ")";
  return s;
}

const char* GpuStateName(GpuState s) {
  switch (s) {
    case GpuState::kHealthy:
      return "Healthy";
    case GpuState::kWarning:
      return "Warning";
    case GpuState::kUnavailable:
      return "Unavailable";
  }
  return "Unavailable";
}

NodeGpuVerdict EvaluateGpuHealth(const GpuHealthInput& in, const GpuHealthPolicy& policy) {
  if (in.gpus.empty()) return UnavailableVerdict("NVML reports no GPUs");
  NodeGpuVerdict node;
  node.state = GpuState::kHealthy;
  for (const GpuSample& g : in.gpus) {
    GpuVerdict v{.index = g.index, .uuid = g.uuid};
    Judge(g, in, policy, v);
    if (!v.reasons.empty()) {
      v.state = GpuState::kWarning;
      node.state = GpuState::kWarning;
      node.reasons.insert(node.reasons.end(), v.reasons.begin(), v.reasons.end());
    }
    node.gpus.push_back(std::move(v));
  }
  return node;
}

NodeGpuVerdict UnavailableVerdict(std::string why) {
  NodeGpuVerdict v;
  v.state = GpuState::kUnavailable;
  v.unavailable_reason = std::move(why);
  return v;
}

GpuCondition ConditionFor(const NodeGpuVerdict& v, bool required) {
  switch (v.state) {
    case GpuState::kHealthy:
      return {kGpuConditionType, "True", "Healthy",
              std::to_string(v.gpus.size()) + " GPU" + (v.gpus.size() == 1 ? "" : "s") +
                  " within the early-warning thresholds"};
    case GpuState::kWarning: {
      std::string msg;
      size_t shown = 0;
      for (const std::string& r : v.reasons) {
        if (!msg.empty() && msg.size() + r.size() + 2 > kMaxMessage) break;
        if (!msg.empty()) msg += "; ";
        msg += r;
        ++shown;
      }
      if (shown < v.reasons.size()) msg += "; and " + std::to_string(v.reasons.size() - shown) + " more";
      return {kGpuConditionType, "False", "EarlyWarning", msg};
    }
    case GpuState::kUnavailable:
      break;
  }
  return {kGpuConditionType, required ? "False" : "Unknown", "NvmlUnavailable", v.unavailable_reason};
}

void EccRateWindow::Observe(MonoTime t, uint64_t cumulative) {
  if (!points_.empty() && cumulative < points_.back().second) points_.clear();  // the counter restarted
  points_.emplace_back(t, cumulative);
  // Keep one point at or before the window's start as the baseline.
  while (points_.size() > 2 && points_[1].first <= t - window_) points_.pop_front();
}

double EccRateWindow::PerWindow() const {
  if (points_.size() < 2) return 0;
  // Observe keeps the baseline in front: the latest point at or before the
  // window's start, or the oldest one while the history is shorter.
  return static_cast<double>(points_.back().second - points_.front().second);
}

}  // namespace lockstep::agent::gpu
