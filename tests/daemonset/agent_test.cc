// The agent as BuildAgent() wires it, on fakes and a FakeClock: two agents
// with clock sync and two-rail fabric failover, their two loops (the
// prober, carrying the clock-sync sends, and the main loop, closing the
// windows) turned by a discrete-event driver at the times they ask to wake.
// What the one-loop design promises: pairs go out when due, a slow solve
// does not delay a probe, a rotated key reaches both codecs, and a stop
// leaves working routes for the next start to adopt.
#include <catch2/catch.hpp>

#include <net/if.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../support/fake_clock.h"
#include "../support/fake_fabric_socket.h"
#include "../support/fake_gpu_source.h"
#include "../support/fake_kube_api.h"
#include "../support/fake_route_actuator.h"
#include "fake_network.h"
#include "lockstep/agent/app/agent.h"
#include "lockstep/agent/kube/fabric_health_reporter.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/agent/net/system_node_clock.h"
#include "lockstep/agent/net/udp_fabric_socket.h"
#include "lockstep/agent/net/udp_timestamped_transport.h"
#include "sim_node_clock.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

const uint32_t kHostA = *ParseIpv4("10.0.200.1");
const uint32_t kHostB = *ParseIpv4("10.0.200.2");
constexpr Nanos kInterval = 20ms;  // probe.intervalMs (the default)

ProbeKey Key(char fill) { return *ProbeKey::FromBytes(std::string(32, fill)); }

// The key source: the test sets `next`; the next check rotates to it.
class FakeKeySource final : public ProbeKeySource {
 public:
  explicit FakeKeySource(ProbeKey key) : key_(std::move(key)) {}
  const ProbeKey& key() const override { return key_; }
  Result<bool> Reload(PacketCodec& codec) override {
    ++checks;
    if (!next) return false;
    key_ = std::move(*next);
    next.reset();
    codec.Rotate(key_);
    return true;
  }
  std::optional<ProbeKey> next;
  int checks = 0;

 private:
  ProbeKey key_;
};

// The clock-sync transport, recording when each pair left.
class RecordingTransport final : public ProbeTransport {
 public:
  RecordingTransport(std::unique_ptr<ProbeTransport> inner, const Clock& clock)
      : inner_(std::move(inner)), clock_(clock) {}
  Endpoint local() const override { return inner_->local(); }
  Result<uint32_t> Send(const Endpoint& to, std::span<const uint8_t> bytes) override { return inner_->Send(to, bytes); }
  Result<std::array<uint32_t, 2>> SendPair(const Endpoint& to, std::span<const uint8_t> a, std::span<const uint8_t> b,
                                            Nanos spacing) override {
    pairs.push_back(clock_.Monotonic());
    return inner_->SendPair(to, a, b, spacing);
  }
  Status Poll(Nanos max_wait, TransportEvents& out) override { return inner_->Poll(max_wait, out); }
  std::vector<MonoTime> pairs;

 private:
  std::unique_ptr<ProbeTransport> inner_;
  const Clock& clock_;
};

// The fabric socket, recording how long the prober asked to sleep (its
// next wake-up) and counting probes sent.
class RecordingSocket final : public FabricSocket {
 public:
  RecordingSocket(FakeFabricNetwork& net, uint32_t host) : inner_(net, host) {}
  Status SendVia(std::span<const uint8_t> bytes, uint32_t dest, int port, int ifindex, uint32_t source) override {
    ++sent;
    return inner_.SendVia(bytes, dest, port, ifindex, source);
  }
  Status Poll(Nanos max_wait, std::vector<FabricDatagram>& out) override {
    last_wait = max_wait;
    longest_wait = std::max(longest_wait, max_wait);
    return inner_.Poll(max_wait, out);
  }
  int port() const override { return inner_.port(); }
  Nanos last_wait{0}, longest_wait{0};
  uint64_t sent = 0;

 private:
  FakeFabricSocket inner_;
};

