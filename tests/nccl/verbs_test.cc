// The verbs transport through the in-memory RC fabric (fake_verbs.h), which
// fills the same VerbsApi port that LoadVerbs fills from libibverbs.so.1:
// exact transfers of random sizes and tags, QP failures mid-transfer
// (IBV_WC_RETRY_EXC_ERR then flushes, with sends that reached the peer while
// their sender saw them fail) replayed on the standby with every byte
// delivered once and in order, the agent's path verdicts parking a primary,
// and the "no RDMA device" status when the library or a device is absent.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "fake_verbs.h"
#include "lockstep/nccl/frame.h"
#include "lockstep/nccl/handle.h"
#include "lockstep/nccl/verbs_api.h"
#include "lockstep/nccl/verbs_transport.h"

namespace lockstep::nccl {
namespace {

using Clock = std::chrono::steady_clock;

struct Warnings {
  std::vector<std::string> lines;
  WarnFn fn() {
    return [this](const std::string& m) { lines.push_back(m); };
  }
  int Count(const std::string& part) const {
    return static_cast<int>(std::count_if(lines.begin(), lines.end(),
                                          [&](const std::string& l) { return l.find(part) != std::string::npos; }));
  }
};

VerbsTransportConfig SmallConfig() {
  VerbsTransportConfig c;
  c.stripe.chunk_bytes = 4096;
  c.stripe.window_per_stream = 4;
  return c;
}

std::unique_ptr<Transport> MakeFake(VerbsTransportConfig c, Warnings* w, int devices = 2, bool infiniband = false) {
  std::vector<fake::FakeDevice> d;
  for (int i = 0; i < devices; ++i) {
    d.push_back({.name = "fake" + std::to_string(i), .ports = 1, .infiniband = infiniband});
  }
  fake::ResetFabric(d);
  Result<std::unique_ptr<Transport>> t = MakeVerbsTransport(fake::FakeVerbsApi(), std::move(c), w->fn());
  REQUIRE(t.ok());
  return std::move(*t);
}

struct Pair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<SendConnection> send;
  std::unique_ptr<RecvConnection> recv;
  std::vector<uint32_t> send_qps;  // the connector's QPs: primaries, then the standby
};

Pair Connect(Transport& t) {
  Pair p;
  const std::vector<uint32_t> before = fake::Stats().qps;
  uint8_t handle[kHandleBytes] = {};
  Result<std::unique_ptr<Listener>> l = t.Listen(0, handle);
  REQUIRE(l.ok());
  p.listener = std::move(*l);
  Result<std::unique_ptr<PendingConnection>> pending = t.Connect(0, handle);
  REQUIRE(pending.ok());
  for (const uint32_t q : fake::Stats().qps) {
    if (std::find(before.begin(), before.end(), q) == before.end()) p.send_qps.push_back(q);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while ((!p.send || !p.recv) && Clock::now() < deadline) {
    if (!p.send) {
      Result<std::unique_ptr<SendConnection>> s = (*pending)->Poll();
      REQUIRE(s.ok());
      p.send = std::move(*s);
    }
    if (!p.recv) {
      Result<std::unique_ptr<RecvConnection>> r = p.listener->Accept();
      REQUIRE(r.ok());
      p.recv = std::move(*r);
    }
  }
  REQUIRE(p.send);
  REQUIRE(p.recv);
  return p;
}

struct Message {
  std::vector<uint8_t> data;
  int tag = 0;
};

std::vector<Message> RandomMessages(std::mt19937& rng, int n, size_t max_bytes) {
  std::vector<Message> m(n);
  for (int i = 0; i < n; ++i) {
    const int kind = static_cast<int>(rng() % 4);
    const size_t size = kind == 0 ? 0 : kind == 1 ? rng() % 64 : rng() % (max_bytes + 1);
    m[i].data.resize(size);
    for (auto& b : m[i].data) b = static_cast<uint8_t>(rng());
    m[i].tag = static_cast<int>(rng() % 5);
  }
  return m;
}

// Sends `msgs` in order with up to `window` outstanding on each side, as
// NCCL's proxy does; `step(i)` runs at every polling round. Returns the
// error of the first failing call, or an empty string when every message
// arrived whole (checked byte for byte) and in order.
std::string Exchange(Pair& p, const std::vector<Message>& msgs, size_t window,
                     const std::function<void(int)>& step = nullptr) {
  std::vector<std::vector<uint8_t>> got(msgs.size());
  std::vector<RequestId> sid(msgs.size()), rid(msgs.size());
  size_t sent = 0, received = 0, send_done = 0, recv_done = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (int round = 0; send_done < msgs.size() || recv_done < msgs.size(); ++round) {
    if (Clock::now() > deadline)
      return "timed out: " + std::to_string(send_done) + " sends, " + std::to_string(recv_done) + " receives done";
    if (step) step(round);
    while (received < msgs.size() && received - recv_done < window) {
      got[received].assign(msgs[received].data.size() + 16, 0xee);
      auto r = p.recv->Recv(got[received].data(), got[received].size(), msgs[received].tag);
      if (!r.ok()) return "recv: " + r.error().message;
      if (!*r) break;
      rid[received++] = **r;
    }
    while (sent < msgs.size() && sent - send_done < window) {
      auto r = p.send->Send(msgs[sent].data.data(), msgs[sent].data.size(), msgs[sent].tag);
      if (!r.ok()) return "send: " + r.error().message;
      if (!*r) break;
      sid[sent++] = **r;
    }
    if (send_done < sent) {
      auto t = p.send->Test(sid[send_done]);
      if (!t.ok()) return "send test: " + t.error().message;
      if (t->done) {
        if (t->size != msgs[send_done].data.size()) return "send size";
        ++send_done;
      }
    }
    if (recv_done < received) {
      auto t = p.recv->Test(rid[recv_done]);
      if (!t.ok()) return "recv test: " + t.error().message;
      if (t->done) {
        const Message& m = msgs[recv_done];
        if (t->size != m.data.size())
          return "message " + std::to_string(recv_done) + ": size " + std::to_string(t->size);
        if (!std::equal(m.data.begin(), m.data.end(), got[recv_done].begin())) {
          return "message " + std::to_string(recv_done) + ": bytes differ";
        }
        if (got[recv_done][m.data.size()] != 0xee) return "message " + std::to_string(recv_done) + ": overrun";
        ++recv_done;
      }
    }
  }
  return "";
}

TEST_CASE("verbs: without libibverbs the status says there is no RDMA device", "[verbs]") {
  Result<VerbsApi> api = LoadVerbs("libibverbs-lockstep-absent.so.1");
  REQUIRE(!api.ok());
  CHECK(api.error().code == ErrorCode::kUnavailable);
  CHECK(api.error().message.rfind("no RDMA device: libibverbs-lockstep-absent.so.1 cannot be loaded", 0) == 0);
}

TEST_CASE("verbs: the host's libibverbs loads and its devices, if none, are reported plainly", "[verbs]") {
  // rdma-core is installed here (scripts/setup); whether a device exists depends on the machine.
  Result<VerbsApi> api = LoadVerbs();
  REQUIRE(api.ok());
  CHECK(api->post_send != nullptr);
  CHECK(api->query_port != nullptr);
  Warnings w;
  Result<std::unique_ptr<Transport>> t = MakeVerbsTransport(*api, VerbsTransportConfig{}, w.fn());
  if (!t.ok()) {
    CHECK(t.error().code == ErrorCode::kUnavailable);
    CHECK(t.error().message.rfind("no RDMA device: ", 0) == 0);
  } else {
    CHECK((*t)->Properties(0).rails >= 1);
  }
}

TEST_CASE("verbs: a fabric without devices, an absent device and a bad GID index are 'no RDMA device'", "[verbs]") {
  fake::ResetFabric({});
  Result<std::unique_ptr<Transport>> none = MakeVerbsTransport(fake::FakeVerbsApi(), {}, nullptr);
  REQUIRE(!none.ok());
  CHECK(none.error().message.rfind("no RDMA device: fake is loaded but lists no device", 0) == 0);

  fake::ResetFabric({{.name = "fake0", .ports = 1}, {.name = "fake1", .ports = 2}});
  VerbsTransportConfig c;
  c.rails = {{.device = "fake1", .port = 2}, {.device = "mlx5_9", .port = 1}};
  Result<std::unique_ptr<Transport>> absent = MakeVerbsTransport(fake::FakeVerbsApi(), c, nullptr);
  REQUIRE(!absent.ok());
  CHECK(absent.error().message == "no RDMA device: mlx5_9 not found (devices: fake0, fake1)");

  c.rails = {{.device = "fake0", .port = 1}};
  c.gid_index = 3;
  Result<std::unique_ptr<Transport>> gid = MakeVerbsTransport(fake::FakeVerbsApi(), c, nullptr);
  REQUIRE(!gid.ok());
  CHECK(gid.error().message.find("no GID at index 3") != std::string::npos);
  CHECK(fake::Stats().live_objects == 0);  // what was opened was closed again
}

TEST_CASE("verbs: settings from the environment", "[verbs]") {
  std::map<std::string, std::string> env;
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  Result<VerbsTransportConfig> d = VerbsConfigFromEnv(get);
  REQUIRE(d.ok());
  CHECK(d->rails.empty());
  CHECK(d->standby);
  CHECK(d->gid_index == 0);
  env = {{"LOCKSTEP_NCCL_VERBS_DEVICES", "mlx5_0,mlx5_1:2"},
         {"LOCKSTEP_NCCL_VERBS_GID_INDEX", "3"},
         {"LOCKSTEP_NCCL_VERBS_STANDBY", "0"},
         {"LOCKSTEP_NCCL_VERBS_REARM_MS", "0"}};
  Result<VerbsTransportConfig> c = VerbsConfigFromEnv(get);
  REQUIRE(c.ok());
  CHECK(c->rails == std::vector<VerbsRailSpec>{{.device = "mlx5_0", .port = 1}, {.device = "mlx5_1", .port = 2}});
  CHECK(c->gid_index == 3);
  CHECK(!c->standby);
  CHECK(c->rearm_after_ms == 0);
  CHECK(d->rearm_after_ms == 1000);
  for (const char* bad : {"mlx5_0:", "mlx5_0:0", ",mlx5_0", "a,b,c,d,e,f,g,h,i"}) {
    env = {{"LOCKSTEP_NCCL_VERBS_DEVICES", bad}};
    Result<VerbsTransportConfig> r = VerbsConfigFromEnv(get);
    REQUIRE(!r.ok());
    CHECK(r.error().message.find("LOCKSTEP_NCCL_VERBS_DEVICES=") == 0);
  }
  env = {{"LOCKSTEP_NCCL_VERBS_GID_INDEX", "256"}};
  CHECK(!VerbsConfigFromEnv(get).ok());
  env = {{"LOCKSTEP_NCCL_VERBS_REARM_MS", "-5"}};
  CHECK(!VerbsConfigFromEnv(get).ok());
}

TEST_CASE("verbs: transfers through the fake fabric are exact and leave nothing behind", "[verbs]") {
  // RoCE ports (GRH addressing) and InfiniBand ports (LID addressing).
  const bool infiniband = GENERATE(false, true);
  INFO("infiniband " << infiniband);
  Warnings w;
  {
    auto t = MakeFake(SmallConfig(), &w, 2, infiniband);
    const DeviceProperties props = t->Properties(0);
    CHECK(props.name == "lockstep-verbs[fake0:1+fake1:1]");
    CHECK(props.rails == 2);
    CHECK(props.streams == 3);  // two primaries and the standby
    Pair p = Connect(*t);
    REQUIRE(p.send_qps.size() == 3);
    std::mt19937 rng(1);
    const std::vector<Message> msgs = RandomMessages(rng, 200, 40000);
    CHECK(Exchange(p, msgs, 8) == "");
    const fake::FabricStats s = fake::Stats();
    CHECK(s.bad_sge == 0);
    CHECK(s.cq_overruns == 0);
    CHECK(s.misrouted == 0);  // every address vector and PSN named the peer
    CHECK(s.retry_exceeded == 0);
    CHECK(s.delivered > 200);
    CHECK(w.lines.empty());
    // A second connection on the same transport works alongside.
    Pair q = Connect(*t);
    CHECK(Exchange(q, RandomMessages(rng, 20, 10000), 4) == "");
  }
  CHECK(fake::Stats().live_objects == 0);
}

TEST_CASE("verbs: a primary failing mid-transfer fails over to the standby with no byte lost or duplicated",
          "[verbs]") {
  for (int delivered_unacked : {0, 1, 3}) {
    Warnings w;
    auto t = MakeFake(SmallConfig(), &w);
    fake::SetBudget(1);  // a slow fabric: windows fill, work is in flight when the path fails
    Pair p = Connect(*t);
    std::mt19937 rng(static_cast<unsigned>(10 + delivered_unacked));
    const std::vector<Message> msgs = RandomMessages(rng, 150, 30000);
    const std::string r = Exchange(p, msgs, 8, [&](int round) {
      if (round == 40) REQUIRE(fake::FailPath(p.send_qps[0], delivered_unacked));
    });
    INFO("delivered_unacked " << delivered_unacked);
    CHECK(r == "");
    const fake::FabricStats s = fake::Stats();
    CHECK(s.retry_exceeded >= 1);
    CHECK(s.bad_sge == 0);
    CHECK(s.cq_overruns == 0);
    CHECK(w.Count("QP 0 on fake0:1 failed (transport retry counter exceeded (IBV_WC_RETRY_EXC_ERR))") == 1);
    CHECK(w.Count("replayed on the 2 QPs left") == 1);
    // Chunks were in flight on the failed QP (the failure hit mid-transfer).
    const auto line = std::find_if(w.lines.begin(), w.lines.end(),
                                   [](const std::string& l) { return l.find("unacknowledged") != std::string::npos; });
    REQUIRE(line != w.lines.end());
    const std::smatch m = [&] {
      std::smatch r;
      std::regex_search(*line, r, std::regex("; ([0-9]+) unacknowledged chunks replayed"));
      return r;
    }();
    REQUIRE(m.size() == 2);
    CHECK(std::stoi(m[1].str()) >= 1);
  }
}

TEST_CASE("verbs: random QP failures (all but one) during random transfers deliver every byte once, in order",
          "[verbs]") {
  for (unsigned seed = 1; seed <= 25; ++seed) {
    Warnings w;
    auto t = MakeFake(SmallConfig(), &w, 1 + static_cast<int>(seed % 3));
    std::mt19937 rng(seed);
    fake::SetBudget(1 + static_cast<int>(rng() % 6));
    Pair p = Connect(*t);
    // Fail every QP but one, in random order and at random rounds.
    std::vector<uint32_t> victims = p.send_qps;
    std::shuffle(victims.begin(), victims.end(), rng);
    victims.pop_back();
    std::vector<int> at;
    for (size_t i = 0; i < victims.size(); ++i) at.push_back(static_cast<int>(rng() % 300));
    const std::vector<Message> msgs = RandomMessages(rng, 120, 20000);
    const std::string r = Exchange(p, msgs, 1 + rng() % 8, [&](int round) {
      for (size_t i = 0; i < victims.size(); ++i) {
        if (round == at[i]) fake::FailPath(victims[i], static_cast<int>(rng() % 3));
      }
    });
    INFO("seed " << seed);
    CHECK(r == "");
    CHECK(fake::Stats().cq_overruns == 0);
    CHECK(fake::Stats().misrouted == 0);
  }
}

TEST_CASE("verbs: when every QP fails the connection reports the network error, without hanging", "[verbs]") {
  Warnings w;
  VerbsTransportConfig c = SmallConfig();
  c.standby = false;
  auto t = MakeFake(c, &w, 1);
  Pair p = Connect(*t);
  REQUIRE(p.send_qps.size() == 1);
  std::mt19937 rng(3);
  const std::string r = Exchange(p, RandomMessages(rng, 50, 20000), 4, [&](int round) {
    if (round == 5) fake::FailPath(p.send_qps[0]);
  });
  CHECK(r.find("every QP of the connection failed") != std::string::npos);
}

TEST_CASE("verbs: a rail the agent reports failed is parked, its chunks move to the standby, and it comes back",
          "[verbs]") {
  Warnings w;
  bool rail0_failed = false;
  int asked = 0;
  VerbsTransportConfig c = SmallConfig();
  std::vector<VerbsPath> seen;
  c.host = [] { return std::array<uint8_t, 4>{10, 9, 8, 7}; };
  c.path_failed = [&](const VerbsPath& path) {
    ++asked;
    if (seen.size() < 4) seen.push_back(path);
    return path.rail == 0 && rail0_failed;
  };
  auto t = MakeFake(c, &w);
  Pair p = Connect(*t);
  std::mt19937 rng(5);
  const std::vector<Message> msgs = RandomMessages(rng, 200, 30000);
  const std::string r = Exchange(p, msgs, 8, [&](int round) {
    if (round == 30) rail0_failed = true;
    if (round == 200) rail0_failed = false;
  });
  CHECK(r == "");
  CHECK(asked > 0);
  // The hook sees the rail's address (the fake's RoCE GIDs are ::ffff:10.<device>.<port>.1) and the
  // listener's host address from the handle.
  REQUIRE(!seen.empty());
  for (const VerbsPath& path : seen) {
    CHECK(path.peer_host == std::array<uint8_t, 4>{10, 9, 8, 7});
    CHECK(path.rail_ipv4 == std::array<uint8_t, 4>{10, static_cast<uint8_t>(path.rail), 1, 1});
  }
  CHECK(w.Count("QP 0 on fake0:1 parked: its path is reported failed") == 1);
  CHECK(fake::Stats().retry_exceeded == 0);  // nothing failed on the wire
}

TEST_CASE("verbs: each end reports its QPs (bytes, failovers, state) and says when it is gone", "[verbs]") {
  Warnings w;
  std::map<std::pair<uint64_t, bool>, std::vector<StreamReport>> last;
  std::vector<std::pair<uint64_t, bool>> closed;
  VerbsTransportConfig c = SmallConfig();
  c.rearm_after_ms = 0;  // QP 0 stays down (re-creation has its own test)
  c.report = [&](uint64_t conn, bool send, std::vector<StreamReport> qps) { last[{conn, send}] = std::move(qps); };
  c.closed = [&](uint64_t conn, bool send) { closed.emplace_back(conn, send); };
  c.host = [] { return std::array<uint8_t, 4>{10, 9, 8, 7}; };
  c.fabric_now_ns = [] {  // one clock for both ends, as on one host
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  };
  {
    auto t = MakeFake(c, &w);
    Pair p = Connect(*t);
    std::mt19937 rng(8);
    const std::vector<Message> msgs = RandomMessages(rng, 40, 20000);
    REQUIRE(Exchange(p, msgs, 4) == "");
    // Both ends of the one connection, under the connector's id, three QPs each.
    REQUIRE(last.size() == 2);
    const uint64_t conn = last.begin()->first.first;
    REQUIRE(last.count({conn, true}) == 1);
    REQUIRE(last.count({conn, false}) == 1);
    const std::vector<StreamReport> s = last[{conn, true}];
    REQUIRE(s.size() == 3);
    CHECK(s[0].state == "up");
    CHECK(s[1].state == "up");
    CHECK(s[2].state == "parked");  // the standby, idle
    CHECK(s[0].rail == std::array<uint8_t, 4>{10, 0, 1, 1});
    CHECK(s[1].remote == std::array<uint8_t, 4>{10, 1, 1, 1});
    CHECK(s[0].peer == std::array<uint8_t, 4>{10, 9, 8, 7});
    CHECK(s[0].failovers == 0);
    CHECK(s[2].bytes == 0);
    CHECK(!s[0].owd_p50_ns.has_value());  // senders measure no delays
    // A failure: QP 0 down, the standby up, one failover (reported at the next second).
    REQUIRE(fake::FailPath(p.send_qps[0]));
    const auto until = Clock::now() + std::chrono::milliseconds(1500);
    while (Clock::now() < until) REQUIRE(Exchange(p, RandomMessages(rng, 4, 20000), 4) == "");
    const std::vector<StreamReport> f = last[{conn, true}];
    REQUIRE(f.size() == 3);
    CHECK(f[0].state == "down");
    CHECK(f[2].state == "up");
    CHECK(f[0].failovers == 1);
    CHECK(f[2].bytes > 0);
    // Receivers measure one-way delays from the stamps (same clock: small, not negative).
    const std::vector<StreamReport> rr = last[{conn, false}];
    REQUIRE(rr.size() == 3);
    REQUIRE(rr[1].owd_p50_ns.has_value());
    CHECK(*rr[1].owd_p50_ns >= 0);
    CHECK(*rr[1].owd_p99_ns >= *rr[1].owd_p50_ns);
    CHECK(*rr[1].owd_p99_ns < 1'000'000'000);
    REQUIRE(rr[2].owd_p50_ns.has_value());  // the standby carried chunks after the failure
    uint64_t received = 0;
    for (const StreamReport& r : last[{conn, false}]) received += r.bytes;
    CHECK(received > 0);
    CHECK(closed.empty());
  }
  CHECK(closed.size() == 2);
}

TEST_CASE("verbs: a failed QP is re-created and re-admitted once its link is back", "[verbs]") {
  Warnings w, info;
  VerbsTransportConfig c = SmallConfig();
  c.rearm_after_ms = 20;
  c.info = info.fn();
  auto t = MakeFake(c, &w);
  Pair p = Connect(*t);
  std::mt19937 rng(21);
  // fake0's port goes down (QP 0 fails at both ends; the standby is on fake1) and comes back.
  CHECK(Exchange(p, RandomMessages(rng, 300, 20000), 8, [&](int round) {
          if (round == 20) REQUIRE(fake::SetPortDown("fake0", 1, true));
        }) == "");
  CHECK(w.Count("QP 0 on fake0:1 failed (transport retry counter exceeded") >= 1);
  // Still down: re-created QPs fail again (with backoff), and the traffic goes on without them.
  const auto down_until = Clock::now() + std::chrono::milliseconds(200);
  while (Clock::now() < down_until) REQUIRE(Exchange(p, RandomMessages(rng, 10, 20000), 8) == "");
  REQUIRE(fake::SetPortDown("fake0", 1, false));
  // Traffic until QP 0 is back (its backoff is at most 16 x 20 ms).
  const int before = info.Count("QP 0 on fake0:1 re-created and re-admitted");
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (info.Count("QP 0 on fake0:1 re-created and re-admitted") == before && Clock::now() < until) {
    REQUIRE(Exchange(p, RandomMessages(rng, 10, 20000), 8) == "");
  }
  REQUIRE(info.Count("QP 0 on fake0:1 re-created and re-admitted") > before);
  // From now on nothing fails: the re-created QP carries chunks again, every byte exact.
  const int failures = w.Count("failed (");
  const uint64_t delivered = fake::Stats().delivered;
  CHECK(Exchange(p, RandomMessages(rng, 200, 20000), 8) == "");
  CHECK(w.Count("failed (") == failures);
  CHECK(fake::Stats().delivered > delivered);
  CHECK(fake::Stats().misrouted == 0);
  CHECK(fake::Stats().cq_overruns == 0);
}

TEST_CASE("verbs: a QP whose path the agent still reports failed is not re-created", "[verbs]") {
  Warnings w, info;
  VerbsTransportConfig c = SmallConfig();
  c.rearm_after_ms = 50;
  c.info = info.fn();
  bool rail0_failed = false;
  c.path_failed = [&](const VerbsPath& path) { return path.rail == 0 && rail0_failed; };
  auto t = MakeFake(c, &w);
  Pair p = Connect(*t);
  std::mt19937 rng(22);
  // QP 0's path fails on the wire; as soon as it has, the agent says so too.
  REQUIRE(Exchange(p, RandomMessages(rng, 100, 20000), 8, [&](int round) {
            if (round == 10) REQUIRE(fake::FailPath(p.send_qps[0]));
            if (w.Count("QP 0 on fake0:1 failed") > 0) rail0_failed = true;
          }) == "");
  REQUIRE(w.Count("QP 0 on fake0:1 failed (") == 1);  // once: not re-created into the failed path
  REQUIRE(rail0_failed);
  const auto until = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < until) REQUIRE(Exchange(p, RandomMessages(rng, 5, 20000), 8) == "");
  CHECK(info.Count("re-created") == 0);
  rail0_failed = false;  // the agent's hold-down is over
  const auto until2 = Clock::now() + std::chrono::seconds(5);
  while (info.Count("QP 0 on fake0:1 re-created and re-admitted") == 0 && Clock::now() < until2) {
    REQUIRE(Exchange(p, RandomMessages(rng, 5, 20000), 8) == "");
  }
  CHECK(info.Count("QP 0 on fake0:1 re-created and re-admitted") == 1);
}

// A TCP listener on 127.0.0.1 that is not a verbs listener, and its handle.
struct ForeignListener {
  int fd = -1;
  uint8_t handle[kHandleBytes] = {};
  ForeignListener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ListenHandle h{.token = 7, .rails = {RailEndpoint{.ipv4 = {127, 0, 0, 1}, .port = ntohs(a.sin_port)}}};
    EncodeHandle(h, handle);
  }
  ~ForeignListener() { ::close(fd); }
};

TEST_CASE("verbs: a peer on the other transport is an error that says so, not a hang", "[verbs]") {
  Warnings w;
  auto t = MakeFake(SmallConfig(), &w);
  // A verbs connector and a listener that answers like no verbs listener.
  {
    ForeignListener foreign;
    Result<std::unique_ptr<PendingConnection>> pending = t->Connect(0, foreign.handle);
    REQUIRE(pending.ok());
    (void)(*pending)->Poll();  // the request goes out
    const int peer = ::accept(foreign.fd, nullptr, nullptr);
    REQUIRE(peer >= 0);
    const uint8_t hello[kHelloBytes] = {'L', 'K', 'S', 'H'};  // what a sockets listener never sends, but not verbs
    REQUIRE(::send(peer, hello, sizeof hello, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof hello));
    Result<std::unique_ptr<SendConnection>> r = std::unique_ptr<SendConnection>();
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (r.ok() && !*r && Clock::now() < deadline) r = (*pending)->Poll();
    ::close(peer);
    REQUIRE(!r.ok());
    CHECK(r.error().message.find("does not speak the verbs QP exchange") != std::string::npos);
    CHECK(r.error().message.find("LOCKSTEP_NCCL_TRANSPORT") != std::string::npos);
  }
  // A listener that closes without answering (a sockets listener drops a stranger's hello).
  {
    ForeignListener foreign;
    Result<std::unique_ptr<PendingConnection>> pending = t->Connect(0, foreign.handle);
    REQUIRE(pending.ok());
    ::close(::accept(foreign.fd, nullptr, nullptr));
    Result<std::unique_ptr<SendConnection>> r = std::unique_ptr<SendConnection>();
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (r.ok() && !*r && Clock::now() < deadline) r = (*pending)->Poll();
    REQUIRE(!r.ok());
    CHECK(r.error().message.find("before answering (a sockets-transport listener?") != std::string::npos);
  }
  // A verbs listener and a connector that sends a sockets hello: a warning, no connection, the listener carries on.
  {
    uint8_t handle[kHandleBytes] = {};
    Result<std::unique_ptr<Listener>> l = t->Listen(0, handle);
    REQUIRE(l.ok());
    Result<ListenHandle> h = DecodeHandle(handle);
    REQUIRE(h.ok());
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr, h->rails[0].ipv4.data(), 4);
    a.sin_port = htons(h->rails[0].port);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    const auto hello = EncodeHello(Hello{.listen_token = h->token, .conn_id = 1, .stream = 0, .nstreams = 1});
    REQUIRE(::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size()));
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (w.Count("not a verbs QP exchange") == 0 && Clock::now() < deadline) {
      Result<std::unique_ptr<RecvConnection>> r = (*l)->Accept();
      REQUIRE(r.ok());
      REQUIRE(!*r);
    }
    ::close(fd);
    CHECK(w.Count("a peer's QP exchange failed: not a verbs QP exchange (a sockets-transport connector?") == 1);
    // A verbs connector still gets through.
    Result<std::unique_ptr<PendingConnection>> pending = t->Connect(0, handle);
    REQUIRE(pending.ok());
    std::unique_ptr<SendConnection> s;
    std::unique_ptr<RecvConnection> r;
    while ((!s || !r) && Clock::now() < deadline) {
      if (!s) s = std::move(*(*pending)->Poll());
      if (!r) r = std::move(*(*l)->Accept());
    }
    CHECK(s);
    CHECK(r);
  }
}

}  // namespace
}  // namespace lockstep::nccl
