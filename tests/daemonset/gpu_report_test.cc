// The GPU part of the FabricHealth report (GpuReportOf) and what the agent
// logs about GPUs (GpuLog): pure, from monitor states built by hand.
#include <catch2/catch.hpp>

#include "lockstep/agent/app/gpu_report.h"

namespace lockstep::agent {
namespace {

using gpu::GpuState;

// A device entry of status.gpu with the fields given (the rest absent).
api::GpuDeviceStatus Device(int index, std::optional<std::string> uuid, const std::string& state) {
  api::GpuDeviceStatus d;
  d.index = index;
  d.uuid = std::move(uuid);
  d.state = state;
  return d;
}

gpu::GpuSample Sample(unsigned index) {
  gpu::GpuSample g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.temperature_c = 45;
  g.slowdown_c = 88;
  g.ecc.corrected_volatile = 3;
  g.ecc.uncorrected_volatile = 0;
  g.remapped_rows = gpu::RemappedRows{};
  return g;
}

// A state as GpuMonitor::Poll leaves it, with the verdict evaluated.
gpu::GpuMonitorState StateOf(std::vector<gpu::GpuSample> gpus, std::map<unsigned, double> rates = {},
                             std::vector<gpu::XidEvent> xids = {}) {
  gpu::GpuMonitorState s;
  s.snapshot = gpu::GpuSnapshot{.driver_version = "550.54.15", .gpus = std::move(gpus)};
  s.corrected_ecc_per_hour = std::move(rates);
  s.recent_xids = std::move(xids);
  s.verdict = gpu::EvaluateGpuHealth(
      {.gpus = s.snapshot->gpus, .corrected_ecc_per_hour = s.corrected_ecc_per_hour, .recent_xids = s.recent_xids},
      gpu::GpuHealthPolicy{});
  return s;
}

TEST_CASE("GPU report: every GPU's values under the earlyWarning names, the tripped one named", "[daemonset][gpu]") {
  gpu::GpuSample hot = Sample(1);
  hot.temperature_c = 93;
  hot.remapped_rows->pending = true;
  gpu::GpuMonitorState s = StateOf({Sample(0), hot}, {{0, 2.4}, {1, 150}}, {{1, "GPU-1", 79}, {1, "GPU-1", 79}});
  GpuReport r = GpuReportOf(s, false);
  REQUIRE(r.condition.type == "GPUHealthy");
  REQUIRE(r.condition.status == "False");
  REQUIRE(r.condition.reason == "EarlyWarning");
  REQUIRE(r.condition.message ==
          "GPU 1 (GPU-1) temperature 93 C >= 90 C; GPU 1 (GPU-1) corrected ECC rate 150/h >= 100/h; "
          "GPU 1 (GPU-1) pending row remap (needs a GPU reset); GPU 1 (GPU-1) Xid 79");
  REQUIRE(r.status.state == "Warning");
  REQUIRE(r.status.driver_version == "550.54.15");
  REQUIRE(r.status.warnings == 1);
  REQUIRE(r.status.devices.size() == 2);
  const api::GpuDeviceStatus& zero = r.status.devices[0];
  REQUIRE(zero.state == "Healthy");
  REQUIRE(zero.temperature_celsius == 45);
  REQUIRE(zero.slowdown_margin_celsius == 43);
  REQUIRE(zero.ecc_single_bit_per_hour == 2);
  REQUIRE(zero.ecc_uncorrected == 0);
  REQUIRE(zero.row_remap_pending == false);
  REQUIRE(zero.xids.empty());
  const api::GpuDeviceStatus& one = r.status.devices[1];
  REQUIRE(one.uuid == "GPU-1");
  REQUIRE(one.state == "Warning");
  REQUIRE(one.slowdown_margin_celsius == -5);
  REQUIRE(one.ecc_single_bit_per_hour == 150);
  REQUIRE(one.row_remap_pending == true);
  REQUIRE(one.xids == std::vector<int>{79});  // each once
}

TEST_CASE("GPU report: a healthy node, a lost GPU, and fields NVML does not give", "[daemonset][gpu]") {
  GpuReport healthy = GpuReportOf(StateOf({Sample(0), Sample(1)}), false);
  REQUIRE(healthy.condition.status == "True");
  REQUIRE(healthy.condition.reason == "Healthy");
  REQUIRE(healthy.status.warnings == 0);

  gpu::GpuSample lost{.index = 1, .uuid = "GPU-1", .error = "GPU is lost"};
  gpu::GpuSample bare{.index = 2, .not_available = {"temperature", "ecc", "remapped_rows"}};
  GpuReport r = GpuReportOf(StateOf({Sample(0), lost, bare}), false);
  REQUIRE(r.condition.status == "False");
  REQUIRE(r.condition.message == "GPU 1 (GPU-1) cannot be read: GPU is lost");
  REQUIRE(r.status.devices[1] == Device(1, "GPU-1", "Unavailable"));
  REQUIRE(r.status.devices[2] == Device(2, std::nullopt, "Healthy"));
}

TEST_CASE("GPU report: no NVIDIA driver is Unknown, or False when GPUs are required", "[daemonset][gpu]") {
  gpu::GpuMonitorState s{.verdict = gpu::UnavailableVerdict("no NVIDIA driver (libnvidia-ml.so.1: cannot open)")};
  GpuReport r = GpuReportOf(s, false);
  REQUIRE(r.condition.status == "Unknown");
  REQUIRE(r.condition.reason == "NvmlUnavailable");
  REQUIRE(r.condition.message == "no NVIDIA driver (libnvidia-ml.so.1: cannot open)");
  REQUIRE(r.status.state == "Unavailable");
  REQUIRE(r.status.devices.empty());
  REQUIRE_FALSE(r.status.warnings.has_value());
  REQUIRE(GpuReportOf(s, true).condition.status == "False");
}

TEST_CASE("GPU report: at most 64 devices and 64 Xids each (the CRD's bounds)", "[daemonset][gpu]") {
  std::vector<gpu::GpuSample> many;
  for (unsigned i = 0; i < 70; ++i) many.push_back(Sample(i));
  std::vector<gpu::XidEvent> xids;
  for (uint64_t x = 0; x < 100; ++x) xids.push_back({0, "GPU-0", x});  // Xid 0 is not an Xid
  GpuReport r = GpuReportOf(StateOf(many, {}, xids), false);
  REQUIRE(r.status.devices.size() == 64);
  REQUIRE(r.status.devices[0].xids.size() == 64);
  REQUIRE(r.status.devices[0].xids.front() == 1);
}

TEST_CASE("GPU log: no driver said once, readable once, warnings on transitions only", "[daemonset][gpu]") {
  using Level = GpuLogLine::Level;
  GpuLog log(false);
  const gpu::NodeGpuVerdict none = gpu::UnavailableVerdict("no NVIDIA driver (libnvidia-ml.so.1: cannot open)");
  std::vector<GpuLogLine> first = log.Next(none);
  REQUIRE(first.size() == 1);
  REQUIRE(first[0].level == Level::kInfo);
  REQUIRE(first[0].message.find("carries on") != std::string::npos);
  REQUIRE(first[0].fields == std::vector<std::pair<std::string, std::string>>{
                                 {"reason", "no NVIDIA driver (libnvidia-ml.so.1: cannot open)"}});
  for (int i = 0; i < 100; ++i) REQUIRE(log.Next(none).empty());  // once, not per poll

  gpu::GpuSample hot = Sample(0);
  hot.temperature_c = 95;
  const gpu::NodeGpuVerdict warn = gpu::EvaluateGpuHealth({.gpus = {hot}}, gpu::GpuHealthPolicy{});
  std::vector<GpuLogLine> lines = log.Next(warn);  // the driver came (readable) and the GPU is hot
  REQUIRE(lines.size() == 2);
  REQUIRE(lines[0].message == "GPU health: reading the node's GPUs through NVML");
  REQUIRE(lines[1].level == Level::kWarn);
  REQUIRE(lines[1].fields[0].second == "GPU 0 (GPU-0) temperature 95 C >= 90 C");
  hot.temperature_c = 96;
  REQUIRE(log.Next(gpu::EvaluateGpuHealth({.gpus = {hot}}, gpu::GpuHealthPolicy{})).empty());  // still warning
  lines = log.Next(gpu::EvaluateGpuHealth({.gpus = {Sample(0)}}, gpu::GpuHealthPolicy{}));
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0].message == "GPU early warning cleared");

  GpuLog required(true);
  REQUIRE(required.Next(none).at(0).level == Level::kError);
}

}  // namespace
}  // namespace lockstep::agent