// The routes outlive an agent (a restart finds them): each agent gets a
// forwarder to the node's FakeRouteActuator.
class ForwardingActuator final : public RouteActuator {
 public:
  explicit ForwardingActuator(FakeRouteActuator& to) : to_(to) {}
  Status Install(const OwnedRoute& r) override { return to_.Install(r); }
  Status Replace(const OwnedRoute& r) override { return to_.Replace(r); }
  Status Delete(const Ipv4Prefix& d) override { return to_.Delete(d); }
  Result<std::vector<OwnedRoute>> List() override { return to_.List(); }
  Result<std::vector<InterfaceState>> Interfaces() override { return to_.Interfaces(); }
  Result<int> ReleaseUnresolvedNeighbours(const std::string& i) override { return to_.ReleaseUnresolvedNeighbours(i); }

 private:
  FakeRouteActuator& to_;
};

// A NodeClock that, while closed, holds any thread but the one that made it
// inside NowNs(): the main loop's window solve reads the node clock under
// the model's lock, so closing the gate makes that solve as slow as the test
// wants while the test's thread turns the prober.
class SolveGate final : public NodeClock {
 public:
  explicit SolveGate(const NodeClock& base) : base_(base), owner_(std::this_thread::get_id()) {}
  int64_t NowNs() const override {
    if (std::this_thread::get_id() != owner_) {
      std::unique_lock lock(mu_);
      if (closed_) {
        held_ = true;
        cv_.notify_all();
        cv_.wait(lock, [this] { return !closed_; });
      }
    }
    return base_.NowNs();
  }
  int64_t FromKernelRealtime(int64_t ns) const override { return base_.FromKernelRealtime(ns); }
  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      closed_ = false;
    }
    cv_.notify_all();
  }
  // Whether a thread is held (waits for one, in real time: it is another thread).
  bool Holding() const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [this] { return held_; });
  }

 private:
  const NodeClock& base_;
  const std::thread::id owner_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool closed_ = false;       // GUARDED_BY(mu_)
  mutable bool held_ = false;  // GUARDED_BY(mu_)
};

AgentConfig ConfigFor(const std::string& self, const std::string& peer, const std::string& peer_address,
                      const std::string& peer_host) {
  AgentConfig c;
  c.node_name = self;
  c.probe.port = 7311;
  c.fabric.rails = {"rail0", "rail1"};
  c.fabric.port = 7312;
  // Every path every 14 ms (tiering off): these tests count the prober's
  // sends and pace clock-sync pairs on them; tiering has its own tests
  // (probe_tiers_test.cc, fabric_service_test.cc).
  c.probe.idle_path_interval_ms = 0;
  c.peers = {{.name = peer, .address = peer_address, .port = 7311, .host_address = peer_host}};
  return c;
}

std::vector<RailInfo> Rails() {
  return {{"rail0", 1, 0, {*ParseIpv4("10.0.100.1"), "rail0", true}},
          {"rail1", 2, 0, {*ParseIpv4("10.0.100.2"), "rail1", true}}};
}

// The value of a metric line `name{labels} value` (0 when absent).
double Metric(const metrics::Registry& registry, const std::string& series) {
  const std::string text = registry.Render();
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + series.size() + 2));
}

struct Node {
  Node(const std::string& name, const std::string& peer, Endpoint self_ep, const std::string& peer_address,
       uint32_t host, const std::string& peer_host, FakeClock& clock, test::FakeNetwork& net,
       FakeFabricNetwork& fabric_net)
      : name(name), host(host), clock(clock), fabric_net(fabric_net), node_clock(clock), gate(node_clock),
        transport(net.Attach(self_ep, gate), clock), keys(Key('k')),
        config(ConfigFor(name, peer, peer_address, peer_host)) {
    routes.AddInterface("rail0", true);
    routes.AddInterface("rail1", true);
    Build();
  }
  // A fresh agent on the same routes, transport and keys (a restart).
  void Build() {
    agent.reset();
    registry = std::make_unique<metrics::Registry>();
    auto s = std::make_unique<RecordingSocket>(fabric_net, host);
    socket = s.get();
    AgentSettings settings{.config = config, .seed = NodeIdFromName(name)};
    AgentAdapters adapters{.transport = &transport, .node_clock = &gate, .keys = &keys};
    adapters.fabric_socket = std::move(s);
    adapters.route_actuator = std::make_unique<ForwardingActuator>(routes);
    adapters.rails = Rails();
    adapters.host_address = host;
    auto built = BuildAgent(std::move(settings), std::move(adapters), clock, *registry);
    REQUIRE(built.ok());
    agent = std::move(*built);
    REQUIRE(agent->Start(Agent::Drive::kManual).ok());
    prober_due = main_due = clock.Monotonic();
  }
  // Fabric paths (over both rails) that are usable, as last published.
  int UsablePaths() const {
    int n = 0;
    for (const auto& r : agent->fabric()->service().Health().rails) n += r.usable;
    return n;
  }

