// The built plugin with LOCKSTEP_NCCL_TRANSPORT=verbs|auto, loaded with dlopen
// as NCCL loads it, over libibverbs-lockstep-fake.so (the in-memory RC fabric
// behind rdma-core's exported names: LoadVerbs and verbs.h's inline paths run
// as they would on rdma-core). Each case runs init in a fresh child process
// (init reads the environment once per process).
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "net_api.h"

using lockstep::nccl::harness::NetApi;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::string> g_log;  // every line the plugin logged, warnings first-class
int g_warnings = 0;

void Logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_log.push_back(buf);
  if (level == NCCL_LOG_WARN) ++g_warnings;
}

bool Logged(const std::string& part) {
  for (const std::string& l : g_log) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

// Runs the hidden test case `tag` of this binary in a child with `env` set.
void RunChild(const char* tag, const std::map<std::string, std::string>& env) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("LOCKSTEP_NCCL_AGENT_SOCKET", "off", 1);
    setenv("LOCKSTEP_NCCL_RAILS", "127.0.0.1", 1);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execl("/proc/self/exe", "nccl_verbs_plugin_tests", tag, "--reporter", "compact", nullptr);
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

#define NCCL_OK(expr)                                                             \
  do {                                                                            \
    if (const ncclResult_t r_ = (expr); r_ != ncclSuccess) {                      \
      FAIL(#expr << " returned " << r_ << " (last log: " << g_log.back() << ")"); \
    }                                                                             \
  } while (0)

}  // namespace

TEST_CASE("verbs plugin over the fake library (child)", "[.verbs-fake-child]") {
  NetApi net;
  std::string error;
  REQUIRE(net.Load(LOCKSTEP_NCCL_PLUGIN_PATH, "v10", &error));
  REQUIRE(net.init(Logger) == ncclSuccess);
  CHECK(Logged("verbs transport, device lockstep-verbs[fake0:1+fake1:1], 3 QPs per connection"));
  int ndev = 0;
  NCCL_OK(net.devices(&ndev));
  REQUIRE(ndev == 1);
  ncclNetProperties_v10_t props{};
  NCCL_OK(net.getProperties(0, &props));
  CHECK(std::string(props.name) == "lockstep-verbs[fake0:1+fake1:1]");
  CHECK(props.ptrSupport == NCCL_PTR_HOST);

  // The fake's fault injection, in the library the plugin loaded.
  void* fake = dlopen(LOCKSTEP_FAKE_IBVERBS_PATH, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake != nullptr);
  auto fail_path = reinterpret_cast<int (*)(uint32_t, int)>(dlsym(fake, "lockstep_fake_verbs_fail_path"));
  auto live_qps = reinterpret_cast<int (*)(uint32_t*, int)>(dlsym(fake, "lockstep_fake_verbs_qps"));
  REQUIRE(fail_path != nullptr);
  REQUIRE(live_qps != nullptr);

  // Connection 0: the connector's QP 0 loses its path during the 3rd window.
  // Connections 1-4: two of its three QPs, chosen at random, at random
  // windows, some sends reaching the receiver while their sender sees them fail.
  uint32_t qps[16];
  for (int conn = 0; conn < 5; ++conn) {
    INFO("connection " << conn);
    std::mt19937 rng(static_cast<unsigned>(42 + conn));
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void *listen = nullptr, *send = nullptr, *recv = nullptr;
    NCCL_OK(net.listen(0, handle, &listen));
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (send == nullptr || recv == nullptr) {
      if (send == nullptr) NCCL_OK(net.connect(0, handle, &send));
      if (recv == nullptr) NCCL_OK(net.accept(listen, &recv));
      REQUIRE(Clock::now() < deadline);
    }
    REQUIRE(live_qps(qps, 16) == 6);  // 3 per end; the connector's first
    // (victim QP, window): QP 0 in window 2 first; then two of the three at random.
    std::vector<std::pair<int, int>> plan = {{0, 2}};
    if (conn > 0) {
      const int spared = static_cast<int>(rng() % 3);
      plan.clear();
      for (int q = 0; q < 3; ++q) {
        if (q != spared) plan.emplace_back(q, static_cast<int>(rng() % 8));
      }
    }
    void *smh = nullptr, *rmh = nullptr;
    NCCL_OK(net.regMr(send, nullptr, 0, NCCL_PTR_HOST, &smh));
    NCCL_OK(net.regMr(recv, nullptr, 0, NCCL_PTR_HOST, &rmh));
    // Windows of 8 messages.
    for (int window = 0; window < 8; ++window) {
      std::vector<std::vector<uint8_t>> data(8), into(8);
      void* sreq[8] = {};
      void* rreq[8] = {};
      for (int i = 0; i < 8; ++i) {
        data[i].resize(rng() % 50000);
        for (auto& b : data[i]) b = static_cast<uint8_t>(rng());
        into[i].assign(data[i].size() + 8, 0xee);
        while (rreq[i] == nullptr) NCCL_OK(net.irecv(recv, into[i].data(), into[i].size(), i, rmh, &rreq[i]));
        while (sreq[i] == nullptr) NCCL_OK(net.isend(send, data[i].data(), data[i].size(), i, smh, &sreq[i]));
      }
      for (const auto& [victim, at] : plan) {
        if (window == at) REQUIRE(fail_path(qps[victim], static_cast<int>(rng() % 3)) == 0);
      }
      int done = 0;
      bool sdone[8] = {}, rdone[8] = {};
      while (done < 16) {
        REQUIRE(Clock::now() < deadline + std::chrono::seconds(20));
        for (int i = 0; i < 8; ++i) {
          int d = 0, size = -1;
          if (!sdone[i]) {
            NCCL_OK(net.test(sreq[i], &d, &size));
            if (d) {
              sdone[i] = true;
              ++done;
              REQUIRE(size == static_cast<int>(data[i].size()));
            }
          }
          if (!rdone[i]) {
            NCCL_OK(net.test(rreq[i], &d, &size));
            if (d) {
              rdone[i] = true;
              ++done;
              REQUIRE(size == static_cast<int>(data[i].size()));
              REQUIRE(std::equal(data[i].begin(), data[i].end(), into[i].begin()));
            }
          }
        }
      }
    }
    if (conn == 0) CHECK(Logged("QP 0 on fake0:1 failed (transport retry counter exceeded (IBV_WC_RETRY_EXC_ERR))"));
    NCCL_OK(net.deregMr(send, smh));
    NCCL_OK(net.deregMr(recv, rmh));
    NCCL_OK(net.closeSend(send));
    NCCL_OK(net.closeRecv(recv));
    NCCL_OK(net.closeListen(listen));
    CHECK(live_qps(qps, 16) == 0);  // closing the comms destroyed every QP
  }
}

TEST_CASE("verbs plugin init outcome (child)", "[.verbs-init-child]") {
  NetApi net;
  std::string error;
  REQUIRE(net.Load(LOCKSTEP_NCCL_PLUGIN_PATH, "v8", &error));
  const int want_rc = std::atoi(std::getenv("LOCKSTEP_TEST_RC"));
  const std::string want_log = std::getenv("LOCKSTEP_TEST_LOG");
  const int want_ndev = std::atoi(std::getenv("LOCKSTEP_TEST_NDEV"));
  const ncclResult_t rc = net.init(Logger);
  INFO("log: " << (g_log.empty() ? "" : g_log.back()));
  CHECK(rc == want_rc);
  CHECK(Logged(want_log));
  int ndev = -1;
  REQUIRE(net.devices(&ndev) == ncclSuccess);
  CHECK(ndev == want_ndev);
}

TEST_CASE("verbs plugin: transfers through the fake library survive QPs losing their paths", "[nccl]") {
  RunChild("[.verbs-fake-child]", {{"LOCKSTEP_NCCL_TRANSPORT", "verbs"},
                                   {"LOCKSTEP_NCCL_VERBS_LIBRARY", LOCKSTEP_FAKE_IBVERBS_PATH},
                                   {"LOCKSTEP_NCCL_CHUNK_BYTES", "4096"},
                                   {"LOCKSTEP_NCCL_WINDOW", "4"}});
}

TEST_CASE("verbs plugin: without an RDMA device init says so plainly", "[nccl]") {
  const std::string rc_system = std::to_string(static_cast<int>(ncclSystemError));
  // No rdma-core at all.
  RunChild("[.verbs-init-child]", {{"LOCKSTEP_NCCL_TRANSPORT", "verbs"},
                                   {"LOCKSTEP_NCCL_VERBS_LIBRARY", "/nonexistent/libibverbs.so.1"},
                                   {"LOCKSTEP_TEST_RC", rc_system},
                                   {"LOCKSTEP_TEST_LOG",
                                    "init (LOCKSTEP_NCCL_TRANSPORT=verbs): no RDMA device: "
                                    "/nonexistent/libibverbs.so.1 cannot be loaded"},
                                   {"LOCKSTEP_TEST_NDEV", "0"}});
  // rdma-core without a device (the fake with none).
  RunChild("[.verbs-init-child]", {{"LOCKSTEP_NCCL_TRANSPORT", "verbs"},
                                   {"LOCKSTEP_NCCL_VERBS_LIBRARY", LOCKSTEP_FAKE_IBVERBS_PATH},
                                   {"LOCKSTEP_FAKE_VERBS_DEVICES", ""},
                                   {"LOCKSTEP_TEST_RC", rc_system},
                                   {"LOCKSTEP_TEST_LOG", "is loaded but lists no device"},
                                   {"LOCKSTEP_TEST_NDEV", "0"}});
  // auto: the sockets transport, with the reason at INFO.
  RunChild("[.verbs-init-child]", {{"LOCKSTEP_NCCL_TRANSPORT", "auto"},
                                   {"LOCKSTEP_NCCL_VERBS_LIBRARY", "/nonexistent/libibverbs.so.1"},
                                   {"LOCKSTEP_TEST_RC", "0"},
                                   {"LOCKSTEP_TEST_LOG", "LOCKSTEP_NCCL_TRANSPORT=auto: using the sockets transport"},
                                   {"LOCKSTEP_TEST_NDEV", "1"}});
  // A transport that does not exist.
  RunChild("[.verbs-init-child]",
           {{"LOCKSTEP_NCCL_TRANSPORT", "rdma"},
            {"LOCKSTEP_TEST_RC", std::to_string(static_cast<int>(ncclInvalidArgument))},
            {"LOCKSTEP_TEST_LOG", "LOCKSTEP_NCCL_TRANSPORT=rdma: expected sockets, verbs or auto"},
            {"LOCKSTEP_TEST_NDEV", "0"}});
}
