// GPU health decisions: samples, corrected-ECC rates and recent Xids in, a
// verdict per GPU and for the node out, and the GPUHealthy condition the
// agent publishes on its FabricHealth. Pure: no I/O, no clock reads. Thread-
// compatible.
//
//   GpuHealthInput in{.gpus = snapshot.gpus, .corrected_ecc_per_hour = {{2, 150.0}}};
//   NodeGpuVerdict v = EvaluateGpuHealth(in, GpuHealthPolicy{});
//   // v.state == GpuState::kWarning,
//   // v.reasons == {"GPU 2 (GPU-...) corrected ECC rate 150/h >= 100/h"}
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/agent/gpu/gpu_sample.h"
#include "lockstep/common/clock.h"

namespace lockstep::agent::gpu {

// Early-warning thresholds. The defaults mirror the TrainingJob's
// spec.earlyWarning (api::EarlyWarningSpec; PolicyFromEarlyWarning in
// early_warning.h converts one, and a test checks the defaults agree).
struct GpuHealthPolicy {
  int temp_celsius = 90;                                     // warn at or above
  int slowdown_margin_celsius = 5;                           // warn within this of the slowdown threshold
  double ecc_corrected_per_hour = 100;                       // corrected ECC errors within the trailing hour
  bool pending_row_remaps = true;                            // warn while a row remap waits for a reset
  std::vector<int> xids = {48, 63, 64, 74, 79, 92, 94, 95};  // Xids that warn
  // How long an Xid keeps its GPU in Warning after it was seen.
  std::chrono::nanoseconds xid_hold = std::chrono::hours(1);
  bool operator==(const GpuHealthPolicy&) const = default;
};

enum class GpuState { kHealthy, kWarning, kUnavailable };
const char* GpuStateName(GpuState s);  // "Healthy", "Warning", "Unavailable"

struct GpuVerdict {
  unsigned index = 0;
  std::string uuid{};
  GpuState state = GpuState::kHealthy;
  std::vector<std::string> reasons{};  // each names the GPU, the value and the threshold
  bool operator==(const GpuVerdict&) const = default;
};

struct NodeGpuVerdict {
  GpuState state = GpuState::kUnavailable;
  std::string unavailable_reason{};  // when kUnavailable
  std::vector<GpuVerdict> gpus{};
  std::vector<std::string> reasons{};  // every GPU's reasons, in GPU order
  bool operator==(const NodeGpuVerdict&) const = default;
};

struct GpuHealthInput {
  std::vector<GpuSample> gpus{};
  // Corrected ECC errors counted within the trailing hour, by GPU index
  // (EccRateWindow); a GPU without an entry has no rate yet.
  std::map<unsigned, double> corrected_ecc_per_hour{};
  // Xids seen within the policy's xid_hold.
  std::vector<XidEvent> recent_xids{};
};

// Warning when any GPU has: a temperature >= temp_celsius; a temperature
// within slowdown_margin_celsius of its slowdown threshold; a corrected ECC
// rate >= ecc_corrected_per_hour; uncorrected ECC errors since the driver
// loaded; a pending (when pending_row_remaps) or failed row remap; an Xid of
// the policy's list; or
// could not be read (error). Unavailable when there are no GPUs.
NodeGpuVerdict EvaluateGpuHealth(const GpuHealthInput& in, const GpuHealthPolicy& policy);

// The verdict when NVML cannot be used; `why` says why (e.g. "no NVIDIA
// driver (libnvidia-ml.so.1: cannot open shared object file)").
NodeGpuVerdict UnavailableVerdict(std::string why);

// The condition the agent publishes on its FabricHealth (a metav1.Condition
// without times; the status builder adds them):
//   True    Healthy          every GPU is within the early-warning thresholds
//   False   EarlyWarning     the reasons, joined with "; " (at most ~1 KiB)
//   Unknown NvmlUnavailable  why GPUs cannot be read (False when `required`:
//                            the node's GPUs must be watched, spec.gpu.mode
//                            Required)
// The reason changes only with the state; the message carries values
// (temperatures, rates), so a writer should key its writes on status and
// reason and let the message ride with the periodic report.
struct GpuCondition {
  std::string type{};
  std::string status{};
  std::string reason{};
  std::string message{};
  bool operator==(const GpuCondition&) const = default;
};
inline constexpr char kGpuConditionType[] = "GPUHealthy";
GpuCondition ConditionFor(const NodeGpuVerdict& v, bool required = false);

// Corrected ECC errors within a trailing window (one hour by default), from
// the cumulative counter read at each poll. A counter that goes down (the
// driver reloaded and the volatile count restarted) starts the window again.
// Counting errors within the last hour rather than extrapolating from one
// poll interval: one error in a 10 s poll is not "360 per hour".
class EccRateWindow {
 public:
  explicit EccRateWindow(std::chrono::nanoseconds window = std::chrono::hours(1)) : window_(window) {}
  void Observe(MonoTime t, uint64_t cumulative);
  // Errors counted within the window ending at the latest observation
  // (0 until two observations).
  double PerWindow() const;

 private:
  std::chrono::nanoseconds window_;
  std::deque<std::pair<MonoTime, uint64_t>> points_;  // oldest first
};

}  // namespace lockstep::agent::gpu