  std::string name;
  uint32_t host;
  FakeClock& clock;
  FakeFabricNetwork& fabric_net;
  test::SimNodeClock node_clock;
  SolveGate gate;
  RecordingTransport transport;
  FakeKeySource keys;
  AgentConfig config;
  FakeRouteActuator routes;
  std::unique_ptr<metrics::Registry> registry;
  RecordingSocket* socket = nullptr;  // owned by the agent
  std::unique_ptr<Agent> agent;
  MonoTime prober_due{}, main_due{};
  bool main_held = false;  // the main loop is busy elsewhere (a slow solve): not turned
  std::vector<Nanos> main_sleeps;  // what each main-loop turn asked for
};

struct World {
  World()
      : net(clock, 11),
        fabric_net(clock),
        a("a", "b", {*ParseIpv4("10.0.0.1"), 7311}, "10.0.0.2", kHostA, "10.0.200.2", clock, net, fabric_net),
        b("b", "a", {*ParseIpv4("10.0.0.2"), 7311}, "10.0.0.1", kHostB, "10.0.200.1", clock, net, fabric_net) {}

  // Runs both agents for `d`: each loop turns when it asked to (the prober
  // at the end of the socket wait it asked for, the main loop when Turn()
  // said), in time order.
  void RunFor(Nanos d) {
    const MonoTime end = clock.Monotonic() + d;
    for (;;) {
      MonoTime next = end;
      for (Node* n : {&a, &b}) {
        next = std::min(next, n->prober_due);
        if (!n->main_held) next = std::min(next, n->main_due);
      }
      if (next > clock.Monotonic()) clock.Advance(next - clock.Monotonic());
      const MonoTime now = clock.Monotonic();
      if (now >= end) return;
      for (Node* n : {&a, &b}) {
        if (n->prober_due > now) continue;
        n->agent->ProberTurn();
        // A turn takes some time on a real core: never twice at one instant.
        n->prober_due = now + std::max<Nanos>(n->socket->last_wait, 10us);
      }
      for (Node* n : {&a, &b}) {
        if (n->main_held || n->main_due > now) continue;
        n->main_due = n->agent->Turn();
        n->main_sleeps.push_back(n->main_due - now);
      }
    }
  }

  FakeClock clock;
  test::FakeNetwork net;
  FakeFabricNetwork fabric_net;
  Node a, b;
};

// How late each pair left against its schedule (the interval grid through
// the earliest of them): every pair is due one interval after the previous.
Nanos LatestPair(const std::vector<MonoTime>& pairs) {
  Nanos origin = Nanos::max(), latest{0};
  for (size_t k = 0; k < pairs.size(); ++k) {
    origin = std::min(origin, pairs[k].time_since_epoch() - static_cast<int64_t>(k) * kInterval);
  }
  for (size_t k = 0; k < pairs.size(); ++k) {
    latest = std::max(latest, pairs[k].time_since_epoch() - static_cast<int64_t>(k) * kInterval - origin);
  }
  return latest;
}

TEST_CASE("the prober carries the clock-sync pairs, each sent when due, and the main loop wakes for windows and keys",
          "[daemonset][agent]") {
  World w;
  w.RunFor(10500ms);
  for (Node* n : {&w.a, &w.b}) {
    INFO(n->name);
    // 10.5 s at one pair per 20 ms, none skipped, none doubled.
    REQUIRE(n->transport.pairs.size() >= 524);
    REQUIRE(n->transport.pairs.size() <= 526);
    // Each leaves at the prober's first wake-up after its due time, so no
    // later than its longest sleep, which is at most one clock-sync interval
    // (~15 ms here: the fabric ticks every 14 ms, jittered).
    REQUIRE(LatestPair(n->transport.pairs) <= n->socket->longest_wait);
    REQUIRE(n->socket->longest_wait <= kInterval);
    REQUIRE(n->socket->sent > 1000);  // fabric probes every 14 ms on the pinned path
    REQUIRE(n->UsablePaths() == 2 * api::kFabricPathsPerRail);  // 2 rails x fabric.pathsPerRail
    // The main loop: a window every 2 s, each closed at its time (the turn
    // is due then); keys checked once a second; never asleep longer than
    // 200 ms.
    REQUIRE(n->agent->clock_sync()->Status().windows == 5);
    REQUIRE(n->agent->clock_sync()->NextWindow() > w.clock.Monotonic());
    REQUIRE(n->keys.checks == 11);
    REQUIRE(*std::max_element(n->main_sleeps.begin(), n->main_sleeps.end()) <= Agent::kMaxTurn);
  }
}

