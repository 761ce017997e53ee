#include "lockstep/agent/gpu/gpu_monitor.h"

#include <algorithm>
#include <string>

namespace lockstep::agent::gpu {

GpuMonitor::GpuMonitor(const Clock& clock, GpuSource& source, metrics::Registry& registry, GpuMonitorOptions options)
    : clock_(clock),
      source_(source),
      metrics_(registry),
      options_(std::move(options)),
      next_poll_(clock.Monotonic()),
      state_{.verdict = UnavailableVerdict("not read yet")} {}

NodeGpuVerdict GpuMonitor::Poll() {
  const MonoTime now = clock_.Monotonic();
  next_poll_ = now + options_.interval;

  for (XidEvent& x : source_.DrainXids()) {
    metrics_.CountXid(x);
    xids_.push_back({now, std::move(x)});
  }
  std::erase_if(xids_, [&](const SeenXid& s) { return now - s.at > options_.policy.xid_hold; });

  Result<GpuSnapshot> read = source_.Read();
  NodeGpuVerdict verdict;
  GpuHealthInput in;
  if (!read.ok()) {
    verdict = UnavailableVerdict(read.error().message);
    metrics_.Publish(nullptr, verdict);
  } else {
    in.gpus = read->gpus;
    for (const GpuSample& g : read->gpus) {
      const std::optional<uint64_t>& corrected =
          g.ecc.corrected_volatile ? g.ecc.corrected_volatile : g.ecc.corrected_aggregate;
      if (!corrected) continue;
      EccRateWindow& w = ecc_.try_emplace(g.uuid.empty() ? std::to_string(g.index) : g.uuid).first->second;
      w.Observe(now, *corrected);
      in.corrected_ecc_per_hour[g.index] = w.PerWindow();
    }
    for (const SeenXid& s : xids_) in.recent_xids.push_back(s.event);
    verdict = EvaluateGpuHealth(in, options_.policy);
    metrics_.Publish(&*read, verdict);
  }

  std::lock_guard l(mu_);
  state_.verdict = verdict;
  if (read.ok()) state_.snapshot = std::move(*read);
  else state_.snapshot.reset();
  state_.corrected_ecc_per_hour = std::move(in.corrected_ecc_per_hour);
  state_.recent_xids = std::move(in.recent_xids);
  return verdict;
}

NodeGpuVerdict GpuMonitor::Verdict() const {
  std::lock_guard l(mu_);
  return state_.verdict;
}

std::optional<GpuSnapshot> GpuMonitor::Snapshot() const {
  std::lock_guard l(mu_);
  return state_.snapshot;
}

GpuMonitorState GpuMonitor::State() const {
  std::lock_guard l(mu_);
  return state_;
}

}  // namespace lockstep::agent::gpu
