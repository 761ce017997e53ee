// The lockstep-agent binary as a process: exit codes for configuration errors,
// serving /time, /metrics and `clock status`, graceful exit on SIGTERM.
// Ports are all 0 (picked by the kernel, read back from the start log line).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lockstep/agent/net/http_get.h"

namespace lockstep::agent {
namespace {

namespace fs = std::filesystem;

struct Child {
  pid_t pid = -1;
  int err_fd = -1;  // the child's stderr
  int out_fd = -1;
};

Child Spawn(const std::vector<std::string>& args) {
  int err[2], out[2];
  REQUIRE(::pipe(err) == 0);
  REQUIRE(::pipe(out) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(err[1], 2);
    ::dup2(out[1], 1);
    ::close(err[0]);
    ::close(out[0]);
    std::vector<char*> argv;
    std::string bin = LOCKSTEP_AGENT_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(err[1]);
  ::close(out[1]);
  return {pid, err[0], out[0]};
}

// Reads from fd until `stop` matches or 5 s pass.
std::string ReadUntil(int fd, const std::function<bool(const std::string&)>& stop) {
  std::string buf;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!stop(buf) && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char tmp[4096];
    ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
  }
  return buf;
}

// Waits up to `limit` for the child to exit; returns its exit code (or -1
// after killing it).
int Wait(pid_t pid, std::chrono::seconds limit = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    ::poll(nullptr, 0, 10);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

struct Run {
  int code;
  std::string out, err;
};

Run RunToEnd(const std::vector<std::string>& args) {
  Child c = Spawn(args);
  std::string err = ReadUntil(c.err_fd, [](const std::string&) { return false; });
  std::string out = ReadUntil(c.out_fd, [](const std::string&) { return false; });
  ::close(c.err_fd);
  ::close(c.out_fd);
  return {Wait(c.pid), out, err};
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/lockstep-agent-test-XXXXXX";
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

// The agent's start line, wherever it is in `log`: a warning may come first
// (another test's agent holding the NCCL endpoint's socket, say).
std::string StartLine(const std::string& log) {
  const size_t at = log.find("\"msg\":\"lockstep-agent started\"");
  if (at == std::string::npos) return log.substr(0, log.find('\n'));
  const size_t nl = log.rfind('\n', at);
  const size_t from = nl == std::string::npos ? 0 : nl + 1;
  return log.substr(from, log.find('\n', from) - from);
}

TEST_CASE("configuration errors exit with code 2 and say what is wrong", "[daemonset][binary]") {
  TempDir dir;
  auto bad = RunToEnd({"--config", dir.Write("a.yaml", "probe: {intervalMs: 0}\n"), "--node-name", "n"});
  REQUIRE(bad.code == 2);
  REQUIRE(bad.err.find("probe.intervalMs must be between 1 and 60000 (got 0)") != std::string::npos);
  auto unknown = RunToEnd({"--config", dir.Write("b.yaml", "probes: {}\n"), "--node-name", "n"});
  REQUIRE(unknown.code == 2);
  REQUIRE(unknown.err.find("unknown key probes") != std::string::npos);
  auto missing = RunToEnd({"--config", "/nonexistent/agent.yaml"});
  REQUIRE(missing.code == 2);
  auto no_key = RunToEnd({"--config", dir.Write("c.yaml", "probeKeyFile: /nonexistent/key\n"), "--node-name", "n"});
  REQUIRE(no_key.code == 2);
  REQUIRE(no_key.err.find("probeKeyFile") != std::string::npos);
  auto flag = RunToEnd({"--frobnicate"});
  REQUIRE(flag.code == 2);
  auto help = RunToEnd({"--help"});
  REQUIRE(help.code == 0);
  REQUIRE(help.out.find("clock status") != std::string::npos);
  auto status = RunToEnd({"clock", "status", "--addr", "127.0.0.1:1"});
  REQUIRE(status.code == 1);
  REQUIRE(status.err.find("cannot connect") != std::string::npos);
}

TEST_CASE("the agent serves time and metrics and exits cleanly on SIGTERM", "[daemonset][binary]") {
  TempDir dir;
  std::string key = dir.Write("key", "0123456789abcdef0123456789abcdef\n");
  std::string config = dir.Write("agent.yaml", "nodeName: node-a\nprobe: {port: 0}\nprobeKeyFile: " + key +
                                                   "\nhealthAddr: 127.0.0.1:0\ntimeApiAddr: 127.0.0.1:0\n");
  Child c = Spawn({"--config", config, "--bind-address", "127.0.0.1", "--virtual-clock",
                   "offset_ns=1000000,drift_ppb=5000,wander=1,seed=3"});
  std::string log = ReadUntil(c.err_fd, [](const std::string& s) { return s.find("lockstep-agent started") != std::string::npos; });
  INFO(log);
  auto line = nlohmann::json::parse(StartLine(log), nullptr, false);
  REQUIRE_FALSE(line.is_discarded());
  auto port_of = [&](const char* key) {
    std::string a = line[key].get<std::string>();
    return std::stoi(a.substr(a.rfind(':') + 1));
  };
  const int health = port_of("health_addr"), time_api = port_of("time_api_addr");
  auto t = HttpGet("127.0.0.1", time_api, "/time");
  REQUIRE(t.ok());
  auto j = nlohmann::json::parse(t->body);
  REQUIRE(j["state"] == "FREERUN");  // no peers: nothing to sync with
  REQUIRE(j.contains("earliest_ns"));
  REQUIRE(HttpGet("127.0.0.1", health, "/readyz")->status == 200);
  auto m = HttpGet("127.0.0.1", health, "/metrics");
  REQUIRE(m->body.find("lockstep_agent_info{node=\"node-a\"") != std::string::npos);
  REQUIRE(m->body.find("lockstep_clock_state{state=\"FREERUN\"} 1") != std::string::npos);
  REQUIRE(m->body.find("lockstep_virtual_clock_true_offset_ns 100") != std::string::npos);
  auto status = RunToEnd({"clock", "status", "--addr", "127.0.0.1:" + std::to_string(time_api)});
  REQUIRE(status.code == 0);
  REQUIRE(status.out.find("state:               FREERUN") != std::string::npos);
  REQUIRE(status.out.find("true offset") != std::string::npos);
  ::kill(c.pid, SIGTERM);
  REQUIRE(Wait(c.pid) == 0);
  ::close(c.err_fd);
  ::close(c.out_fd);
}

TEST_CASE("Kubernetes mode: an unreachable API server never stops the agent", "[daemonset][binary][kube]") {
  TempDir dir;
  std::string key = dir.Write("key", "0123456789abcdef0123456789abcdef\n");
  std::string token = dir.Write("token", "not-a-real-token\n");
  std::string config = dir.Write("agent.yaml", "nodeName: node-a\nprobe: {port: 0}\nprobeKeyFile: " + key +
                                                   "\nhealthAddr: 127.0.0.1:0\ntimeApiAddr: 127.0.0.1:0\n");
  // Static peers and Kubernetes discovery together are a configuration error.
  auto both = RunToEnd({"--config", dir.Write("peers.yaml", "nodeName: node-a\nprobeKeyFile: " + key +
                                                                "\npeers: [{name: b, address: 127.0.0.1}]\n"),
                        "--server", "https://127.0.0.1:1", "--token-file", token});
  REQUIRE(both.code == 2);
  REQUIRE(both.err.find("exclusive") != std::string::npos);

  // Port 1 on loopback refuses connections: every list, watch and report fails.
  Child c = Spawn({"--config", config, "--bind-address", "127.0.0.1", "--server", "https://127.0.0.1:1",
                   "--token-file", token, "--report-interval", "1"});
  std::string log = ReadUntil(c.err_fd, [](const std::string& s) { return s.find("cannot read FabricHealth") != std::string::npos; });
  INFO(log);
  REQUIRE(log.find("\"mode\":\"kubernetes (https://127.0.0.1:1)\"") != std::string::npos);
  REQUIRE(log.find("cannot read FabricHealth; backing off") != std::string::npos);
  auto line = nlohmann::json::parse(StartLine(log), nullptr, false);
  REQUIRE_FALSE(line.is_discarded());
  std::string a = line["time_api_addr"].get<std::string>();
  auto t = HttpGet("127.0.0.1", std::stoi(a.substr(a.rfind(':') + 1)), "/time");
  REQUIRE(t.ok());
  REQUIRE(t->status == 200);
  ::kill(c.pid, SIGTERM);
  REQUIRE(Wait(c.pid) == 0);
  ::close(c.err_fd);
  ::close(c.out_fd);
}

// A TCP connection to 127.0.0.1:port that sends `head` and then nothing more.
int Stall(int port, const std::string& head) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  if (!head.empty()) REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  return fd;
}

TEST_CASE("slow and idle clients neither block /healthz nor delay exit on SIGTERM", "[daemonset][binary]") {
  TempDir dir;
  std::string key = dir.Write("key", "0123456789abcdef0123456789abcdef\n");
  std::string config = dir.Write("agent.yaml", "nodeName: node-a\nprobe: {port: 0}\nprobeKeyFile: " + key +
                                                   "\nhealthAddr: 127.0.0.1:0\ntimeApiAddr: 127.0.0.1:0\n");
  Child c = Spawn({"--config", config, "--bind-address", "127.0.0.1"});
  std::string log = ReadUntil(c.err_fd, [](const std::string& s) { return s.find("lockstep-agent started") != std::string::npos; });
  INFO(log);
  auto line = nlohmann::json::parse(StartLine(log), nullptr, false);
  REQUIRE_FALSE(line.is_discarded());
  std::string a = line["health_addr"].get<std::string>();
  const int health = std::stoi(a.substr(a.rfind(':') + 1));
  // 64 idle connections and one client stuck in the middle of its request
  // head: each of these alone made every probe time out with the old server.
  std::vector<int> slow;
  for (int i = 0; i < 64; ++i) slow.push_back(Stall(health, ""));
  slow.push_back(Stall(health, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  for (int i = 0; i < 3; ++i) {
    auto h = HttpGet("127.0.0.1", health, "/healthz", std::chrono::seconds(10));
    REQUIRE(h.ok());
    REQUIRE(h->status == 200);
  }
  ::kill(c.pid, SIGTERM);
  // Exits rather than hanging on the stuck client (it took 29 s before).
  REQUIRE(Wait(c.pid, std::chrono::seconds(10)) == 0);
  for (int fd : slow) ::close(fd);
  ::close(c.err_fd);
  ::close(c.out_fd);
}

}  // namespace
}  // namespace lockstep::agent