TEST_CASE("a slow window solve on the main loop delays no probe", "[daemonset][agent]") {
  World w;
  w.RunFor(3s);
  Node& a = w.a;
  REQUIRE(a.UsablePaths() == 2 * api::kFabricPathsPerRail);
  // Up to the next window without turning a's main loop, then solve it on
  // another thread that the gate holds inside the solve.
  a.main_held = true;
  w.RunFor(a.agent->clock_sync()->NextWindow() - w.clock.Monotonic());
  const uint64_t windows = a.agent->clock_sync()->Status().windows;
  a.gate.Close();
  std::thread main_loop([&] { a.agent->Turn(); });
  REQUIRE(a.gate.Holding());
  const size_t pairs = a.transport.pairs.size();
  const uint64_t probes = a.socket->sent;
  const double stalls = Metric(*a.registry, "lockstep_fabric_prober_stalls_total");
  w.RunFor(1s);  // the solve takes a second
  // The prober went on as if nothing happened: pairs on time, probes at
  // their rate, the paths up, no stall.
  REQUIRE(a.transport.pairs.size() - pairs >= 49);
  REQUIRE(LatestPair({a.transport.pairs.begin() + static_cast<ptrdiff_t>(pairs), a.transport.pairs.end()}) <
          kInterval);
  REQUIRE(a.socket->sent - probes >= 2 * 1000 / 15);
  REQUIRE(a.UsablePaths() == 2 * api::kFabricPathsPerRail);
  REQUIRE(w.b.UsablePaths() == 2 * api::kFabricPathsPerRail);
  REQUIRE(Metric(*a.registry, "lockstep_fabric_prober_stalls_total") == stalls);
  a.gate.Open();
  main_loop.join();
  REQUIRE(a.agent->clock_sync()->Status().windows == windows + 1);
}

TEST_CASE("a rotated key reaches both codecs, and the previous key is still accepted", "[daemonset][agent]") {
  World w;
  w.RunFor(2s);
  auto drops = [](Node& n) {
    return Metric(*n.registry, "lockstep_probe_dropped_total{reason=\"unauthenticated\"}") +
           Metric(*n.registry, "lockstep_fabric_probe_dropped_total{reason=\"unauthenticated\"}");
  };
  REQUIRE(drops(w.a) == 0);
  REQUIRE(drops(w.b) == 0);
  // a's Secret changes first: within a second a signs with the new key.
  w.a.keys.next = Key('n');
  w.RunFor(1500ms);
  REQUIRE(w.a.agent->codec().accepted_keys() == 2);
  const double b_clock_sync = Metric(*w.b.registry, "lockstep_probe_dropped_total{reason=\"unauthenticated\"}");
  const double b_fabric = Metric(*w.b.registry, "lockstep_fabric_probe_dropped_total{reason=\"unauthenticated\"}");
  REQUIRE(b_clock_sync > 0);  // b (old key only) drops a's clock-sync packets...
  REQUIRE(b_fabric > 0);      // ...and a's fabric probes: both of a's codecs rotated
  REQUIRE(drops(w.a) == 0);   // a still accepts b's, under the previous key
  // b's Secret follows: nothing is dropped any more.
  w.b.keys.next = Key('n');
  w.RunFor(1500ms);
  const double settled = drops(w.b);
  w.RunFor(2s);
  REQUIRE(drops(w.b) == settled);
  REQUIRE(drops(w.a) == 0);
}

