// The plugin (loaded with dlopen, as NCCL loads it) against the node agent's
// real endpoint (NcclEndpoint on a UnixLineServer) over a real Unix socket:
// the plugin takes its rails from the agent, parks a stream whose path the
// agent reports down and re-admits it when the agent says so, stamps chunks
// in fabric time so receivers measure one-way delays, reports its
// connections per job, and carries on when the agent goes away. Without an
// agent, or with one that never answers, init says so in one line and
// returns promptly.
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "lockstep/agent/net/unix_line_server.h"
#include "lockstep/agent/runtime/nccl_endpoint.h"
#include "net_api.h"

using lockstep::nccl::harness::NetApi;
using namespace lockstep;
using SteadyClock = std::chrono::steady_clock;

namespace {

std::mutex g_log_mu;
std::vector<std::string> g_info, g_warn;

void Logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_log_mu);
  (level == NCCL_LOG_WARN ? g_warn : g_info).push_back(buf);
}

int CountLogs(const std::vector<std::string>& logs, const std::string& needle) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  int n = 0;
  for (const std::string& l : logs) n += l.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

std::string TempDir() {
  char tmpl[] = "/tmp/lockstep-nccl-agent-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

// In a child process (the plugin's state is per process): loads the plugin
// with `socket` as the agent and returns the child's exit status: 0 when init
// succeeded within `max_ms` and logged exactly one line containing `needle`.
int InitInChild(const std::string& socket, const std::string& needle, int max_ms) {
  pid_t pid = ::fork();
  if (pid == 0) {
    setenv("LOCKSTEP_NCCL_AGENT_SOCKET", socket.c_str(), 1);
    setenv("LOCKSTEP_NCCL_RAILS", "127.0.0.1", 1);
    NetApi net;
    std::string error;
    if (!net.Load(LOCKSTEP_NCCL_PLUGIN_PATH, "v10", &error)) ::_exit(10);
    const auto t0 = SteadyClock::now();
    if (net.init(Logger) != ncclSuccess) ::_exit(11);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t0).count();
    if (ms > max_ms) ::_exit(12);
    if (CountLogs(g_info, needle) != 1) ::_exit(13);
    if (CountLogs(g_info, "node agent") != 1) ::_exit(14);  // one line about the agent, no more
    if (!g_warn.empty()) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

#define NCCL_OK(expr)                                                                             \
  do {                                                                                            \
    if (const ncclResult_t r_ = (expr); r_ != ncclSuccess) { FAIL(#expr << " returned " << r_); } \
  } while (0)

struct Pair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

Pair Connect(NetApi& net) {
  Pair p;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  NCCL_OK(net.listen(0, handle, &p.listen));
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (p.send == nullptr || p.recv == nullptr) {
    if (p.send == nullptr) NCCL_OK(net.connect(0, handle, &p.send));
    if (p.recv == nullptr) NCCL_OK(net.accept(p.listen, &p.recv));
    REQUIRE(SteadyClock::now() < deadline);
  }
  return p;
}

// One message of `size` random bytes through the pair, checked.
void Transfer(NetApi& net, Pair& p, std::mt19937_64& rng, size_t size) {
  std::vector<uint8_t> data(size), into(size, 0xEE);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  void* mh = nullptr;
  NCCL_OK(net.regMr(p.send, nullptr, 0, NCCL_PTR_HOST, &mh));
  void *sreq = nullptr, *rreq = nullptr;
  const int tag = static_cast<int>(rng() % 1000);
  NCCL_OK(net.irecv(p.recv, into.data(), into.size(), tag, mh, &rreq));
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (sreq == nullptr) {
    NCCL_OK(net.isend(p.send, data.data(), data.size(), tag, mh, &sreq));
    REQUIRE(SteadyClock::now() < deadline);
  }
  bool sdone = false, rdone = false;
  while (!sdone || !rdone) {
    int done = 0, got = -1;
    if (!sdone) {
      NCCL_OK(net.test(sreq, &done, &got));
      sdone = done != 0;
    }
    if (!rdone) {
      NCCL_OK(net.test(rreq, &done, &got));
      rdone = done != 0;
    }
    if (SteadyClock::now() > deadline) FAIL("a transfer did not finish in 10 s (hang)");
  }
  REQUIRE(data == into);
}

// Transfers until `cond` holds (checked between messages); false after `secs`.
template <typename Cond>
bool TransferUntil(NetApi& net, Pair& p, std::mt19937_64& rng, int secs, Cond cond) {
  const auto deadline = SteadyClock::now() + std::chrono::seconds(secs);
  while (SteadyClock::now() < deadline) {
    Transfer(net, p, rng, 64 * 1024 + rng() % (64 * 1024));
    if (cond()) return true;
  }
  return false;
}

// The agent: an endpoint whose state the test sets.
struct FakeAgent {
  explicit FakeAgent(const std::string& path)
      : endpoint([this] { return State(); }, registry), server(path, endpoint) {}
  agent::NcclEndpoint::StateSource source;
  nccl::AgentState State() {
    std::lock_guard<std::mutex> lock(mu);
    return state;
  }
  void SetUsable(int path, bool usable) {
    std::lock_guard<std::mutex> lock(mu);
    state.paths[path].usable = usable;
    state.paths[path].state = usable ? "up" : "down";
  }
  int Streams(const std::string& st) {
    nlohmann::json jobs = endpoint.Jobs();
    for (const auto& j : jobs) {
      if (j["job"] == "job-a") return j["streams"][st].get<int>();
    }
    return -1;
  }
  std::mutex mu;
  nccl::AgentState state;
  metrics::Registry registry;
  agent::NcclEndpoint endpoint;
  agent::UnixLineServer server;
};

}  // namespace

// These fork before the plugin is loaded into this process (declared first:
// Catch runs test cases in declaration order).
TEST_CASE("without an agent init says so in one line and carries on", "[nccl][agent]") {
  REQUIRE(InitInChild("/nonexistent/lockstep/nccl.sock", "no node agent at /nonexistent/lockstep/nccl.sock", 1000) ==
          0);
}

TEST_CASE("an agent that never answers costs init at most its connect timeout", "[nccl][agent]") {
  const std::string dir = TempDir();
  const std::string path = dir + "/mute.sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::listen(fd, 4) == 0);  // accepts into its backlog, never reads or answers
  REQUIRE(InitInChild(path, "did not answer within 200 ms", 1000) == 0);
  ::close(fd);
  ::unlink(path.c_str());
  std::filesystem::remove_all(dir);  // the agent's socket too
}

TEST_CASE("the plugin follows the agent verdicts and measures one-way delays and reports per job", "[nccl][agent]") {
  const std::string dir = TempDir();
  const std::string path = dir + "/nccl.sock";
  FakeAgent agent(path);
  agent.state = nccl::AgentState{.locked = true, .offset_ns = 123'456'789, .bound_ns = 500, .host = {127, 0, 0, 1}};
  agent.state.rails = {{127, 0, 0, 1}, {127, 0, 0, 2}};
  agent.state.paths = {
      nccl::AgentPath{.rail = {127, 0, 0, 1}, .peer = {127, 0, 0, 1}, .index = 0, .state = "up", .usable = true},
      nccl::AgentPath{.rail = {127, 0, 0, 2}, .peer = {127, 0, 0, 1}, .index = 0, .state = "up", .usable = true}};
  REQUIRE(agent.server.Start().ok());

  setenv("LOCKSTEP_NCCL_AGENT_SOCKET", path.c_str(), 1);
  setenv("LOCKSTEP_JOB", "job-a", 1);
  unsetenv("LOCKSTEP_NCCL_RAILS");  // the agent's rails
  setenv("LOCKSTEP_NCCL_CHUNK_BYTES", "4096", 1);
  setenv("LOCKSTEP_NCCL_WINDOW", "4", 1);
  NetApi net;
  std::string error;
  REQUIRE(net.Load(LOCKSTEP_NCCL_PLUGIN_PATH, "v10", &error));
  REQUIRE(net.init(Logger) == ncclSuccess);
  REQUIRE(CountLogs(g_info, "node agent at " + path + ": 2 paths, 2 rails, host 127.0.0.1, clock sync locked") == 1);
  ncclNetProperties_v10_t props;
  REQUIRE(net.getProperties(0, &props) == ncclSuccess);
  REQUIRE(std::string(props.name) == "lockstep[127.0.0.1+127.0.0.2]");

  Pair p = Connect(net);
  std::mt19937_64 rng(5);

  // Reports arrive: both ends of the connection, bytes, and the receiver's
  // one-way delays (fabric-time stamps in band).
  std::string view;
  const bool reported = TransferUntil(net, p, rng, 10, [&] {
    nlohmann::json jobs = agent.endpoint.Jobs();
    view = jobs.dump();
    return jobs.size() == 1 && jobs[0]["job"] == "job-a" && jobs[0]["connections"] == 2 && jobs[0].contains("owd_ns") &&
           jobs[0].value("bytes_sent", 0) > 0 && jobs[0].value("bytes_received", 0) > 0;
  });
  INFO("the agent's view: " << view);
  REQUIRE(reported);
  nlohmann::json job = agent.endpoint.Jobs()[0];
  INFO(job.dump());
  REQUIRE(job["streams"]["up"] == 4);  // 2 streams at each end
  for (const auto& [name, d] : job["owd_ns"].items()) {
    // Same host, same clock: the delay is real and small (not a clock offset).
    REQUIRE(d["p50"].get<int64_t>() >= 0);
    REQUIRE(d["p50"].get<int64_t>() < 1'000'000'000);
  }
  auto& bytes = agent.registry.Counter("lockstep_nccl_bytes_total", "", {});
  REQUIRE(bytes.Get({"job-a", "127.0.0.1", "127.0.0.2", "send"}) > 0);

  // The agent says rail 2's path is down: the sender parks that stream and
  // every byte still arrives over the other.
  agent.SetUsable(1, false);
  REQUIRE(TransferUntil(net, p, rng, 10, [&] { return agent.Streams("parked") == 1; }));
  REQUIRE(CountLogs(g_info, "parked: the node agent says its path to 127.0.0.1 is down") == 1);
  for (int i = 0; i < 20; ++i) Transfer(net, p, rng, 100 * 1024);
  // Re-admitted when the agent says so (its hold-down is over).
  agent.SetUsable(1, true);
  REQUIRE(TransferUntil(net, p, rng, 10, [&] { return agent.Streams("parked") == 0 && agent.Streams("up") == 4; }));
  REQUIRE(CountLogs(g_info, "re-admitted") == 1);
  // Both paths down: no path is better, both streams stay in use.
  agent.SetUsable(0, false);
  agent.SetUsable(1, false);
  for (int i = 0; i < 20; ++i) Transfer(net, p, rng, 100 * 1024);
  REQUIRE(CountLogs(g_info, "parked") == 1);  // still only the first one
  agent.SetUsable(0, true);
  agent.SetUsable(1, true);

  // The agent goes away: one line, transfers go on.
  agent.server.Stop();
  REQUIRE(TransferUntil(net, p, rng, 10, [&] { return CountLogs(g_info, "lost the node agent") == 1; }));
  for (int i = 0; i < 20; ++i) Transfer(net, p, rng, 100 * 1024);
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    INFO((g_warn.empty() ? std::string() : g_warn.back()));
    REQUIRE(g_warn.empty());
  }
  NCCL_OK(net.closeSend(p.send));
  NCCL_OK(net.closeRecv(p.recv));
  NCCL_OK(net.closeListen(p.listen));
  std::filesystem::remove_all(dir);  // the agent's socket too
}

// The verbs transport (over libibverbs-lockstep-fake.so) against the agent:
// the handle carries the agent's host address, and a primary QP is parked
// while the agent's verdict on (its rail's address from its RoCE GID, the
// peer's host) says down; the standby carries its share meanwhile; both ends
// report their QPs to the agent, receivers with one-way delays. In a fresh
// process: the plugin above is already initialised in this one.
TEST_CASE("verbs transport follows the agent verdicts (child)", "[.nccl-verbs-agent-child]") {
  const std::string dir = TempDir();
  const std::string path = dir + "/nccl.sock";
  FakeAgent agent(path);
  agent.state = nccl::AgentState{.locked = true, .offset_ns = 987'654'321, .bound_ns = 500, .host = {127, 0, 0, 1}};
  agent.state.rails = {{10, 0, 1, 1}, {10, 1, 1, 1}};  // the fake devices' GIDs: ::ffff:10.<device>.<port>.1
  agent.state.paths = {
      nccl::AgentPath{.rail = {10, 0, 1, 1}, .peer = {127, 0, 0, 1}, .index = 0, .state = "up", .usable = true},
      nccl::AgentPath{.rail = {10, 1, 1, 1}, .peer = {127, 0, 0, 1}, .index = 0, .state = "up", .usable = true}};
  REQUIRE(agent.server.Start().ok());
  setenv("LOCKSTEP_NCCL_AGENT_SOCKET", path.c_str(), 1);
  setenv("LOCKSTEP_NCCL_AGENT_POLL_MS", "1", 1);
  NetApi net;
  std::string error;
  REQUIRE(net.Load(LOCKSTEP_NCCL_PLUGIN_PATH, "v10", &error));
  REQUIRE(net.init(Logger) == ncclSuccess);
  REQUIRE(CountLogs(g_info, "verbs transport, device lockstep-verbs[fake0:1+fake1:1]") == 1);
  Pair p = Connect(net);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 10; ++i) Transfer(net, p, rng, 50 * 1024);
  // Both ends report their QPs: the sender's two primaries up and its standby
  // parked, the receiver's three up.
  std::string view;
  REQUIRE(TransferUntil(net, p, rng, 10, [&] {
    nlohmann::json jobs = agent.endpoint.Jobs();
    view = jobs.dump();
    return jobs.size() == 1 && jobs[0]["connections"] == 2 && jobs[0].value("bytes_sent", 0) > 0 &&
           jobs[0].value("bytes_received", 0) > 0 && agent.Streams("up") == 5 && agent.Streams("parked") == 1 &&
           jobs[0].contains("owd_ns");  // in-band one-way delays, from chunks stamped in fabric time
  }));
  agent.SetUsable(0, false);
  REQUIRE(TransferUntil(net, p, rng, 10, [&] { return CountLogs(g_info, "QP 0 on fake0:1 parked") == 1; }));
  for (int i = 0; i < 20; ++i) Transfer(net, p, rng, 50 * 1024);
  agent.SetUsable(0, true);
  agent.SetUsable(1, false);
  REQUIRE(TransferUntil(net, p, rng, 10, [&] { return CountLogs(g_info, "QP 1 on fake1:1 parked") == 1; }));
  for (int i = 0; i < 20; ++i) Transfer(net, p, rng, 50 * 1024);
  REQUIRE(CountLogs(g_info, "QP 0 on fake0:1 re-admitted") == 1);
  REQUIRE(g_warn.empty());  // parked on the agent's word: INFO lines, no QP failed on the wire
  NCCL_OK(net.closeSend(p.send));
  NCCL_OK(net.closeRecv(p.recv));
  NCCL_OK(net.closeListen(p.listen));
  agent.server.Stop();
  std::filesystem::remove_all(dir);  // the agent's socket too
}

TEST_CASE("verbs transport follows the agent verdicts", "[nccl][agent]") {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("LOCKSTEP_NCCL_TRANSPORT", "verbs", 1);
    setenv("LOCKSTEP_JOB", "job-a", 1);
    setenv("LOCKSTEP_NCCL_VERBS_LIBRARY", LOCKSTEP_FAKE_IBVERBS_PATH, 1);
    setenv("LOCKSTEP_NCCL_RAILS", "127.0.0.1", 1);  // the QP exchange's address
    setenv("LOCKSTEP_NCCL_CHUNK_BYTES", "4096", 1);
    setenv("LOCKSTEP_NCCL_WINDOW", "4", 1);
    ::execl("/proc/self/exe", "nccl_agent_tests", "[.nccl-verbs-agent-child]", "--reporter", "compact", nullptr);
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}
