// The plugin through NCCL's C ABI, loaded with dlopen as NCCL loads it: both
// ends of connections in this process, polled as NCCL's proxy polls them.
// Streams are cut from outside (shutdown(2) on the plugin's sockets) while
// messages of random sizes and tags are in flight; every byte must arrive
// once, in order, with bounded waits. Bad handles and settings must give an
// error code and a warning through the logger, never an abort.
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <deque>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "net_api.h"
#include "stream_cutter.h"

using lockstep::nccl::harness::NetApi;
using Clock = std::chrono::steady_clock;

namespace {

int g_warnings = 0;
std::string g_last_warning;

void Logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  ++g_warnings;
  g_last_warning = buf;
}

// REQUIRE for hot polling loops (Catch's assertions are slow in a busy loop).
#define NCCL_OK(expr)                                                                   \
  do {                                                                                  \
    if (const ncclResult_t r_ = (expr); r_ != ncclSuccess) {                            \
      FAIL(#expr << " returned " << r_ << " (last warning: " << g_last_warning << ")"); \
    }                                                                                   \
  } while (0)

constexpr int kStreams = 3;  // three rails, one stream each

NetApi& Net() {
  static NetApi* net = [] {
    setenv("LOCKSTEP_NCCL_RAILS", "127.0.0.1,127.0.0.2,127.0.0.3", 1);
    // Whatever agent this machine runs stays out of it (nccl_agent_tests has the agent).
    setenv("LOCKSTEP_NCCL_AGENT_SOCKET", "off", 1);
    setenv("LOCKSTEP_NCCL_CHUNK_BYTES", "4096", 1);
    setenv("LOCKSTEP_NCCL_WINDOW", "4", 1);
    auto* n = new NetApi;
    std::string error;
    if (!n->Load(LOCKSTEP_NCCL_PLUGIN_PATH, "v10", &error)) FAIL(error);
    if (n->init(Logger) != ncclSuccess) FAIL("init failed: " << g_last_warning);
    return n;
  }();
  return *net;
}

struct Pair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

Pair Connect(NetApi& net) {
  Pair p;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  REQUIRE(net.listen(0, handle, &p.listen) == ncclSuccess);
  // Nobody has connected yet: accept answers at once, with no comm.
  REQUIRE(net.accept(p.listen, &p.recv) == ncclSuccess);
  REQUIRE(p.recv == nullptr);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (p.send == nullptr || p.recv == nullptr) {
    if (p.send == nullptr) REQUIRE(net.connect(0, handle, &p.send) == ncclSuccess);
    if (p.recv == nullptr) REQUIRE(net.accept(p.listen, &p.recv) == ncclSuccess);
    REQUIRE(Clock::now() < deadline);
  }
  return p;
}

void Close(NetApi& net, Pair& p) {
  REQUIRE(net.closeSend(p.send) == ncclSuccess);
  REQUIRE(net.closeRecv(p.recv) == ncclSuccess);
  REQUIRE(net.closeListen(p.listen) == ncclSuccess);
}

// Cuts one stream of the connection not cut before (either end of it).
bool CutOne(std::mt19937_64& rng, std::set<uint16_t>& cut) {
  std::vector<lockstep::nccl::harness::TcpSocket> socks;
  for (const auto& s : lockstep::nccl::harness::EstablishedTcpSockets()) {
    if (cut.count(s.local_port) == 0 && cut.count(s.peer_port) == 0) socks.push_back(s);
  }
  if (socks.empty()) return false;
  const auto& s = socks[rng() % socks.size()];
  if (!lockstep::nccl::harness::CutStream(s)) return false;
  cut.insert(s.local_port);
  cut.insert(s.peer_port);
  return true;
}

struct Transfer {
  std::vector<uint8_t> data, into;
  int tag = 0;
  void* sreq = nullptr;
  void* rreq = nullptr;
  bool sdone = false, rdone = false;
};

// Sends `n` messages of random sizes with tags 0..n-1 in windows of `window`,
// cutting up to `cuts` streams at random moments. Returns the streams cut.
int RunTransfers(NetApi& net, Pair& p, uint64_t seed, int n, int window, int cuts) {
  std::mt19937_64 rng(seed);
  std::deque<Transfer> live;
  std::set<uint16_t> cut;
  int posted = 0, completed = 0, ncut = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  void* mh = nullptr;
  REQUIRE(net.regMr(p.send, nullptr, 0, NCCL_PTR_HOST, &mh) == ncclSuccess);
  while (completed < n) {
    if (Clock::now() > deadline) FAIL("transfers did not finish in 30 s (hang)");
    if (posted < n && static_cast<int>(live.size()) < window) {
      Transfer t;
      const size_t size = rng() % 5 == 0 ? rng() % 8 : rng() % (200 * 1024);
      t.data.resize(size);
      for (auto& b : t.data) b = static_cast<uint8_t>(rng());
      t.into.assign(size + rng() % 16, 0xEE);
      t.tag = static_cast<int>(rng() % 100000);
      live.push_back(std::move(t));
      ++posted;
    }
    // Receives and sends are each posted in message order, but which side
    // posts first, and how far ahead, is random.
    bool recv_blocked = false, send_blocked = false;
    for (size_t i = 0; i < live.size(); ++i) {
      Transfer& t = live[i];
      const bool recv_first = rng() % 2 == 0;
      for (int side = 0; side < 2; ++side) {
        if ((side == 0) == recv_first) {
          if (!recv_blocked && t.rreq == nullptr && !t.rdone && rng() % 4 != 0) {
            NCCL_OK(net.irecv(p.recv, t.into.data(), t.into.size(), t.tag, mh, &t.rreq));
          }
          recv_blocked = recv_blocked || (t.rreq == nullptr && !t.rdone);
        } else {
          if (!send_blocked && t.sreq == nullptr && !t.sdone && rng() % 4 != 0) {
            NCCL_OK(net.isend(p.send, t.data.data(), t.data.size(), t.tag, mh, &t.sreq));
          }
          send_blocked = send_blocked || (t.sreq == nullptr && !t.sdone);
        }
      }
      int done = 0, size = -1;
      if (t.rreq != nullptr) {
        NCCL_OK(net.test(t.rreq, &done, &size));
        if (done) {
          REQUIRE(static_cast<size_t>(size) == t.data.size());
          t.rreq = nullptr;
          t.rdone = true;
        }
      }
      if (t.sreq != nullptr) {
        NCCL_OK(net.test(t.sreq, &done, &size));
        if (done) {
          REQUIRE(static_cast<size_t>(size) == t.data.size());
          t.sreq = nullptr;
          t.sdone = true;
        }
      }
    }
    while (!live.empty() && live.front().sdone && live.front().rdone) {
      const Transfer& t = live.front();
      REQUIRE(std::equal(t.data.begin(), t.data.end(), t.into.begin()));
      // Nothing written past the message.
      for (size_t k = t.data.size(); k < t.into.size(); ++k) REQUIRE(t.into[k] == 0xEE);
      live.pop_front();
      ++completed;
    }
    if (ncut < cuts && rng() % 64 == 0 && CutOne(rng, cut)) ++ncut;
  }
  return ncut;
}

}  // namespace

