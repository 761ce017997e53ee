// The agent's side of the NCCL plugin's protocol: the state it hands out
// (fabric/'s verdicts from the fabric status, the clock offset), the metrics
// it makes of the plugins' reports with bounded label sets, and the Unix
// socket line server that carries it.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "fake_clock.h"
#include "lockstep/agent/net/unix_line_server.h"
#include "lockstep/agent/runtime/nccl_endpoint.h"

using namespace lockstep;
using namespace lockstep::agent;

namespace {

nlohmann::json SampleStatus() {
  return nlohmann::json::parse(R"({
    "host_address": "10.0.0.1",
    "peers": [{"peer": "node-b", "host_address": "10.0.0.2"}, {"peer": "node-c", "host_address": "10.0.0.3"}],
    "paths": [
      {"peer": "node-b", "rail": 0, "path": 0, "state": "up"},
      {"peer": "node-b", "rail": 1, "path": 0, "state": "recovering"},
      {"peer": "node-c", "rail": 0, "path": 0, "state": "suspect"},
      {"peer": "node-c", "rail": 1, "path": 0, "state": "down"},
      {"peer": "node-z", "rail": 0, "path": 0, "state": "up"},
      {"peer": "node-b", "rail": 7, "path": 0, "state": "up"}
    ]})");
}