TEST_CASE("a stopped agent leaves its working pins and the next start adopts them", "[daemonset][agent]") {
  World w;
  w.RunFor(2s);
  // Rail 0 of host a fails: each side pins the other to rail 1.
  w.fabric_net.Cut(kHostA, 0);
  w.RunFor(2s);
  const Ipv4Prefix to_b{.address = kHostB, .length = 32};
  REQUIRE(w.a.routes.routes.contains(to_b));
  REQUIRE(w.a.routes.routes.at(to_b).nexthop.interface == "rail1");
  const auto pinned = w.a.routes.routes;
  const size_t changes = w.a.routes.log.size();

  w.a.agent->Stop();
  REQUIRE(w.a.routes.routes == pinned);  // nothing removed on the way out
  REQUIRE(w.a.routes.log.size() == changes);
  REQUIRE_FALSE(w.a.agent->ready());

  w.a.Build();  // a restart: the pin is adopted, not deleted and re-made
  REQUIRE(w.a.routes.routes == pinned);
  w.RunFor(2s);
  REQUIRE(w.a.routes.routes == pinned);
  for (size_t i = changes; i < w.a.routes.log.size(); ++i) {
    INFO(w.a.routes.log[i]);
    REQUIRE(w.a.routes.log[i].rfind("delete", 0) != 0);
  }
}

// Real threads need sockets that block: loopback ones (a fake's Poll returns
// at once, and the prober, real-time when the test runs as root, would spin).
TEST_CASE("the agent's own threads run on loopback sockets and stop", "[daemonset][agent]") {
  SystemNodeClock node_clock;
  auto transport = UdpTimestampedTransport::Open("127.0.0.1", 0, node_clock);
  REQUIRE(transport.ok());
  auto socket = UdpFabricSocket::Open("127.0.0.1", 0, SystemClock::Instance());
  REQUIRE(socket.ok());
  FakeKeySource keys(Key('k'));
  FakeRouteActuator routes;
  routes.AddInterface("lo", true);
  const uint32_t loopback = *ParseIpv4("127.0.0.1");
  // One peer, on loopback too (nothing answers there): nothing leaves the host.
  AgentConfig config = ConfigFor("a", "b", "127.0.0.2", "127.0.0.2");
  config.fabric.rails = {"lo"};
  config.fabric.port = (*socket)->port();
  AgentAdapters adapters{.transport = transport->get(), .node_clock = &node_clock, .keys = &keys};
  adapters.fabric_socket = std::move(*socket);
  adapters.route_actuator = std::make_unique<ForwardingActuator>(routes);
  adapters.rails = {{"lo", static_cast<int>(::if_nametoindex("lo")), loopback, {loopback, "lo", true}}};
  adapters.host_address = loopback;
  auto gpu_source = std::make_unique<testing::FakeGpuSource>();
  testing::FakeGpuSource& gpus = *gpu_source;
  gpus.SetGpus(1);
  adapters.gpu_source = std::move(gpu_source);
  metrics::Registry registry;
  auto built = BuildAgent({.config = config}, std::move(adapters), SystemClock::Instance(), registry);
  REQUIRE(built.ok());
  Agent& agent = **built;
  bool announced = false;
  REQUIRE(agent.Start(Agent::Drive::kThreads, [&] { announced = agent.ready(); }).ok());
  REQUIRE(announced);  // ready before the announcement
  agent.Stop();  // the main loop's and the GPU loop's waits end on the stop; the prober's within a probe interval
  REQUIRE_FALSE(agent.ready());
  REQUIRE(gpus.reads >= 1);  // the GPU loop ran (its first read is in Start) and was joined
}