TEST_CASE("the plugin exports v8, v9 and v10 tables that describe the rails", "[nccl]") {
  NetApi& net = Net();
  REQUIRE(std::string(net.name()) == "Lockstep");
  int ndev = 0;
  REQUIRE(net.devices(&ndev) == ncclSuccess);
  REQUIRE(ndev == 1);
  ncclNetProperties_v10_t props;
  REQUIRE(net.getProperties(0, &props) == ncclSuccess);
  REQUIRE(std::string(props.name) == "lockstep[127.0.0.1+127.0.0.2+127.0.0.3]");
  REQUIRE(props.speed == 3 * 10000);
  REQUIRE(props.ptrSupport == NCCL_PTR_HOST);
  REQUIRE(props.maxRecvs == 1);
  REQUIRE(net.getProperties(1, &props) == ncclInvalidArgument);
  for (const char* v : {"v8", "v9"}) {
    NetApi other;
    std::string error;
    REQUIRE(other.Load(LOCKSTEP_NCCL_PLUGIN_PATH, v, &error));
    REQUIRE(other.init(Logger) == ncclSuccess);
    REQUIRE(other.getProperties(0, &props) == ncclSuccess);
    REQUIRE(props.speed == 3 * 10000);
    REQUIRE(props.maxRecvs == 1);
  }
}

