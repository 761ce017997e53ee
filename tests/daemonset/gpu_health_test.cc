// EvaluateGpuHealth, ConditionFor and EccRateWindow: pure decisions, table
// driven. No NVML, no clock.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "lockstep/agent/gpu/early_warning.h"
#include "lockstep/agent/gpu/gpu_health.h"

namespace lockstep::agent::gpu {
namespace {

using namespace std::chrono_literals;

GpuSample Healthy(unsigned index) {
  GpuSample g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.temperature_c = 45;
  g.slowdown_c = 88;
  g.shutdown_c = 92;
  g.ecc.corrected_volatile = 0;
  g.ecc.uncorrected_volatile = 0;
  g.remapped_rows = RemappedRows{};
  return g;
}

TEST_CASE("a GPU within every threshold is healthy", "[gpu]") {
  NodeGpuVerdict v = EvaluateGpuHealth({.gpus = {Healthy(0), Healthy(1)}}, GpuHealthPolicy{});
  REQUIRE(v.state == GpuState::kHealthy);
  REQUIRE(v.reasons.empty());
  REQUIRE(v.gpus.size() == 2);
  GpuCondition c = ConditionFor(v);
  REQUIRE(c == GpuCondition{"GPUHealthy", "True", "Healthy", "2 GPUs within the early-warning thresholds"});
}

TEST_CASE("each early-warning signal names the GPU, the value and the threshold", "[gpu]") {
  struct Row {
    const char* what;
    void (*change)(GpuSample&, GpuHealthInput&);
    const char* reason;
  };
  const Row rows[] = {
      {"hot", [](GpuSample& g, GpuHealthInput&) { g.temperature_c = 91; }, "GPU 2 (GPU-2) temperature 91 C >= 90 C"},
      {"at the threshold",
       [](GpuSample& g, GpuHealthInput&) {
         g.temperature_c = 90;
         g.slowdown_c = 95;
       },
       "GPU 2 (GPU-2) temperature 90 C >= 90 C"},
      {"near slowdown",
       [](GpuSample& g, GpuHealthInput&) {
         g.temperature_c = 84;
         g.slowdown_c = 87;
       },
       "GPU 2 (GPU-2) temperature 84 C within 5 C of slowdown (87 C)"},
      {"corrected ECC rate", [](GpuSample&, GpuHealthInput& in) { in.corrected_ecc_per_hour[2] = 150; },
       "GPU 2 (GPU-2) corrected ECC rate 150/h >= 100/h"},
      {"uncorrected ECC", [](GpuSample& g, GpuHealthInput&) { g.ecc.uncorrected_volatile = 3; },
       "GPU 2 (GPU-2) uncorrected ECC errors: 3 since the driver loaded"},
      {"pending remap", [](GpuSample& g, GpuHealthInput&) { g.remapped_rows->pending = true; },
       "GPU 2 (GPU-2) pending row remap (needs a GPU reset)"},
      {"failed remap", [](GpuSample& g, GpuHealthInput&) { g.remapped_rows->failed = true; },
       "GPU 2 (GPU-2) row remap failed"},
      {"Xid 79",
       [](GpuSample&, GpuHealthInput& in) {
         in.recent_xids = {{2, "GPU-2", 79}, {2, "GPU-2", 79}};
       },
       "GPU 2 (GPU-2) Xid 79"},
      {"lost", [](GpuSample& g, GpuHealthInput&) { g = GpuSample{.index = 2, .error = "GPU is lost (15)"}; },
       "GPU 2 cannot be read: GPU is lost (15)"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.what);
    GpuHealthInput in{.gpus = {Healthy(0), Healthy(1), Healthy(2)}};
    row.change(in.gpus[2], in);
    NodeGpuVerdict v = EvaluateGpuHealth(in, GpuHealthPolicy{});
    REQUIRE(v.state == GpuState::kWarning);
    REQUIRE(v.reasons == std::vector<std::string>{row.reason});
    REQUIRE(v.gpus[0].state == GpuState::kHealthy);
    REQUIRE(v.gpus[2].state == GpuState::kWarning);
    GpuCondition c = ConditionFor(v);
    REQUIRE(c.status == "False");
    REQUIRE(c.reason == "EarlyWarning");
    REQUIRE(c.message == row.reason);
  }
}

TEST_CASE("below the thresholds and outside the Xid list stays healthy", "[gpu]") {
  GpuHealthInput in{.gpus = {Healthy(0)}};
  in.gpus[0].temperature_c = 82;             // 6 C below slowdown 88
  in.gpus[0].ecc.uncorrected_aggregate = 7;  // lifetime count: not a warning by itself
  in.gpus[0].remapped_rows->correctable = 4;
  in.corrected_ecc_per_hour[0] = 99;
  in.recent_xids = {{0, "GPU-0", 13}, {1, "GPU-1", 79}};  // Xid 13 is not listed; 79 is another GPU's
  REQUIRE(EvaluateGpuHealth(in, GpuHealthPolicy{}).state == GpuState::kHealthy);
}

TEST_CASE("fields that are not available are not judged", "[gpu]") {
  GpuSample g{.index = 0, .uuid = "GPU-0", .not_available = {"temperature", "ecc", "remapped_rows"}};
  REQUIRE(EvaluateGpuHealth({.gpus = {g}}, GpuHealthPolicy{}).state == GpuState::kHealthy);
}

TEST_CASE("no GPUs or no NVML: Unknown with the reason", "[gpu]") {
  REQUIRE(ConditionFor(EvaluateGpuHealth({}, GpuHealthPolicy{})) ==
          GpuCondition{"GPUHealthy", "Unknown", "NvmlUnavailable", "NVML reports no GPUs"});
  REQUIRE(ConditionFor(UnavailableVerdict("no NVIDIA driver (libnvidia-ml.so.1: cannot open)")).message ==
          "no NVIDIA driver (libnvidia-ml.so.1: cannot open)");
}

TEST_CASE("a long list of reasons is cut at about 1 KiB with a count", "[gpu]") {
  GpuHealthInput in;
  for (unsigned i = 0; i < 64; ++i) {
    in.gpus.push_back(Healthy(i));
    in.gpus.back().temperature_c = 99;
  }
  GpuCondition c = ConditionFor(EvaluateGpuHealth(in, GpuHealthPolicy{}));
  REQUIRE(c.message.size() <= 1024 + 20);
  REQUIRE(c.message.find("more") != std::string::npos);
}

TEST_CASE("the default policy mirrors the TrainingJob's earlyWarning defaults", "[gpu]") {
  REQUIRE(PolicyFromEarlyWarning(api::EarlyWarningSpec{}) == GpuHealthPolicy{});
  api::EarlyWarningSpec spec;
  spec.gpu_temp_celsius = 80;
  spec.ecc_single_bit_per_hour = 10;
  spec.xids = {31};
  GpuHealthPolicy p = PolicyFromEarlyWarning(spec);
  REQUIRE(p.temp_celsius == 80);
  REQUIRE(p.ecc_corrected_per_hour == 10);
  REQUIRE(p.xids == std::vector<int>{31});
}

TEST_CASE("the node's spec.gpu.earlyWarning: defaults as the policy's, every threshold carried", "[gpu]") {
  REQUIRE(PolicyFromGpuSpec(api::GpuEarlyWarningSpec{}) == GpuHealthPolicy{});
  api::GpuEarlyWarningSpec spec{.gpu_temp_celsius = 80,
                                .slowdown_margin_celsius = 0,
                                .ecc_single_bit_per_hour = 10,
                                .pending_row_remaps = false,
                                .xids = {31}};
  GpuHealthPolicy p = PolicyFromGpuSpec(spec);
  REQUIRE(p.temp_celsius == 80);
  REQUIRE(p.slowdown_margin_celsius == 0);
  REQUIRE(p.ecc_corrected_per_hour == 10);
  REQUIRE_FALSE(p.pending_row_remaps);
  REQUIRE(p.xids == std::vector<int>{31});

  // A pending remap warns only when the policy says so; a failed one always.
  GpuSample g = Healthy(0);
  g.remapped_rows->pending = true;
  REQUIRE(EvaluateGpuHealth({.gpus = {g}}, GpuHealthPolicy{}).state == GpuState::kWarning);
  REQUIRE(EvaluateGpuHealth({.gpus = {g}}, p).state == GpuState::kHealthy);
  g.remapped_rows->failed = true;
  REQUIRE(EvaluateGpuHealth({.gpus = {g}}, p).reasons == std::vector<std::string>{"GPU 0 (GPU-0) row remap failed"});
}

TEST_CASE("NVML unavailable where GPUs are required: False, not Unknown", "[gpu]") {
  NodeGpuVerdict v = UnavailableVerdict("no NVIDIA driver (libnvidia-ml.so.1: cannot open)");
  REQUIRE(ConditionFor(v, true) ==
          GpuCondition{"GPUHealthy", "False", "NvmlUnavailable", "no NVIDIA driver (libnvidia-ml.so.1: cannot open)"});
  REQUIRE(ConditionFor(v, false).status == "Unknown");
  // Required changes nothing once GPUs are read.
  NodeGpuVerdict healthy = EvaluateGpuHealth({.gpus = {Healthy(0)}}, GpuHealthPolicy{});
  REQUIRE(ConditionFor(healthy, true) == ConditionFor(healthy, false));
}

TEST_CASE("the corrected-ECC window counts errors within the trailing hour", "[gpu]") {
  const MonoTime t0{std::chrono::hours(5)};
  EccRateWindow w;
  w.Observe(t0, 1000);
  REQUIRE(w.PerWindow() == 0);
  w.Observe(t0 + 10s, 1001);  // one error in 10 s is one error, not 360/h
  REQUIRE(w.PerWindow() == 1);
  w.Observe(t0 + 10min, 1150);
  REQUIRE(w.PerWindow() == 150);
  w.Observe(t0 + 50min, 1150);
  REQUIRE(w.PerWindow() == 150);
  w.Observe(t0 + 70min, 1160);  // the window now starts at 10 min (1150)
  REQUIRE(w.PerWindow() == 10);
  w.Observe(t0 + 71min, 5);  // the driver reloaded: the volatile count restarted
  REQUIRE(w.PerWindow() == 0);
  w.Observe(t0 + 72min, 25);
  REQUIRE(w.PerWindow() == 20);
}

}  // namespace
}  // namespace lockstep::agent::gpu
