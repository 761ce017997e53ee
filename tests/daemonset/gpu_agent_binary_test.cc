// `lockstep-agent run` as a process with GPU health on: the fake NVML
// library loaded through the agent's own dlopen path ($LOCKSTEP_NVML_LIBRARY),
// a temperature raised and an Xid injected on one GPU by rewriting the fake's
// state file, seen in /metrics; and a node without a driver, where the agent
// says "no NVIDIA driver" once and keeps serving. Ports are all 0 (read back
// from the start line). Waits poll /metrics or stderr up to a deadline.
#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/fake_nvml/fake_nvml_state.h"
#include "lockstep/agent/net/http_get.h"

namespace lockstep::agent {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

struct AgentProcess {
  pid_t pid = -1;
  int err_fd = -1;
  std::string log;  // stderr so far
  int health_port = 0;

  // Starts the agent with `nvml_library` as $LOCKSTEP_NVML_LIBRARY (and the
  // test's $FAKE_NVML_STATE, inherited); Started() waits for its start line.
  AgentProcess(const std::string& config, const std::string& nvml_library) {
    int err[2];
    REQUIRE(::pipe(err) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(err[1], 2);
      ::close(err[0]);
      ::setenv("LOCKSTEP_NVML_LIBRARY", nvml_library.c_str(), 1);
      std::string bin = LOCKSTEP_AGENT_BINARY;
      std::string a1 = "--config", a2 = config, a3 = "--bind-address", a4 = "127.0.0.1";
      char* argv[] = {bin.data(), a1.data(), a2.data(), a3.data(), a4.data(), nullptr};
      ::execv(bin.c_str(), argv);
      ::_exit(127);
    }
    ::close(err[1]);
    err_fd = err[0];
  }
  // Waits for the start line and reads the health port from it.
  bool Started() {
    if (!ReadUntil([](const std::string& s) { return s.find("lockstep-agent started") != std::string::npos; },
                   std::chrono::seconds(10))) {
      return false;
    }
    // The start line, wherever it is: a warning may come first (another
    // agent's test holding the NCCL endpoint's socket, say).
    const size_t at = log.rfind('\n', log.find("lockstep-agent started"));
    const size_t from = at == std::string::npos ? 0 : at + 1;
    auto line = nlohmann::json::parse(log.substr(from, log.find('\n', from) - from), nullptr, false);
    if (line.is_discarded() || !line.contains("health_addr")) return false;
    const std::string a = line["health_addr"].get<std::string>();
    health_port = std::stoi(a.substr(a.rfind(':') + 1));
    return true;
  }
  ~AgentProcess() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (err_fd >= 0) ::close(err_fd);
  }

  // Reads stderr until `stop` holds for what was read, or `limit` passes.
  bool ReadUntil(const std::function<bool(const std::string&)>& stop, SteadyClock::duration limit) {
    const auto deadline = SteadyClock::now() + limit;
    while (!stop(log)) {
      if (SteadyClock::now() >= deadline) return false;
      pollfd p{err_fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(err_fd, buf, sizeof buf);
      if (n <= 0) return stop(log);
      log.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  std::string Metrics() const {
    auto m = HttpGet("127.0.0.1", health_port, "/metrics");
    return m.ok() ? m->body : "";
  }
  // Polls /metrics until it holds `line`, up to 10 s (the agent reads its GPUs every second).
  bool MetricsShow(const std::string& line) const {
    const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
    while (SteadyClock::now() < deadline) {
      if (Metrics().find(line) != std::string::npos) return true;
      ::poll(nullptr, 0, 50);
    }
    return false;
  }
  int Stop() {
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/lockstep-gpu-agent-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << content;
    return p;
  }

 private:
  std::string path_;
};

std::string Config(const TempDir& dir) {
  const std::string key = dir.Write("key", "0123456789abcdef0123456789abcdef\n");
  return dir.Write("agent.yaml", "nodeName: node-a\nprobe: {port: 0}\nprobeKeyFile: " + key +
                                     "\nhealthAddr: 127.0.0.1:0\ntimeApiAddr: 127.0.0.1:0\n"
                                     "gpu: {pollIntervalSeconds: 1}\n");
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("agent binary: a temperature raised and an Xid injected in the fake NVML show in its metrics",
          "[gpu][binary]") {
  TempDir dir;
  testing::FakeNvmlState nvml;
  nvml.Set("gpus", "2");
  nvml.Set("gpu.0.uuid", "GPU-zero");
  nvml.Set("gpu.1.uuid", "GPU-one");
  AgentProcess agent(Config(dir), FAKE_NVML_LIBRARY);
  REQUIRE(agent.Started());
  INFO(agent.log);
  REQUIRE(agent.log.find("\"gpu\":\"Auto\"") != std::string::npos);
  REQUIRE(agent.MetricsShow("lockstep_gpu_nvml_available 1"));
  REQUIRE(agent.MetricsShow("lockstep_gpu_temperature_celsius{gpu=\"1\",uuid=\"GPU-one\"} 40"));
  REQUIRE(agent.MetricsShow("lockstep_gpu_warning{gpu=\"1\",uuid=\"GPU-one\"} 0"));

  nvml.Set("gpu.1.temp", "93");
  REQUIRE(agent.MetricsShow("lockstep_gpu_warning{gpu=\"1\",uuid=\"GPU-one\"} 1"));
  REQUIRE(agent.ReadUntil(
      [](const std::string& s) { return s.find("GPU 1 (GPU-one) temperature 93 C >= 90 C") != std::string::npos; },
      std::chrono::seconds(5)));
  nvml.Set("gpu.1.temp", "50");
  REQUIRE(agent.MetricsShow("lockstep_gpu_warning{gpu=\"1\",uuid=\"GPU-one\"} 0"));

  nvml.Set("xid.1", "0:79");
  REQUIRE(agent.MetricsShow("lockstep_gpu_xid_events_total{gpu=\"0\",uuid=\"GPU-zero\",xid=\"79\"} 1"));
  REQUIRE(agent.MetricsShow("lockstep_gpu_warning{gpu=\"0\",uuid=\"GPU-zero\"} 1"));
  REQUIRE(agent.Stop() == 0);
  REQUIRE(agent.log.find("NVML cannot be read") == std::string::npos);
}

TEST_CASE("agent binary: without a driver it says so once and keeps serving", "[gpu][binary]") {
  TempDir dir;
  AgentProcess agent(Config(dir), "/nonexistent/libnvidia-ml.so.1");
  REQUIRE(agent.Started());
  // Two more polls (one a second) after the first: still said once.
  agent.ReadUntil([](const std::string&) { return false; }, std::chrono::milliseconds(2500));
  INFO(agent.log);
  REQUIRE(Count(agent.log, "GPU health: NVML cannot be read; GPUHealthy is Unknown and the agent carries on") == 1);
  REQUIRE(agent.log.find("no NVIDIA driver (/nonexistent/libnvidia-ml.so.1: ") != std::string::npos);
  REQUIRE(agent.MetricsShow("lockstep_gpu_nvml_available 0"));
  auto ready = HttpGet("127.0.0.1", agent.health_port, "/readyz");
  REQUIRE(ready.ok());
  REQUIRE(ready->status == 200);
  REQUIRE(agent.Stop() == 0);
}

}  // namespace
}  // namespace lockstep::agent