TEST_CASE("messages of random sizes and tags arrive intact", "[nccl][property]") {
  NetApi& net = Net();
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    Pair p = Connect(net);
    REQUIRE(RunTransfers(net, p, seed, 200, 8, 0) == 0);
    Close(net, p);
  }
}

TEST_CASE("every byte arrives once and in order while streams are cut during transfers", "[nccl][property]") {
  NetApi& net = Net();
  int total_cuts = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Pair p = Connect(net);
    const int warnings = g_warnings;
    const int cuts = RunTransfers(net, p, 100 + seed, 300, 8, kStreams - 1);
    total_cuts += cuts;
    if (cuts > 0) REQUIRE(g_warnings > warnings);  // each failover is reported
    Close(net, p);
  }
  REQUIRE(total_cuts >= 6);  // the property ran with failures in it
}

TEST_CASE("a malformed or foreign handle gives ncclInvalidArgument and a warning", "[nccl]") {
  NetApi& net = Net();
  std::mt19937_64 rng(5);
  for (int i = 0; i < 50; ++i) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    for (char& c : handle) c = static_cast<char>(rng());
    void* comm = nullptr;
    const int before = g_warnings;
    REQUIRE(net.connect(0, handle, &comm) == ncclInvalidArgument);
    REQUIRE(comm == nullptr);
    REQUIRE(g_warnings == before + 1);
  }
  // A genuine handle with a connect stage this process never started.
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen = nullptr;
  REQUIRE(net.listen(0, handle, &listen) == ncclSuccess);
  handle[88] = 0x7f;
  void* comm = nullptr;
  REQUIRE(net.connect(0, handle, &comm) == ncclInvalidArgument);
  REQUIRE(g_last_warning.find("never started") != std::string::npos);
  REQUIRE(net.closeListen(listen) == ncclSuccess);
}

TEST_CASE("misuse gives an error code and a warning", "[nccl]") {
  NetApi& net = Net();
  Pair p = Connect(net);
  void* mh = nullptr;
  REQUIRE(net.regMr(p.send, nullptr, 0, NCCL_PTR_CUDA, &mh) == ncclInternalError);
  REQUIRE(g_last_warning.find("host memory") != std::string::npos);
  int done = 0;
  int bogus = 0;
  REQUIRE(net.test(&bogus, &done, nullptr) == ncclInternalError);
  // Grouped receives beyond maxRecvs = 1.
  auto* v10 = static_cast<const ncclNet_v10_t*>(dlsym(RTLD_DEFAULT, "ncclNetPlugin_v10"));
  if (v10 == nullptr) {
    void* lib = dlopen(LOCKSTEP_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD);
    v10 = static_cast<const ncclNet_v10_t*>(dlsym(lib, "ncclNetPlugin_v10"));
  }
  REQUIRE(v10 != nullptr);
  char a[8], b[8];
  void* datas[2] = {a, b};
  size_t sizes[2] = {8, 8};
  int tags[2] = {0, 1};
  void* mhs[2] = {mh, mh};
  void* req = nullptr;
  REQUIRE(v10->irecv(p.recv, 2, datas, sizes, tags, mhs, nullptr, &req) == ncclInternalError);
  REQUIRE(req == nullptr);
  // A message larger than its receive fails the receiving side with a clear error.
  std::vector<char> big(100), small(10);
  void* sreq = nullptr;
  void* rreq = nullptr;
  REQUIRE(net.irecv(p.recv, small.data(), small.size(), 0, mh, &rreq) == ncclSuccess);
  REQUIRE(net.isend(p.send, big.data(), big.size(), 0, mh, &sreq) == ncclSuccess);
  ncclResult_t r = ncclSuccess;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (r == ncclSuccess && !done) {
    REQUIRE(Clock::now() < deadline);
    int sdone = 0;
    REQUIRE(net.test(sreq, &sdone, nullptr) == ncclSuccess);
    r = net.test(rreq, &done, nullptr);
  }
  REQUIRE(r == ncclInvalidArgument);
  REQUIRE(g_last_warning.find("does not fit") != std::string::npos);
  Close(net, p);
}