TEST_CASE("BuildAgent: a fabric section without a peer host address is a configuration error", "[daemonset][agent]") {
  FakeClock clock;
  test::FakeNetwork net(clock, 1);
  test::SimNodeClock node_clock(clock);
  auto transport = net.Attach({*ParseIpv4("10.0.0.1"), 7311}, node_clock);
  FakeKeySource keys(Key('k'));
  FakeFabricNetwork fabric_net(clock);
  metrics::Registry registry;
  AgentConfig config = ConfigFor("a", "b", "10.0.0.2", "");
  AgentAdapters adapters{.transport = transport.get(), .node_clock = &node_clock, .keys = &keys};
  adapters.fabric_socket = std::make_unique<FakeFabricSocket>(fabric_net, kHostA);
  adapters.route_actuator = std::make_unique<FakeRouteActuator>();
  adapters.rails = Rails();
  adapters.host_address = kHostA;
  auto built = BuildAgent({.config = config}, std::move(adapters), clock, registry);
  REQUIRE_FALSE(built.ok());
  REQUIRE(built.error().message.find("hostAddress") != std::string::npos);

  // Without fabric.rails: clock sync alone, its loop on the main thread.
  config.fabric.rails.clear();
  auto alone = BuildAgent({.config = config}, {.transport = transport.get(), .node_clock = &node_clock, .keys = &keys},
                          clock, registry);
  REQUIRE(alone.ok());
  REQUIRE((*alone)->fabric() == nullptr);
  REQUIRE((*alone)->clock_sync() != nullptr);
}

TEST_CASE("Kubernetes mode: fabric failover waits for discovered peers", "[daemonset][agent][kube]") {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  test::FakeNetwork net(clock, 1);
  test::SimNodeClock node_clock(clock);
  auto transport = net.Attach({*ParseIpv4("10.0.0.1"), 7311}, node_clock);
  FakeKeySource keys(Key('k'));
  FakeFabricNetwork fabric_net(clock);
  FakeRouteActuator routes;
  routes.AddInterface("rail0", true);
  routes.AddInterface("rail1", true);
  metrics::Registry registry;
  AgentConfig config = ConfigFor("a", "b", "10.0.0.2", "");
  config.peers.clear();  // no static peers: they come from FabricHealth discovery
  AgentAdapters adapters{.transport = transport.get(), .node_clock = &node_clock, .keys = &keys};
  adapters.fabric_socket = std::make_unique<FakeFabricSocket>(fabric_net, kHostA);
  adapters.route_actuator = std::make_unique<ForwardingActuator>(routes);
  adapters.rails = Rails();
  adapters.host_address = kHostA;
  adapters.kube_api = &api;
  auto built = BuildAgent({.config = config}, std::move(adapters), clock, registry);
  REQUIRE(built.ok());
  Agent& agent = **built;
  REQUIRE(agent.kube() != nullptr);
  REQUIRE(agent.fabric()->options().await_peers);
  REQUIRE(agent.Start(Agent::Drive::kManual).ok());
  for (int i = 0; i < 100; ++i) {
    clock.Advance(1ms);
    agent.ProberTurn();
    agent.Turn();
  }
  REQUIRE(agent.fabric()->service().Health().peers == 0);
  REQUIRE(routes.log.empty());
  agent.Stop();
}

TEST_CASE("the Kubernetes side's options and the host-clock decision come from the settings", "[daemonset][agent]") {
  AgentSettings s{.config = ConfigFor("a", "b", "10.0.0.2", ""), .seed = 9};
  s.config.policy = "gold";
  s.config.probe.peers_per_node = 4;
  s.config.bind_address = "10.0.0.1";
  s.node_address_fallback = false;
  s.advertise_address = "192.0.2.1";
  s.report_interval = 3s;
  KubeAgentOptions o = MakeKubeAgentOptions(s, 40123, "cHVibGlj", "10.0.200.1");
  REQUIRE(o.node_name == "a");
  REQUIRE(o.policy == "gold");
  REQUIRE(o.policy_probe_port == 7311);
  REQUIRE(o.peers_per_node == 4);
  REQUIRE(o.seed == 9);
  REQUIRE_FALSE(o.node_address_fallback);
  REQUIRE(o.advertise_address == "192.0.2.1");
  REQUIRE(o.bind_address == "10.0.0.1");
  REQUIRE(o.bound_port == 40123);
  REQUIRE(o.node_public_key == "cHVibGlj");
  REQUIRE(o.report_interval == 3s);
  REQUIRE(o.fabric_host_address == "10.0.200.1");

  REQUIRE_FALSE(DisciplinesHostClock(s));  // not asked for
  s.config.clock_sync.discipline_host_clock = true;
  REQUIRE(DisciplinesHostClock(s));
  s.simulated_clock = true;  // --virtual-clock: the host clock is left alone
  REQUIRE_FALSE(DisciplinesHostClock(s));
  s.simulated_clock = false;
  s.config.clock_sync.enabled = false;  // nothing to steer it by
  REQUIRE_FALSE(DisciplinesHostClock(s));
}

