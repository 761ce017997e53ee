// `lockstep-agent gpu-status` and the standalone lockstep-gpu-status, run as
// processes: the fake NVML's reading as JSON, and one line with exit 0 when
// there is no driver.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/fake_nvml/fake_nvml_state.h"

namespace lockstep::agent::gpu {
namespace {

struct Run {
  int exit_code = -1;
  std::string out;
};

Run Shell(const std::string& command) {
  Run r;
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST_CASE("gpu-status: prints the fake NVML's GPUs as JSON", "[gpu]") {
  testing::FakeNvmlState nvml;
  nvml.Set("gpus", "2");
  nvml.Set("gpu.1.temp", "93");
  nvml.Set("xid.1", "0:48");  // before the command opened NVML: not reported
  nvml.Set("gpu.1.clocks_event_reasons", "0x40");
  nvml.Set("gpu.1.sm_clock", "1200");
  for (const char* binary : {LOCKSTEP_AGENT_BINARY " gpu-status", LOCKSTEP_GPU_STATUS_BINARY}) {
    CAPTURE(binary);
    Run r = Shell(std::string("LOCKSTEP_NVML_LIBRARY=") + FAKE_NVML_LIBRARY + " " + binary);
    REQUIRE(r.exit_code == 0);
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    REQUIRE(!j.is_discarded());
    CHECK(j["available"] == true);
    CHECK(j["driverVersion"] == "550.54.15");
    REQUIRE(j["gpus"].size() == 2);
    CHECK(j["gpus"][1]["temperatureC"] == 93);
    CHECK(j["gpus"][1]["slowdownMarginC"] == -5);
    CHECK(j["gpus"][0]["ecc"]["correctedVolatile"] == 0);
    CHECK(j["gpus"][1]["clocksEventReasons"] == 0x40);
    CHECK(j["gpus"][1]["smClockMHz"] == 1200);
    CHECK(j["gpus"][1]["smClockMaxMHz"] == 1980);
    CHECK(j["gpus"][0]["eccMode"] == true);
    CHECK(j["gpus"][0]["persistenceMode"] == true);
    CHECK(j["xidEvents"] == true);
    CHECK(j["xids"].empty());
    CHECK(j["verdict"]["state"] == "Warning");
    CHECK(j["verdict"]["condition"]["reason"] == "EarlyWarning");
  }
}

TEST_CASE("gpu-status: without a driver says so in one line and exits 0", "[gpu]") {
  Run r = Shell(std::string(LOCKSTEP_AGENT_BINARY) + " gpu-status --library /nonexistent/libnvidia-ml.so.1");
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("no NVIDIA driver: /nonexistent/libnvidia-ml.so.1: ", 0) == 0);
  r = Shell(std::string(LOCKSTEP_GPU_STATUS_BINARY) + " --json --library /nonexistent/libnvidia-ml.so.1");
  CHECK(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE(!j.is_discarded());
  CHECK(j["available"] == false);
  r = Shell(std::string(LOCKSTEP_GPU_STATUS_BINARY) + " --bogus 2>/dev/null");
  CHECK(r.exit_code == 2);
}

}  // namespace
}  // namespace lockstep::agent::gpu