nccl::StreamReport Report(uint64_t conn, bool send, int stream, uint64_t bytes) {
  return nccl::StreamReport{.conn = conn,
                            .send = send,
                            .stream = stream,
                            .rail = {10, 1, 0, 1},
                            .remote = {10, 1, 0, 2},
                            .peer = send ? nccl::Ipv4{10, 0, 0, 2} : nccl::Ipv4{},
                            .bytes = bytes,
                            .chunks = 1,
                            .owd_p50_ns = send ? std::nullopt : std::optional<int64_t>(20'000),
                            .owd_p99_ns = send ? std::nullopt : std::optional<int64_t>(90'000),
                            .failovers = 0,
                            .rebalances = 0,
                            .state = "up"};
}

// Re-registering a family returns the existing one.
metrics::Family& Find(metrics::Registry& r, const std::string& name) { return r.Gauge(name, ""); }

std::string Line(const std::string& s) { return s.substr(0, s.size() - 1); }  // without '\n'

}  // namespace

TEST_CASE("the plugins' state carries fabric/'s verdicts by rail address and peer host address", "[nccl][daemonset]") {
  const std::vector<uint32_t> rails = {0x0a010001, 0x0a020001};  // 10.1.0.1, 10.2.0.1 (host order)
  nccl::AgentState s = NcclStateFromFabric(SampleStatus(), rails, true, -42, 700);
  REQUIRE(s.locked);
  REQUIRE(s.offset_ns == -42);
  REQUIRE(s.bound_ns == 700);
  REQUIRE(s.host == nccl::Ipv4{10, 0, 0, 1});
  REQUIRE(s.rails == std::vector<nccl::Ipv4>{{10, 1, 0, 1}, {10, 2, 0, 1}});
  // Unknown peers and rails are left out; up and suspect deliver, recovering and down do not.
  REQUIRE(s.paths.size() == 4);
  REQUIRE(s.Usable({10, 1, 0, 1}, {10, 0, 0, 2}) == true);
  REQUIRE(s.Usable({10, 2, 0, 1}, {10, 0, 0, 2}) == false);  // recovering: the hold-down is not over
  REQUIRE(s.Usable({10, 1, 0, 1}, {10, 0, 0, 3}) == true);   // suspect
  REQUIRE(s.Usable({10, 2, 0, 1}, {10, 0, 0, 3}) == false);
  REQUIRE(s.paths[1].state == "recovering");
  // Without fabric failover: the clock only.
  nccl::AgentState none = NcclStateFromFabric(nullptr, {}, false, 0, 0);
  REQUIRE(none.paths.empty());
  REQUIRE(none.host == nccl::Ipv4{});
}

TEST_CASE("the endpoint answers queries and turns reports into bounded metrics per job", "[nccl][daemonset]") {
  metrics::Registry registry;
  nccl::AgentState state{.locked = true, .offset_ns = 5, .host = {10, 0, 0, 1}};
  NcclEndpoint e([&] { return state; }, registry, {.max_jobs = 2, .max_peers = 8, .max_rails = 8});
  e.OnOpen(1);
  REQUIRE(e.OnLine(1, "hello v=1 job=train-a pid=10").empty());
  REQUIRE(e.OnLine(1, "query") == nccl::EncodeAgentState(state));
  REQUIRE(e.OnLine(1, Line(nccl::EncodeStreamReport(Report(7, true, 0, 1000)))).empty());
  REQUIRE(e.OnLine(1, Line(nccl::EncodeStreamReport(Report(7, true, 0, 5000)))).empty());
  REQUIRE(e.OnLine(1, Line(nccl::EncodeStreamReport(Report(8, false, 0, 300)))).empty());
  // Both ends of one connection share its id, and may be in one process.
  REQUIRE(e.OnLine(1, Line(nccl::EncodeStreamReport(Report(7, false, 1, 50)))).empty());
  REQUIRE(e.connections() == 3);
  auto& bytes = Find(registry, "lockstep_nccl_bytes_total");
  REQUIRE(bytes.Get({"train-a", "10.0.0.2", "10.1.0.1", "send"}) == 5000);
  // A receiver does not know the peer's host address: the stream's remote address names it.
  REQUIRE(bytes.Get({"train-a", "10.1.0.2", "10.1.0.1", "recv"}) == 350);
  REQUIRE(Find(registry, "lockstep_nccl_owd_seconds").Get({"train-a", "10.1.0.2", "10.1.0.1", "0.99"}) ==
          Approx(90e-6));
  REQUIRE(Find(registry, "lockstep_nccl_connections").Get({"train-a", "send"}) == 1);
  REQUIRE(Find(registry, "lockstep_nccl_streams").Get({"train-a", "up"}) == 3);
  // State changes and events.
  auto r = Report(7, true, 0, 6000);
  r.state = "parked";
  r.failovers = 1;
  r.rebalances = 2;
  (void)e.OnLine(1, Line(nccl::EncodeStreamReport(r)));
  REQUIRE(Find(registry, "lockstep_nccl_streams").Get({"train-a", "up"}) == 2);
  REQUIRE(Find(registry, "lockstep_nccl_streams").Get({"train-a", "parked"}) == 1);
  REQUIRE(Find(registry, "lockstep_nccl_failovers_total").Get({"train-a"}) == 1);
  REQUIRE(Find(registry, "lockstep_nccl_rebalances_total").Get({"train-a"}) == 2);
  nlohmann::json jobs = e.Jobs();
  REQUIRE(jobs.size() == 1);
  REQUIRE(jobs[0]["job"] == "train-a");
  REQUIRE(jobs[0]["connections"] == 3);
  REQUIRE(jobs[0]["bytes_sent"] == 6000);
  REQUIRE(jobs[0]["streams"]["parked"] == 1);
  REQUIRE(jobs[0]["owd_ns"]["10.1.0.2/10.1.0.1"]["p99"] == 90000);
  // A close line and a client going away forget their connections.
  (void)e.OnLine(1, "close conn=7");
  REQUIRE(e.connections() == 1);
  REQUIRE(Find(registry, "lockstep_nccl_connections").Get({"train-a", "send"}) == 0);
  e.OnClose(1);
  REQUIRE(e.connections() == 0);
  REQUIRE(Find(registry, "lockstep_nccl_streams").Get({"train-a", "up"}) == 0);
  // Bounded jobs: "unknown" and train-a took both places; the next job is "other".
  e.OnOpen(2);
  (void)e.OnLine(2, "hello v=1 job=train-b pid=11");
  (void)e.OnLine(2, Line(nccl::EncodeStreamReport(Report(9, true, 0, 10))));
  REQUIRE(bytes.Get({"other", "10.0.0.2", "10.1.0.1", "send"}) == 10);
  REQUIRE(Find(registry, "lockstep_nccl_label_overflow_total").Get() >= 1);
  // Malformed lines are ignored; a connection id of another client is not taken over.
  REQUIRE(e.OnLine(2, "stream conn=x").empty());
  e.OnOpen(3);
  (void)e.OnLine(3, Line(nccl::EncodeStreamReport(Report(9, true, 0, 99999))));
  REQUIRE(bytes.Get({"other", "10.0.0.2", "10.1.0.1", "send"}) == 10);
}

TEST_CASE("the endpoint reuses its answer to queries within state_ttl", "[nccl][daemonset]") {
  metrics::Registry registry;
  FakeClock clock;
  int built = 0;
  nccl::AgentState state{.locked = true, .offset_ns = 1};
  NcclEndpoint e(
      [&] {
        ++built;
        return state;
      },
      registry, {.state_ttl = std::chrono::milliseconds(50)}, &clock);
  e.OnOpen(1);
  const std::string first = e.OnLine(1, "query");
  state.offset_ns = 2;
  clock.Advance(std::chrono::milliseconds(49));
  REQUIRE(e.OnLine(1, "query") == first);
  REQUIRE(built == 1);
  clock.Advance(std::chrono::milliseconds(1));
  REQUIRE(e.OnLine(1, "query") == nccl::EncodeAgentState(state));
  REQUIRE(built == 2);
}

namespace {

class Echo final : public LineHandler {
 public:
  void OnOpen(LineClient) override { ++opened; }
  std::string OnLine(LineClient, const std::string& line) override { return "got " + line + "\n"; }
  void OnClose(LineClient) override { ++closed; }
  std::atomic<int> opened{0}, closed{0};
};

int Dial(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string ReadLine(int fd) {
  std::string s;
  char c;
  while (::recv(fd, &c, 1, 0) == 1 && c != '\n') s += c;
  return s;
}

std::string TempDir() {
  char tmpl[] = "/tmp/lockstep-nccl-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

}  // namespace

TEST_CASE("the Unix line server answers each client's lines and survives bad clients", "[nccl][daemonset]") {
  const std::string dir = TempDir();
  const std::string path = dir + "/sub/nccl.sock";  // the parent is created
  Echo echo;
  UnixLineServer server(path, echo, {.max_clients = 4, .max_line = 64});
  REQUIRE(server.Start().ok());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  REQUIRE((st.st_mode & 0777) == 0666);
  int a = Dial(path);
  int b = Dial(path);
  REQUIRE(a >= 0);
  REQUIRE(b >= 0);
  REQUIRE(::send(a, "one\ntw", 6, 0) == 6);
  REQUIRE(ReadLine(a) == "got one");
  REQUIRE(::send(a, "o\n", 2, 0) == 2);
  REQUIRE(ReadLine(a) == "got two");
  REQUIRE(::send(b, "x\n", 2, 0) == 2);
  REQUIRE(ReadLine(b) == "got x");
  // A line longer than max_line drops that client only.
  const std::string longline(100, 'y');
  REQUIRE(::send(b, longline.data(), longline.size(), 0) == 100);
  char c;
  REQUIRE(::recv(b, &c, 1, 0) == 0);  // closed by the server
  REQUIRE(::send(a, "still\n", 6, 0) == 6);
  REQUIRE(ReadLine(a) == "got still");
  // A second server on the same live path refuses to steal it.
  Echo other;
  UnixLineServer second(path, other);
  auto s2 = second.Start();
  REQUIRE_FALSE(s2.ok());
  REQUIRE(s2.error().message.find("served by another process") != std::string::npos);
  ::close(a);
  ::close(b);
  server.Stop();
  REQUIRE(echo.closed.load() == echo.opened.load());
  REQUIRE(::stat(path.c_str(), &st) != 0);  // removed
  // A stale socket file (a crashed run) is replaced.
  int stale = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
  REQUIRE(::bind(stale, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  ::close(stale);
  UnixLineServer third(path, echo);
  REQUIRE(third.Start().ok());
  int d = Dial(path);
  REQUIRE(::send(d, "hi\n", 3, 0) == 3);
  REQUIRE(ReadLine(d) == "got hi");
  ::close(d);
  third.Stop();
  ::rmdir((dir + "/sub").c_str());
  ::rmdir(dir.c_str());
}