std::string Text(const kube::Condition& c) { return c.type + " " + c.status + " " + c.reason + ": " + c.message; }

// An agent in Kubernetes mode without fabric rails, its GPUs from a FakeGpuSource.
struct GpuNode {
  explicit GpuNode(AgentConfig c = {}, bool with_source = true)
      : net(clock, 1), node_clock(clock), transport(net.Attach({*ParseIpv4("10.0.0.1"), 7311}, node_clock)),
        keys(Key('k')), config(std::move(c)) {
    config.node_name = "a";
    auto source = std::make_unique<testing::FakeGpuSource>();
    gpus = source.get();
    gpus->SetGpus(2);
    AgentAdapters adapters{.transport = transport.get(), .node_clock = &node_clock, .keys = &keys};
    adapters.kube_api = &api;
    if (with_source) adapters.gpu_source = std::move(source);
    else owned = std::move(source);
    built = BuildAgent({.config = config}, std::move(adapters), clock, registry);
  }
  std::optional<GpuReport> Report() { return (*built)->kube()->Snapshot().gpu; }

  FakeClock clock;
  kube::FakeKubeApi api{clock};
  test::FakeNetwork net;
  test::SimNodeClock node_clock;
  std::unique_ptr<ProbeTransport> transport;
  FakeKeySource keys;
  AgentConfig config;
  metrics::Registry registry;
  testing::FakeGpuSource* gpus = nullptr;  // owned by the agent (or `owned`)
  std::unique_ptr<testing::FakeGpuSource> owned;
  Result<std::unique_ptr<Agent>> built = InvalidArgument("not built");
};

TEST_CASE("GPU health: the agent reads its GPUs on the interval and its FabricHealth carries GPUHealthy",
          "[daemonset][agent][gpu]") {
  AgentConfig config;
  config.gpu.poll_interval_seconds = 5;
  GpuNode n(config);
  REQUIRE(n.built.ok());
  Agent& agent = **n.built;
  REQUIRE(agent.gpu_monitor() != nullptr);
  REQUIRE(agent.Start(Agent::Drive::kManual).ok());
  REQUIRE(n.gpus->reads == 1);  // the first read comes before the first report
  REQUIRE(Text(n.Report()->condition) == "GPUHealthy True Healthy: 2 GPUs within the early-warning thresholds");
  REQUIRE(Metric(n.registry, "lockstep_gpu_temperature_celsius{gpu=\"1\",uuid=\"GPU-1\"}") == 45);

  // GPU 1 heats up: seen at the next poll, not before.
  n.gpus->snapshot.gpus[1].temperature_c = 93;
  n.clock.Advance(4s);
  REQUIRE(agent.GpuTurn() == n.clock.Monotonic() + 1s);
  REQUIRE(n.gpus->reads == 1);
  REQUIRE(n.Report()->condition.status == "True");
  n.clock.Advance(1s);
  REQUIRE(agent.GpuTurn() == n.clock.Monotonic() + 5s);
  REQUIRE(n.gpus->reads == 2);
  std::optional<GpuReport> r = n.Report();
  REQUIRE(Text(r->condition) == "GPUHealthy False EarlyWarning: GPU 1 (GPU-1) temperature 93 C >= 90 C");
  REQUIRE(r->status.devices.at(1).temperature_celsius == 93);
  REQUIRE(Metric(n.registry, "lockstep_gpu_warning{gpu=\"1\",uuid=\"GPU-1\"}") == 1);

  // It cools down and GPU 0 reports Xid 79: the warning moves to GPU 0 and stays for the hold.
  n.gpus->snapshot.gpus[1].temperature_c = 50;
  n.gpus->xids.push_back({0, "GPU-0", 79});
  n.clock.Advance(5s);
  agent.GpuTurn();
  r = n.Report();
  REQUIRE(r->condition.message == "GPU 0 (GPU-0) Xid 79");
  REQUIRE(r->status.devices.at(0).xids == std::vector<int>{79});
  REQUIRE(r->status.devices.at(1).state == "Healthy");

  // The reporter writes it on the node's FabricHealth (as the agent's kube thread does).
  kube::Json health = {{"apiVersion", "lockstep.dev/v1alpha1"}, {"kind", "FabricHealth"},
                       {"metadata", {{"name", "a"}, {"labels", {{"lockstep.dev/policy", "default"}}}}}};
  REQUIRE(n.api.Create(kube::gvr::kFabricHealths, "", health).ok());
  metrics::Registry reporter_metrics;
  FabricHealthReporter reporter(n.api, n.clock, [&] { return agent.kube()->Snapshot(); },
                                ReporterOptions{.node_name = "a"}, reporter_metrics);
  REQUIRE(reporter.Tick() == FabricHealthReporter::Outcome::kWritten);
  const kube::Json status = (*n.api.Peek(kube::gvr::kFabricHealths, "", "a"))["status"];
  REQUIRE(status["gpu"]["state"] == "Warning");
  REQUIRE(status["gpu"]["warnings"] == 1);
  const kube::Json* cond = kube::FindCondition(status, "GPUHealthy");
  REQUIRE(cond);
  REQUIRE((*cond)["status"] == "False");
  REQUIRE((*cond)["reason"] == "EarlyWarning");
  REQUIRE((*cond)["message"] == "GPU 0 (GPU-0) Xid 79");
  agent.Stop();
}

