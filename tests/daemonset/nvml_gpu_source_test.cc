// NvmlGpuSource through the real dlopen path, on the fake NVML library built
// in this repository (tests/support/fake_nvml): what each field reads, a
// missing library, NVML failing to initialise, symbols an old driver lacks,
// NOT_SUPPORTED fields, a lost GPU, and Xids delivered once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "../support/fake_nvml/fake_nvml_state.h"
#include "lockstep/agent/gpu/nvml_gpu_source.h"

namespace lockstep::agent::gpu {
namespace {

using testing::FakeNvmlState;

NvmlGpuSource Open(const char* library = FAKE_NVML_LIBRARY) { return NvmlGpuSource(NvmlOptions{library}); }

bool NotAvailable(const GpuSample& g, const std::string& field) {
  return std::find(g.not_available.begin(), g.not_available.end(), field) != g.not_available.end();
}

TEST_CASE("nvml: every field of a fake H100 reads through dlopen", "[gpu]") {
  FakeNvmlState nvml;
  nvml.Set("gpus", "2");
  nvml.Set("driver", "550.54.15");
  nvml.Set("gpu.1.uuid", "GPU-aaaa");
  nvml.Set("gpu.1.temp", "71");
  nvml.Set("gpu.1.slowdown", "87");
  nvml.Set("gpu.1.shutdown", "92");
  nvml.Set("gpu.1.ecc.corrected.volatile", "12");
  nvml.Set("gpu.1.ecc.uncorrected.volatile", "1");
  nvml.Set("gpu.1.ecc.corrected.aggregate", "340");
  nvml.Set("gpu.1.ecc.uncorrected.aggregate", "2");
  nvml.Set("gpu.1.remap.correctable", "3");
  nvml.Set("gpu.1.remap.uncorrectable", "1");
  nvml.Set("gpu.1.remap.pending", "1");
  nvml.Set("gpu.1.retired.sbe", "70");  // more than the adapter's buffer: INSUFFICIENT_SIZE carries the count
  nvml.Set("gpu.1.retired.dbe", "2");
  nvml.Set("gpu.1.pcie_replays", "9");
  nvml.Set("gpu.1.nvlinks", "2");
  nvml.Set("gpu.1.nvlink.1.crc_flit", "5");
  nvml.Set("gpu.1.ecc_mode", "1");
  nvml.Set("gpu.1.ecc_mode_pending", "0");
  nvml.Set("gpu.1.persistence", "0");
  nvml.Set("gpu.1.sm_clock", "1005");
  nvml.Set("gpu.1.sm_clock_max", "1980");
  nvml.Set("gpu.1.clocks_event_reasons", "0x48");  // HW slowdown + HW thermal slowdown

  NvmlGpuSource source = Open();
  REQUIRE(source.status().ok());
  REQUIRE(source.xid_events());
  Result<GpuSnapshot> s = source.Read();
  REQUIRE(s.ok());
  REQUIRE(s->driver_version == "550.54.15");
  REQUIRE(s->gpus.size() == 2);
  const GpuSample& g = s->gpus[1];
  CHECK(g.index == 1);
  CHECK(g.uuid == "GPU-aaaa");
  CHECK(g.name == "NVIDIA H100 80GB HBM3");
  CHECK(g.pci_bus_id == "00000000:19:00.0");
  CHECK(g.temperature_c == 71);
  CHECK(g.slowdown_c == 87);
  CHECK(g.shutdown_c == 92);
  CHECK(g.ecc == EccCounts{12, 1, 340, 2});
  CHECK(g.remapped_rows == RemappedRows{3, 1, true, false});
  CHECK(g.retired_pages_single_bit == 70u);
  CHECK(g.retired_pages_double_bit == 2u);
  CHECK(g.pcie_replays == 9u);
  REQUIRE(g.nvlinks.size() == 2);
  CHECK(g.nvlinks[1] == NvLinkErrors{1, 0, 0, 5, 0});
  CHECK(g.ecc_mode == true);
  CHECK(g.ecc_mode_pending == false);
  CHECK(g.persistence_mode == false);
  CHECK(g.sm_clock_mhz == 1005u);
  CHECK(g.sm_clock_max_mhz == 1980u);
  CHECK(g.clocks_event_reasons == (kClocksEventHwSlowdown | kClocksEventHwThermalSlowdown));
  CHECK(g.not_available.empty());
  CHECK(s->gpus[0].uuid == "GPU-fake-0000");
  // The defaults: a healthy H100 at full clock, ECC and persistence on.
  CHECK(s->gpus[0].ecc_mode == true);
  CHECK(s->gpus[0].ecc_mode_pending == true);
  CHECK(s->gpus[0].persistence_mode == true);
  CHECK(s->gpus[0].sm_clock_mhz == 1980u);
  CHECK(s->gpus[0].clocks_event_reasons == 0u);
}

TEST_CASE("nvml: an absent library is Unavailable with the loader's reason", "[gpu]") {
  NvmlGpuSource source = Open("/nonexistent/libnvidia-ml.so.1");
  REQUIRE(!source.status().ok());
  const std::string& why = source.status().error().message;
  CHECK(why.rfind("no NVIDIA driver (/nonexistent/libnvidia-ml.so.1: ", 0) == 0);
  CHECK(why.find("No such file") != std::string::npos);
  Result<GpuSnapshot> s = source.Read();
  REQUIRE(!s.ok());
  CHECK(s.code() == ErrorCode::kUnavailable);
  CHECK(s.error().message == why);
  CHECK(source.DrainXids().empty());
}

TEST_CASE("nvml: the library option defaults to libnvidia-ml.so.1 and LOCKSTEP_NVML_LIBRARY overrides it", "[gpu]") {
  unsetenv("LOCKSTEP_NVML_LIBRARY");
  CHECK(NvmlOptionsFromEnv().library == "libnvidia-ml.so.1");
  setenv("LOCKSTEP_NVML_LIBRARY", FAKE_NVML_LIBRARY, 1);
  CHECK(NvmlOptionsFromEnv().library == FAKE_NVML_LIBRARY);
  unsetenv("LOCKSTEP_NVML_LIBRARY");
}

TEST_CASE("nvml: a driver that fails to initialise is Unavailable with NVML's error", "[gpu]") {
  {
    FakeNvmlState nvml;
    nvml.RemoveFile();  // the fake's "driver not loaded"
    NvmlGpuSource source = Open();
    REQUIRE(!source.status().ok());
    CHECK(source.status().error().message ==
          "NVIDIA driver present but NVML failed to initialise: Driver Not Loaded (9)");
  }
  FakeNvmlState nvml;
  nvml.Set("init", "999");
  NvmlGpuSource source = Open();
  CHECK(source.status().error().message == "NVIDIA driver present but NVML failed to initialise: Unknown Error (999)");
}

TEST_CASE("nvml: symbols an old driver lacks are fields not available, not errors", "[gpu]") {
  FakeNvmlState nvml;
  nvml.Set("gpu.0.temp", "50");
  nvml.Set("xid.1", "0:79");
  nvml.Set("gpu.0.clocks_event_reasons", "8");
  NvmlGpuSource source = Open(FAKE_NVML_MINIMAL_LIBRARY);
  REQUIRE(source.status().ok());
  CHECK(!source.xid_events());
  Result<GpuSnapshot> s = source.Read();
  REQUIRE(s.ok());
  const GpuSample& g = s->gpus[0];
  CHECK(g.temperature_c == 50);
  CHECK(!g.remapped_rows);
  CHECK(!g.pcie_replays);
  CHECK(g.nvlinks.empty());
  CHECK(g.not_available == std::vector<std::string>{"remapped_rows", "pcie_replays", "nvlink"});
  // No nvmlDeviceGetCurrentClocksEventReasons (pre-r535): the old name answers.
  CHECK(g.clocks_event_reasons == kClocksEventHwSlowdown);
  CHECK(source.DrainXids().empty());
}

TEST_CASE("nvml: NOT_SUPPORTED fields are not available, the rest reads", "[gpu]") {
  FakeNvmlState nvml;
  nvml.Set("gpu.0.unsupported", "temp,ecc,remap,retired,pcie,nvlink,ecc_mode,persistence,clocks,reasons");
  nvml.Set("gpu.0.nvlinks", "4");
  NvmlGpuSource source = Open();
  Result<GpuSnapshot> s = source.Read();
  REQUIRE(s.ok());
  const GpuSample& g = s->gpus[0];
  CHECK(!g.temperature_c);
  CHECK(!g.slowdown_c);
  CHECK(g.ecc == EccCounts{});
  CHECK(g.nvlinks.empty());
  CHECK(!g.ecc_mode);
  CHECK(!g.ecc_mode_pending);
  CHECK(!g.persistence_mode);
  CHECK(!g.sm_clock_mhz);
  CHECK(!g.clocks_event_reasons);
  CHECK(g.uuid == "GPU-fake-0000");
  for (const char* f :
       {"temperature", "slowdown_threshold", "shutdown_threshold", "ecc", "remapped_rows", "retired_pages",
        "pcie_replays", "nvlink", "ecc_mode", "persistence_mode", "sm_clock", "clocks_event_reasons"}) {
    CAPTURE(f);
    CHECK(NotAvailable(g, f));
  }
}

TEST_CASE("nvml: a lost GPU is a sample with the error, the others read", "[gpu]") {
  FakeNvmlState nvml;
  nvml.Set("gpus", "2");
  nvml.Set("gpu.0.lost", "1");
  NvmlGpuSource source = Open();
  Result<GpuSnapshot> s = source.Read();
  REQUIRE(s.ok());
  CHECK(s->gpus[0].error == "GPU is lost (15)");
  CHECK(!s->gpus[1].error);
  CHECK(s->gpus[1].temperature_c == 40);
}

TEST_CASE("nvml: Xids injected on one GPU are drained once, older ones never", "[gpu]") {
  FakeNvmlState nvml;
  nvml.Set("gpus", "4");
  nvml.Set("gpu.2.uuid", "GPU-two");
  nvml.Set("xid.1", "2:48");  // before the source opened: not seen
  NvmlGpuSource source = Open();
  CHECK(source.DrainXids().empty());
  nvml.Set("xid.2", "2:79");
  nvml.Set("xid.3", "3:13");
  std::vector<XidEvent> x = source.DrainXids();
  REQUIRE(x == std::vector<XidEvent>{{2, "GPU-two", 79}, {3, "GPU-fake-0003", 13}});
  CHECK(source.DrainXids().empty());
}

TEST_CASE("nvml: a GPU that refuses event registration gives no Xids, others do", "[gpu]") {
  FakeNvmlState nvml;
  nvml.Set("gpus", "2");
  nvml.Set("gpu.0.unsupported", "events");
  NvmlGpuSource source = Open();
  CHECK(source.xid_events());
  nvml.Set("xid.1", "0:79");
  nvml.Set("xid.2", "1:94");
  CHECK(source.DrainXids() == std::vector<XidEvent>{{1, "GPU-fake-0001", 94}});
}

}  // namespace
}  // namespace lockstep::agent::gpu