TEST_CASE("isend and irecv return a null request when a comm is full, and work again after", "[nccl]") {
  NetApi& net = Net();
  Pair p = Connect(net);
  std::vector<char> buf(64 * 1024, 7), into(64 * 1024);
  std::vector<void*> sends;
  void* req = nullptr;
  for (int i = 0; i < 1000; ++i) {  // nobody receives: the comm fills up
    REQUIRE(net.isend(p.send, buf.data() + i % 64, 1, 0, nullptr, &req) == ncclSuccess);
    if (req == nullptr) break;
    sends.push_back(req);
  }
  REQUIRE(req == nullptr);
  REQUIRE(sends.size() >= NCCL_NET_MAX_REQUESTS);
  // Receive them all; every send completes and a new isend is accepted.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (size_t i = 0; i < sends.size(); ++i) {
    void* rreq = nullptr;
    REQUIRE(net.irecv(p.recv, into.data() + i % 64, 1, 0, nullptr, &rreq) == ncclSuccess);
    REQUIRE(rreq != nullptr);
    int rdone = 0, sdone = 0, size = -1;
    while (!rdone || !sdone) {
      REQUIRE(Clock::now() < deadline);
      if (!rdone) NCCL_OK(net.test(rreq, &rdone, &size));
      if (!sdone) NCCL_OK(net.test(sends[i], &sdone, nullptr));
    }
    REQUIRE(size == 1);
    REQUIRE(into[i % 64] == 7);
  }
  REQUIRE(net.isend(p.send, buf.data(), 1, 0, nullptr, &req) == ncclSuccess);
  REQUIRE(req != nullptr);
  Close(net, p);
}

TEST_CASE("connecting to a listener that is gone fails with ncclSystemError after trying every rail", "[nccl]") {
  NetApi& net = Net();
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen = nullptr;
  REQUIRE(net.listen(0, handle, &listen) == ncclSuccess);
  REQUIRE(net.closeListen(listen) == ncclSuccess);  // its ports now refuse
  void* send = nullptr;
  ncclResult_t r = ncclSuccess;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (r == ncclSuccess && send == nullptr) {
    REQUIRE(Clock::now() < deadline);
    r = net.connect(0, handle, &send);
  }
  REQUIRE(r == ncclSystemError);
  REQUIRE(send == nullptr);
  REQUIRE(g_last_warning.find("any of its 3 rails") != std::string::npos);
}

TEST_CASE("a peer that disappears gives ncclSystemError, not a hang", "[nccl]") {
  NetApi& net = Net();
  Pair p = Connect(net);
  std::vector<char> data(1 << 20);
  void* sreq = nullptr;
  REQUIRE(net.isend(p.send, data.data(), data.size(), 0, nullptr, &sreq) == ncclSuccess);
  REQUIRE(sreq != nullptr);
  REQUIRE(net.closeRecv(p.recv) == ncclSuccess);  // the peer goes away
  ncclResult_t r = ncclSuccess;
  int done = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (r == ncclSuccess) {
    REQUIRE(Clock::now() < deadline);
    r = net.test(sreq, &done, nullptr);
    REQUIRE(done == 0);
  }
  REQUIRE(r == ncclSystemError);
  REQUIRE(g_last_warning.find("every stream") != std::string::npos);
  REQUIRE(net.closeSend(p.send) == ncclSuccess);
  REQUIRE(net.closeListen(p.listen) == ncclSuccess);
}

// Runs in a fresh process (started by the next test): init with the bad
// setting in the environment must fail with a warning naming the variable.
TEST_CASE("init with a bad setting (child of the bad-settings test)", "[.nccl-init-child]") {
  const char* var = std::getenv("LOCKSTEP_TEST_BAD_VARIABLE");
  REQUIRE(var != nullptr);
  NetApi net;
  std::string error;
  REQUIRE(net.Load(LOCKSTEP_NCCL_PLUGIN_PATH, "v8", &error));
  REQUIRE(net.init(Logger) == ncclInvalidArgument);
  REQUIRE(g_last_warning.find(var) != std::string::npos);
  int ndev = -1;
  REQUIRE(net.devices(&ndev) == ncclSuccess);
  REQUIRE(ndev == 0);  // no devices: NCCL moves on, nothing crashes
}