TEST_CASE("GPU health: no NVIDIA driver is Unknown and the agent carries on, Required makes it False",
          "[daemonset][agent][gpu]") {
  GpuNode n;
  n.gpus->unavailable = "no NVIDIA driver (libnvidia-ml.so.1: cannot open shared object file)";
  Agent& agent = **n.built;
  REQUIRE(agent.Start(Agent::Drive::kManual).ok());
  REQUIRE(Text(n.Report()->condition) ==
          "GPUHealthy Unknown NvmlUnavailable: no NVIDIA driver (libnvidia-ml.so.1: cannot open shared object file)");
  REQUIRE(n.Report()->status.state == "Unavailable");
  REQUIRE(n.registry.Render().find("\nlockstep_gpu_nvml_available 0\n") != std::string::npos);
  n.clock.Advance(10s);
  agent.GpuTurn();  // read again (a driver may come), nothing else happens
  REQUIRE(n.gpus->reads == 2);
  agent.Turn();  // clock sync goes on
  REQUIRE(agent.ready());
  agent.Stop();

  AgentConfig required;
  required.gpu.mode = api::kGpuModeRequired;
  GpuNode r(required);
  r.gpus->unavailable = "no NVIDIA driver (libnvidia-ml.so.1: cannot open shared object file)";
  REQUIRE((*r.built)->Start(Agent::Drive::kManual).ok());
  REQUIRE(r.Report()->condition.status == "False");
  REQUIRE(r.Report()->condition.reason == "NvmlUnavailable");
  (*r.built)->Stop();
}

TEST_CASE("GPU health: Required needs a GPU source, Disabled reads nothing and reports no GPU",
          "[daemonset][agent][gpu]") {
  AgentConfig required;
  required.gpu.mode = api::kGpuModeRequired;
  GpuNode missing(required, /*with_source=*/false);
  REQUIRE_FALSE(missing.built.ok());
  REQUIRE(missing.built.error().message.find("gpu.mode is Required") != std::string::npos);

  GpuNode quiet(AgentConfig{}, /*with_source=*/false);  // Auto without a source: no monitor (tests)
  REQUIRE(quiet.built.ok());
  REQUIRE((*quiet.built)->gpu_monitor() == nullptr);
  REQUIRE_FALSE(quiet.Report().has_value());

  AgentConfig disabled;
  disabled.gpu.mode = api::kGpuModeDisabled;
  GpuNode off(disabled);
  REQUIRE(off.built.ok());
  Agent& agent = **off.built;
  REQUIRE(agent.gpu_monitor() == nullptr);
  REQUIRE(agent.Start(Agent::Drive::kManual).ok());
  REQUIRE(off.gpus->reads == 0);
  REQUIRE_FALSE(off.Report().has_value());
  REQUIRE(off.registry.Render().find("lockstep_gpu_") == std::string::npos);
  agent.Stop();
}

}  // namespace
}  // namespace lockstep::agent
