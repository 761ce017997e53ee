// GpuMonitor on a FakeClock over the fake NVML library (real dlopen): polls
// on its interval, the corrected-ECC rate across polls, Xids drained and
// counted once and held for the policy's hold, the metrics, the condition,
// and a node without the driver.
#include <catch2/catch.hpp>

#include <string>

#include "../support/fake_clock.h"
#include "../support/fake_nvml/fake_nvml_state.h"
#include "lockstep/agent/gpu/gpu_monitor.h"
#include "lockstep/agent/gpu/nvml_gpu_source.h"

namespace lockstep::agent::gpu {
namespace {

using namespace std::chrono_literals;
using testing::FakeNvmlState;

struct Node {
  FakeClock clock;
  FakeNvmlState nvml;
  metrics::Registry registry;
  std::unique_ptr<NvmlGpuSource> source;
  std::unique_ptr<GpuMonitor> monitor;

  explicit Node(const char* library = FAKE_NVML_LIBRARY) {
    nvml.Set("gpus", "2");
    nvml.Set("gpu.0.uuid", "GPU-zero");
    nvml.Set("gpu.1.uuid", "GPU-one");
    source = std::make_unique<NvmlGpuSource>(NvmlOptions{library});
    monitor = std::make_unique<GpuMonitor>(clock, *source, registry, GpuMonitorOptions{.interval = 10s});
  }
};

bool Has(const std::string& text, const std::string& line) { return text.find(line) != std::string::npos; }

TEST_CASE("monitor: polls on its interval and publishes a healthy node", "[gpu]") {
  Node n;
  REQUIRE(n.monitor->Due());
  NodeGpuVerdict v = n.monitor->Poll();
  REQUIRE(v.state == GpuState::kHealthy);
  REQUIRE(!n.monitor->Due());
  n.clock.Advance(9s);
  REQUIRE(!n.monitor->Due());
  n.clock.Advance(1s);
  REQUIRE(n.monitor->Due());
  REQUIRE(n.monitor->Condition() ==
          GpuCondition{"GPUHealthy", "True", "Healthy", "2 GPUs within the early-warning thresholds"});
  const std::string text = n.registry.Render();
  CHECK(Has(text, "lockstep_gpu_nvml_available 1"));
  CHECK(Has(text, "lockstep_gpu_temperature_celsius{gpu=\"1\",uuid=\"GPU-one\"} 40"));
  CHECK(Has(text, "lockstep_gpu_slowdown_margin_celsius{gpu=\"0\",uuid=\"GPU-zero\"} 48"));
  CHECK(Has(text,
            "lockstep_gpu_ecc_errors_total{gpu=\"0\",uuid=\"GPU-zero\",type=\"corrected\",counter=\"volatile\"} 0"));
  CHECK(Has(text, "lockstep_gpu_remap_pending{gpu=\"0\",uuid=\"GPU-zero\"} 0"));
  CHECK(Has(text, "lockstep_gpu_warning{gpu=\"1\",uuid=\"GPU-one\"} 0"));
}

TEST_CASE("monitor: a temperature raised on one GPU warns, and clears when it cools", "[gpu]") {
  Node n;
  n.monitor->Poll();
  n.nvml.Set("gpu.1.temp", "91");
  n.clock.Advance(10s);
  n.monitor->Poll();
  GpuCondition c = n.monitor->Condition();
  CHECK(c.status == "False");
  CHECK(c.reason == "EarlyWarning");
  CHECK(c.message == "GPU 1 (GPU-one) temperature 91 C >= 90 C");
  CHECK(Has(n.registry.Render(), "lockstep_gpu_warning{gpu=\"1\",uuid=\"GPU-one\"} 1"));
  n.nvml.Set("gpu.1.temp", "60");
  n.clock.Advance(10s);
  CHECK(n.monitor->Poll().state == GpuState::kHealthy);
}

TEST_CASE("monitor: the corrected ECC rate is counted across polls within the trailing hour", "[gpu]") {
  Node n;
  n.nvml.Set("gpu.0.ecc.corrected.volatile", "1000");
  n.monitor->Poll();
  n.clock.Advance(10s);
  n.nvml.Set("gpu.0.ecc.corrected.volatile", "1001");  // one error in 10 s: not 360/h
  CHECK(n.monitor->Poll().state == GpuState::kHealthy);
  n.clock.Advance(10min);
  n.nvml.Set("gpu.0.ecc.corrected.volatile", "1150");
  NodeGpuVerdict v = n.monitor->Poll();
  REQUIRE(v.state == GpuState::kWarning);
  CHECK(v.reasons == std::vector<std::string>{"GPU 0 (GPU-zero) corrected ECC rate 150/h >= 100/h"});
  // No new errors: the burst leaves the window an hour later.
  for (int i = 0; i < 6; ++i) {
    n.clock.Advance(10min);
    n.monitor->Poll();
  }
  n.clock.Advance(2min);
  CHECK(n.monitor->Poll().state == GpuState::kHealthy);
  CHECK(Has(n.registry.Render(),
            "lockstep_gpu_ecc_errors_total{gpu=\"0\",uuid=\"GPU-zero\",type=\"corrected\",counter=\"volatile\"} 1150"));
}

TEST_CASE("monitor: an Xid on one GPU is counted once and warns for the hold", "[gpu]") {
  Node n;
  n.monitor->Poll();
  n.nvml.Set("xid.1", "1:79");
  n.clock.Advance(10s);
  NodeGpuVerdict v = n.monitor->Poll();
  REQUIRE(v.state == GpuState::kWarning);
  CHECK(v.reasons == std::vector<std::string>{"GPU 1 (GPU-one) Xid 79"});
  CHECK(v.gpus[0].state == GpuState::kHealthy);
  n.clock.Advance(30min);
  CHECK(n.monitor->Poll().state == GpuState::kWarning);  // held, not counted again
  CHECK(Has(n.registry.Render(), "lockstep_gpu_xid_events_total{gpu=\"1\",uuid=\"GPU-one\",xid=\"79\"} 1"));
  n.clock.Advance(31min);
  CHECK(n.monitor->Poll().state == GpuState::kHealthy);
  CHECK(Has(n.registry.Render(), "lockstep_gpu_xid_events_total{gpu=\"1\",uuid=\"GPU-one\",xid=\"79\"} 1"));
}

TEST_CASE("monitor: a pending row remap warns", "[gpu]") {
  Node n;
  n.nvml.Set("gpu.0.remap.pending", "1");
  NodeGpuVerdict v = n.monitor->Poll();
  CHECK(v.reasons == std::vector<std::string>{"GPU 0 (GPU-zero) pending row remap (needs a GPU reset)"});
  CHECK(Has(n.registry.Render(), "lockstep_gpu_remap_pending{gpu=\"0\",uuid=\"GPU-zero\"} 1"));
}

TEST_CASE("monitor: NVLink errors per active link are published", "[gpu]") {
  Node n;
  n.nvml.Set("gpu.1.nvlinks", "2");
  n.nvml.Set("gpu.1.nvlink.1.replay", "7");
  n.monitor->Poll();
  CHECK(Has(n.registry.Render(),
            "lockstep_gpu_nvlink_errors_total{gpu=\"1\",uuid=\"GPU-one\",link=\"1\",kind=\"replay\"} 7"));
  n.nvml.Set("gpu.1.nvlinks", "0");  // links went away: their series too
  n.clock.Advance(10s);
  n.monitor->Poll();
  CHECK(!Has(n.registry.Render(), "link=\"1\""));
}

TEST_CASE("monitor: a node without the driver is Unknown, with the reason, and polls on", "[gpu]") {
  Node n("/nonexistent/libnvidia-ml.so.1");
  NodeGpuVerdict v = n.monitor->Poll();
  REQUIRE(v.state == GpuState::kUnavailable);
  GpuCondition c = n.monitor->Condition();
  CHECK(c.status == "Unknown");
  CHECK(c.reason == "NvmlUnavailable");
  CHECK(c.message.rfind("no NVIDIA driver (/nonexistent/libnvidia-ml.so.1: ", 0) == 0);
  CHECK(!n.monitor->Snapshot());
  CHECK(Has(n.registry.Render(), "lockstep_gpu_nvml_available 0"));
  n.clock.Advance(10s);
  CHECK(n.monitor->Due());
}

}  // namespace
}  // namespace lockstep::agent::gpu
