// GpuMonitor: polls a GpuSource on the injected Clock, counts Xids, keeps
// the corrected-ECC window per GPU, evaluates health (EvaluateGpuHealth) and
// publishes the metrics; it keeps the latest verdict and the GPUHealthy
// condition for the FabricHealth status builder.
//
//   GpuMonitor monitor(clock, source, registry, {.interval = 10s});
//   for (;;) { monitor.Poll(); sleep until monitor.NextPoll(); }
//   kube::Condition{...monitor.Condition()...}
//
// Xids are drained at every poll and kept for policy.xid_hold, so an Xid
// puts its GPU in Warning at the poll that drains it and for the hold
// after, and counts once in lockstep_gpu_xid_events_total.
//
// Thread-safety: Poll from one thread (the loop that owns the source);
// Verdict, Condition, Snapshot and State from any thread.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>

#include "lockstep/agent/gpu/gpu_health.h"
#include "lockstep/agent/gpu/gpu_metrics.h"
#include "lockstep/agent/gpu/gpu_source.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"

namespace lockstep::agent::gpu {

// What the monitor last saw, for the FabricHealth report: the verdict, the
// reading (empty when NVML was unavailable), each GPU's corrected-ECC count
// within the trailing hour (by index) and the Xids held.
struct GpuMonitorState {
  NodeGpuVerdict verdict{};
  std::optional<GpuSnapshot> snapshot{};
  std::map<unsigned, double> corrected_ecc_per_hour{};
  std::vector<XidEvent> recent_xids{};
};

struct GpuMonitorOptions {
  std::chrono::nanoseconds interval = std::chrono::seconds(10);
  GpuHealthPolicy policy{};
};

class GpuMonitor {
 public:
  // `clock`, `source` and `registry` must outlive the monitor.
  GpuMonitor(const Clock& clock, GpuSource& source, metrics::Registry& registry, GpuMonitorOptions options);

  // Reads the source now: drains Xids, reads every GPU, evaluates, publishes.
  // Returns the new verdict.
  NodeGpuVerdict Poll();
  // When the next Poll is due (the first at once).
  MonoTime NextPoll() const { return next_poll_; }
  bool Due() const { return clock_.Monotonic() >= next_poll_; }

  NodeGpuVerdict Verdict() const;
  GpuCondition Condition() const { return ConditionFor(Verdict()); }
  // The last reading (empty when NVML was unavailable).
  std::optional<GpuSnapshot> Snapshot() const;
  // Everything the last Poll saw (one consistent copy).
  GpuMonitorState State() const;

 private:
  struct SeenXid {
    MonoTime at;
    XidEvent event;
  };

  const Clock& clock_;
  GpuSource& source_;
  GpuMetrics metrics_;
  GpuMonitorOptions options_;
  MonoTime next_poll_;
  std::map<std::string, EccRateWindow> ecc_;  // by uuid (index when no uuid)
  std::vector<SeenXid> xids_;                 // within options_.policy.xid_hold

  mutable std::mutex mu_;
  GpuMonitorState state_;  // GUARDED_BY(mu_)
};

}  // namespace lockstep::agent::gpu