TEST_CASE("bad settings make init fail with ncclInvalidArgument and a warning naming the variable", "[nccl]") {
  // init reads the environment once per process: each case runs in a fresh one.
  auto init_in_child = [](const char* var, const char* value) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      setenv(var, value, 1);
      setenv("LOCKSTEP_TEST_BAD_VARIABLE", var, 1);
      execl("/proc/self/exe", "nccl_plugin_tests", "[.nccl-init-child]", "--reporter", "compact", nullptr);
      _exit(127);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    INFO(var << "=" << value);
    REQUIRE(WEXITSTATUS(status) == 0);
  };
  init_in_child("LOCKSTEP_NCCL_RAILS", "not-an-address");
  init_in_child("LOCKSTEP_NCCL_STREAMS_PER_RAIL", "0");
  init_in_child("LOCKSTEP_NCCL_CHUNK_BYTES", "12abc");
  init_in_child("LOCKSTEP_NCCL_ACK_TIMEOUT_MS", "-1");
  init_in_child("LOCKSTEP_NCCL_AGENT_POLL_MS", "0");
  init_in_child("LOCKSTEP_NCCL_SOURCE_PORTS", "80");
  init_in_child("LOCKSTEP_NCCL_SOURCE_PORTS", "20000,x");
  init_in_child("LOCKSTEP_NCCL_LISTEN_PORTS", "30000-20000");
}

// Runs in a fresh process (started by the next test) with
// LOCKSTEP_NCCL_SOURCE_PORTS and LOCKSTEP_NCCL_LISTEN_PORTS set: two
// connections over the three loopback rails leave from the configured source
// ports (shared between the connections) to listeners inside the range, and
// carry a message.
TEST_CASE("pinned ports (child of the pinned-ports test)", "[.nccl-ports-child]") {
  const int sport = std::atoi(std::getenv("LOCKSTEP_TEST_SPORT"));
  const int lport = std::atoi(std::getenv("LOCKSTEP_TEST_LPORT"));
  NetApi& net = Net();
  Pair a = Connect(net), b = Connect(net);
  int from_sources = 0, to_sources = 0, to_listeners = 0;
  for (const auto& s : lockstep::nccl::harness::EstablishedTcpSockets()) {
    from_sources += s.local_port >= sport && s.local_port < sport + kStreams ? 1 : 0;
    to_sources += s.peer_port >= sport && s.peer_port < sport + kStreams ? 1 : 0;
    to_listeners += s.peer_port >= lport && s.peer_port <= lport + 9 ? 1 : 0;
  }
  REQUIRE(from_sources == 2 * kStreams);  // every stream of both connections
  REQUIRE(to_sources == 2 * kStreams);    // the accepted ends see them
  // One listener per connection, each on a free port of the range (the first ones,
  // unless another process holds them: the range overlaps the ephemeral ports).
  REQUIRE(to_listeners == 2 * kStreams);
  std::vector<uint8_t> data(1 << 20), got(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  void *sreq = nullptr, *rreq = nullptr;
  NCCL_OK(net.irecv(b.recv, got.data(), got.size(), 5, nullptr, &rreq));
  NCCL_OK(net.isend(b.send, data.data(), data.size(), 5, nullptr, &sreq));
  REQUIRE((sreq != nullptr && rreq != nullptr));
  int sdone = 0, rdone = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!sdone || !rdone) {
    REQUIRE(Clock::now() < deadline);
    if (!sdone) NCCL_OK(net.test(sreq, &sdone, nullptr));
    if (!rdone) NCCL_OK(net.test(rreq, &rdone, nullptr));
  }
  REQUIRE(got == data);
  Close(net, a);
  Close(net, b);
}

TEST_CASE("streams leave from the configured source ports to listeners in the configured range", "[nccl]") {
  // Ports unlikely to be taken by a parallel run: from this process's id.
  const int sport = 20000 + static_cast<int>(getpid() % 10000) * 2;
  const int lport = sport + 20000 + 100;
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string s = std::to_string(sport) + "," + std::to_string(sport + 1) + "," + std::to_string(sport + 2);
    setenv("LOCKSTEP_NCCL_SOURCE_PORTS", s.c_str(), 1);
    setenv("LOCKSTEP_NCCL_LISTEN_PORTS", (std::to_string(lport) + "-" + std::to_string(lport + 9)).c_str(), 1);
    setenv("LOCKSTEP_TEST_SPORT", std::to_string(sport).c_str(), 1);
    setenv("LOCKSTEP_TEST_LPORT", std::to_string(lport).c_str(), 1);
    execl("/proc/self/exe", "nccl_plugin_tests", "[.nccl-ports-child]", "--reporter", "compact", nullptr);
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}
