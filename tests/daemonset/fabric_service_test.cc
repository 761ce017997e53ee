// FabricService on simulated time over an in-memory two-rail fabric
// (tests/support/fake_fabric_socket.h) and fake route actuators: failover,
// re-admission, start-up adoption and what the prober drops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "../support/fake_clock.h"
#include "../support/fake_fabric_socket.h"
#include "../support/fake_route_actuator.h"
#include "lockstep/agent/runtime/fabric_service.h"
#include "lockstep/fabric/failover_choice.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

const uint32_t kHostA = *ParseIpv4("10.0.200.1");
const uint32_t kHostB = *ParseIpv4("10.0.200.2");
const uint32_t kHostC = *ParseIpv4("10.0.200.3");

ProbeKey Key(const std::string& k = "a-shared-probe-key-of-32-bytes!!") { return *ProbeKey::FromBytes(k); }

FabricSetup SetupFor(uint32_t self, const std::vector<FabricPeer>& peers) {
  FabricSetup s;
  s.host_address = self;
  s.rails = {{"rail0", 1, 0, {*ParseIpv4("10.0.100.1"), "rail0", true}},
             {"rail1", 2, 0, {*ParseIpv4("10.0.100.2"), "rail1", true}}};
  s.peers = peers;
  return s;
}

// Each test node's boot epoch (fabric_probe.h): fixed per name, as a
// restarted agent's wall clock would be later than its previous start.
uint64_t EpochOf(const std::string& name) { return name == "a" ? 1'000 : name == "b" ? 2'000 : 3'000; }

// Tiered probing's idle interval for the Nodes built while it is set.
// Tests of mechanics that assume every path is probed at every tick (acks
// riding on probes, SLA sample counts, the make-up of a captured stream)
// run untiered with an Untiered guard; the tiers have their own tests.
Nanos g_idle_interval = fabric::FabricOptions{}.idle_interval;
struct Untiered {
  Untiered() { g_idle_interval = Nanos(0); }
  ~Untiered() { g_idle_interval = fabric::FabricOptions{}.idle_interval; }
};
// Paths per (rail, peer) for the Nodes built while it is set.
int g_paths_per_rail = 1;
struct PathsPerRail {
  explicit PathsPerRail(int n) { g_paths_per_rail = n; }
  ~PathsPerRail() { g_paths_per_rail = 1; }
};

struct Node {
  Node(FakeFabricNetwork& net, FakeClock& clock, const std::string& name, uint32_t self, const FabricPeer& peer,
       FabricService::FabricNow fabric_now = {}, uint64_t epoch = 0, uint32_t renew_epoch_after = 0,
       uint64_t seed = 7)
      : socket(net, self), codec(Key()) {
    routes.AddInterface("rail0", true);
    routes.AddInterface("rail1", true);
    FabricServiceOptions o;
    o.self_name = name;
    o.setup = SetupFor(self, {peer});
    o.peer_port = 7312;
    o.seed = seed;
    o.publish_every = 100ms;  // the tests read the status soon after a change
    o.fabric.idle_interval = g_idle_interval;
    o.paths_per_rail = g_paths_per_rail;
    o.epoch = epoch != 0 ? epoch : EpochOf(name);
    if (renew_epoch_after != 0) o.renew_epoch_after = renew_epoch_after;
    options = o;
    service = std::make_unique<FabricService>(socket, routes, clock, codec, std::move(fabric_now), o, registry);
  }
  FakeFabricSocket socket;
  FakeRouteActuator routes;
  FabricProbeCodec codec;
  metrics::Registry registry;
  FabricServiceOptions options;
  std::unique_ptr<FabricService> service;
};

// Advances the clock 1 ms at a time for d, running both agents at each step.
void RunPair(FakeClock& clock, Node& a, Node& b, Nanos d) {
  for (Nanos t{0}; t < d; t += 1ms) {
    clock.Advance(1ms);
    a.service->RunOnce(0ns);
    b.service->RunOnce(0ns);
  }
}

struct World {
  // skewed: the two nodes' probe ticks jittered apart (seeds differ), as on a
  // real fabric; otherwise they tick in the same millisecond.
  explicit World(bool skewed = false)
      : b(net, clock, "b", kHostB, {"a", NodeIdFromName("a"), kHostA}, nullptr, 0, 0, skewed ? 8 : 7) {
    REQUIRE(a.service->Start().ok());
    REQUIRE(b.service->Start().ok());
  }
  void Run(Nanos d) { RunPair(clock, a, b, d); }
  FakeClock clock;
  FakeFabricNetwork net{clock};
  Node a{net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB}};
  Node b;
};

fabric::PathState StateOf(const Node& n, const std::string& peer, int rail) {
  return n.service->monitor().State({rail, peer, 0});
}

// The pair's home rail (both ends choose the same one) and the other rail.
int HomeRail() {
  std::vector<fabric::PathChoice> paths = {{{0, "b", 0}, fabric::PathState::kUp, {}},
                                           {{1, "b", 0}, fabric::PathState::kUp, {}}};
  return fabric::HomePath("a", "b", paths)->rail;
}

// A probe from `sender` to `dest` on (rail, index) with `seq`, nothing acked.
FabricProbe ProbeOf(const std::string& sender, const std::string& dest, int rail, int index, uint32_t seq) {
  FabricProbe p;
  p.rail = static_cast<uint8_t>(rail);
  p.path_index = static_cast<uint8_t>(index);
  p.sender = WireNodeId(NodeIdFromName(sender));
  p.dest = WireNodeId(NodeIdFromName(dest));
  p.epoch = EpochOf(sender);
  p.seq = seq;
  return p;
}

std::string RailRoute(uint32_t dest, int rail, uint32_t src) {
  return OwnedRoute{{dest, 32}, {*ParseIpv4(rail == 0 ? "10.0.100.1" : "10.0.100.2"), "rail" + std::to_string(rail), true},
                    src, kDefaultRtoMin}
      .ToString();
}

TEST_CASE("paths come up and both ends pin the pair to the same home rail", "[daemonset][fabric]") {
  World w;
  w.Run(300ms);
  for (int r : {0, 1}) {
    CHECK(StateOf(w.a, "b", r) == fabric::PathState::kUp);
    CHECK(StateOf(w.b, "a", r) == fabric::PathState::kUp);
  }
  const int home = HomeRail();
  REQUIRE(w.a.routes.routes.size() == 1);
  CHECK(w.a.routes.routes.begin()->second.ToString() == RailRoute(kHostB, home, kHostA));
  REQUIRE(w.b.routes.routes.size() == 1);
  CHECK(w.b.routes.routes.begin()->second.ToString() == RailRoute(kHostA, home, kHostB));
  // Probes leave by their rail's interface from the host address to the peer's.
  REQUIRE_FALSE(w.a.socket.sent.empty());
  for (const auto& s : w.a.socket.sent) {
    CHECK(s.dest == kHostB);
    CHECK(s.source == kHostA);
    CHECK((s.ifindex == 1 || s.ifindex == 2));
  }
  auto status = w.a.service->StatusJson();
  REQUIRE(status["paths"].size() == 2);
  CHECK(status["peers"][0]["via"] == "rail" + std::to_string(home));
}

TEST_CASE("without home pins, healthy peers are left to ECMP", "[daemonset][fabric]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB});
  FabricServiceOptions o = a.options;
  o.fabric.pin_home = false;
  FabricService service(a.socket, a.routes, clock, a.codec, {}, o, a.registry);
  Node b(net, clock, "b", kHostB, {"a", NodeIdFromName("a"), kHostA});
  REQUIRE(service.Start().ok());
  REQUIRE(b.service->Start().ok());
  for (int t = 0; t < 300; ++t) {
    clock.Advance(1ms);
    service.RunOnce(0ns);
    b.service->RunOnce(0ns);
  }
  CHECK(service.monitor().State({0, "b", 0}) == fabric::PathState::kUp);
  CHECK(a.routes.routes.empty());
  CHECK(service.StatusJson()["peers"][0]["via"] == "ecmp");
}

TEST_CASE("a dead home rail moves both directions to the other rail, re-admission brings them home",
          "[daemonset][fabric]") {
  World w;
  w.Run(300ms);
  const int home = HomeRail();
  const int other = 1 - home;
  CHECK(w.a.routes.released.empty());  // no traffic has left a rail yet
  w.net.Cut(kHostB, home);  // B's link on the home rail dies silently
  w.Run(200ms);
  // Traffic left the home rail: its unresolved neighbours (and the packets
  // queued on them) are released, never the other rail's.
  REQUIRE_FALSE(w.a.routes.released.empty());
  CHECK(w.a.routes.released.front() == "rail" + std::to_string(home));
  CHECK(std::count(w.a.routes.released.begin(), w.a.routes.released.end(), "rail" + std::to_string(other)) == 0);
  CHECK(StateOf(w.a, "b", home) == fabric::PathState::kDown);
  CHECK(StateOf(w.a, "b", other) == fabric::PathState::kUp);
  REQUIRE(w.a.routes.routes.size() == 1);
  CHECK(w.a.routes.routes.begin()->second.ToString() == RailRoute(kHostB, other, kHostA));
  REQUIRE(w.b.routes.routes.size() == 1);
  CHECK(w.b.routes.routes.begin()->second.ToString() == RailRoute(kHostA, other, kHostB));
  CHECK(w.a.service->StatusJson()["peers"][0]["via"] == "rail" + std::to_string(other));
  CHECK(w.a.registry.Gauge("lockstep_fabric_peer_rail", "", {"peer"}).Get({"b"}) == other);
  CHECK(w.a.registry.Counter("lockstep_fabric_flaps_total", "", {"rail"}).Get({"rail" + std::to_string(home)}) == 1);

  w.net.Cut(kHostB, home, false);
  w.Run(500ms);
  CHECK(StateOf(w.a, "b", home) == fabric::PathState::kRecovering);
  CHECK(w.a.routes.routes.begin()->second.ToString() == RailRoute(kHostB, other, kHostA));  // not yet re-admitted
  w.Run(3s);
  CHECK(StateOf(w.a, "b", home) == fabric::PathState::kUp);
  REQUIRE(w.a.routes.routes.size() == 1);
  CHECK(w.a.routes.routes.begin()->second.ToString() == RailRoute(kHostB, home, kHostA));  // the repaired rail is reused
  CHECK(w.b.routes.routes.begin()->second.ToString() == RailRoute(kHostA, home, kHostB));
  CHECK(w.a.service->StatusJson()["peers"][0]["via"] == "rail" + std::to_string(home));
}

TEST_CASE(
    "with several paths per rail, one path of the home rail dropping everything (a gray spine) moves the "
    "peer off the rail, and it comes home once the path is re-admitted",
    "[daemonset][fabric]") {
  PathsPerRail two(2);
  World w;
  w.Run(300ms);
  const int home = HomeRail();
  const int other = 1 - home;
  const fabric::PathKey gray{home, "b", 1};
  for (int rail = 0; rail < 2; ++rail) {
    for (int index = 0; index < 2; ++index) {
      CHECK(w.a.service->monitor().State({rail, "b", index}) == fabric::PathState::kUp);
    }
  }
  // Path 1's probes leave as path 1 (the socket sends them from its own source port).
  CHECK(std::any_of(w.a.socket.sent.begin(), w.a.socket.sent.end(), [](const auto& s) { return s.path == 1; }));
  REQUIRE(w.a.routes.routes.size() == 1);
  CHECK(w.a.routes.routes.begin()->second.ToString() == RailRoute(kHostB, home, kHostA));
  // What a sends on the home rail's path 1 is lost; path 0 (another spine) delivers.
  w.net.CutPath(kHostA, home, 1);
  Nanos moved{0};
  while (moved < 2s && w.a.routes.routes.begin()->second.ToString() != RailRoute(kHostB, other, kHostA)) {
    w.Run(1ms);
    moved += 1ms;
  }
  CHECK(w.a.service->monitor().State(gray) == fabric::PathState::kDown);
  CHECK(w.a.service->monitor().State({home, "b", 0}) == fabric::PathState::kUp);
  REQUIRE(w.a.routes.routes.begin()->second.ToString() == RailRoute(kHostB, other, kHostA));
  // Path 1 is an idle path (not the pin): detected by the rotation within WorstCaseDetectionIdle.
  CHECK(moved <= fabric::WorstCaseDetectionIdle(w.a.options.fabric) + 20ms);
  w.net.CutPath(kHostA, home, 1, false);
  w.Run(4s);
  CHECK(w.a.service->monitor().State(gray) == fabric::PathState::kUp);
  CHECK(w.a.routes.routes.begin()->second.ToString() == RailRoute(kHostB, home, kHostA));
}

TEST_CASE("a stalled node (both agents frozen 60 ms) counts the stall and no miss: its timeouts restart",
          "[daemonset][fabric]") {
  World w;
  w.Run(300ms);
  auto misses = [](Node& n) {
    auto& m = n.registry.Counter("lockstep_fabric_probe_misses_total", "", {"peer", "rail"});
    return m.Get({"b", "rail0"}) + m.Get({"b", "rail1"}) + m.Get({"a", "rail0"}) + m.Get({"a", "rail1"});
  };
  auto stalls = [](Node& n) { return n.registry.Counter("lockstep_fabric_prober_stalls_total", "").Get(); };
  const double misses_before = misses(w.a) + misses(w.b);
  REQUIRE(stalls(w.a) == 0);
  w.clock.Advance(60ms);  // nobody runs: every probe out times out in the stall
  w.Run(200ms);
  CHECK(stalls(w.a) == 1);
  CHECK(stalls(w.b) == 1);
  CHECK(misses(w.a) + misses(w.b) == misses_before);
  for (int rail : {0, 1}) {
    CHECK(StateOf(w.a, "b", rail) == fabric::PathState::kUp);
    CHECK(StateOf(w.b, "a", rail) == fabric::PathState::kUp);
  }
  // Running on time again: no more stalls.
  w.Run(1s);
  CHECK(stalls(w.a) == 1);
}

TEST_CASE("on a striped fabric (a's rail 0 meets b's rail 1) acks retrace their probes: one dead link fails "
          "only its own paths",
          "[daemonset][fabric]") {
  const Untiered untiered;  // asserts that every ack rides on a probe
  FakeClock clock;
  FakeFabricNetwork net(clock);
  net.Stripe(2);  // 10.0.200.1 and .2: a's rail r arrives on b's rail 1 - r and back
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB});
  Node b(net, clock, "b", kHostB, {"a", NodeIdFromName("a"), kHostA});
  REQUIRE(a.service->Start().ok());
  REQUIRE(b.service->Start().ok());
  auto run = [&](Nanos d) { RunPair(clock, a, b, d); };
  run(300ms);
  for (int r : {0, 1}) {
    CHECK(StateOf(a, "b", r) == fabric::PathState::kUp);
    CHECK(StateOf(b, "a", r) == fabric::PathState::kUp);
  }
  // a's rail 0 drops everything, both ways: it carries a's rail-0 paths and
  // b's rail-1 paths. An ack for a's rail-1 probes must not ride on b's
  // rail-1 probe (it would arrive on a's dead rail 0): it leaves b through
  // the interface a's rail-1 probes arrive on, b's rail 0.
  net.Cut(kHostA, 0);
  run(300ms);
  CHECK(StateOf(a, "b", 0) == fabric::PathState::kDown);
  CHECK(StateOf(a, "b", 1) == fabric::PathState::kUp);
  CHECK(StateOf(b, "a", 1) == fabric::PathState::kDown);
  CHECK(StateOf(b, "a", 0) == fabric::PathState::kUp);
  auto& answered = a.registry.Counter("lockstep_fabric_probes_answered_total", "", {"peer"});
  CHECK(answered.Get({"b"}) == 0);  // every ack rode on a probe
  net.Cut(kHostA, 0, false);
  run(3s);
  CHECK(StateOf(a, "b", 0) == fabric::PathState::kUp);
  CHECK(StateOf(b, "a", 1) == fabric::PathState::kUp);
}

TEST_CASE("a restarted agent adopts its pins and drops owned routes no peer explains", "[daemonset][fabric]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB});
  OwnedRoute kept{{kHostB, 32}, {*ParseIpv4("10.0.100.2"), "rail1", true}, kHostA, kDefaultRtoMin};
  OwnedRoute stale{{*ParseIpv4("10.0.200.9"), 32}, {*ParseIpv4("10.0.100.1"), "rail0", true}, kHostA,
                   kDefaultRtoMin};
  a.routes.routes[kept.destination] = kept;
  a.routes.routes[stale.destination] = stale;
  REQUIRE(a.service->Start().ok());
  REQUIRE(a.routes.routes.size() == 1);
  CHECK(a.routes.routes.begin()->second == kept);
  REQUIRE(a.service->monitor().Pin("b").has_value());
  CHECK(a.service->monitor().Pin("b")->rail == 1);
}

TEST_CASE("forged, malformed and unknown probes are dropped, counted and never answered", "[daemonset][fabric]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB});
  REQUIRE(a.service->Start().ok());
  FabricProbeCodec other(Key("a-different-key-of-32-bytes!!!!!"));
  FabricProbe probe = ProbeOf("b", "a", 0, 0, 1);
  auto forged = other.Encode(probe);
  net.Inject(kHostA, 0, {forged.begin(), forged.end()}, kHostB);
  net.Inject(kHostA, 0, {0x4C, 0x46, kFabricProbeVersion, 0}, kHostB);  // ours, cut short
  FabricProbe stranger = probe;
  stranger.sender = WireNodeId(NodeIdFromName("c"));
  auto s = a.codec.Encode(stranger);
  net.Inject(kHostA, 0, {s.begin(), s.end()}, kHostC);
  FabricProbe elsewhere = probe;
  elsewhere.dest = WireNodeId(NodeIdFromName("z"));
  auto e = a.codec.Encode(elsewhere);
  net.Inject(kHostA, 0, {e.begin(), e.end()}, kHostB);
  FabricProbe stray = probe;  // an ack alone for a path we do not probe
  stray.seq.reset();
  stray.ack_path_index = 5;
  stray.ack = fabric::AckField{1, 0, std::nullopt, 0ms};
  auto st = a.codec.Encode(stray);
  net.Inject(kHostA, 0, {st.begin(), st.end()}, kHostB);
  a.service->RunOnce(0ns);
  auto& dropped = a.registry.Counter("lockstep_fabric_probe_dropped_total", "", {"reason"});
  CHECK(dropped.Get({"unauthenticated"}) == 1);
  CHECK(dropped.Get({"truncated"}) == 1);
  CHECK(dropped.Get({"unknown_sender"}) == 1);
  CHECK(dropped.Get({"misdirected"}) == 1);
  CHECK(dropped.Get({"unmatched"}) == 1);
  for (const auto& sent : a.socket.sent) CHECK(sent.dest != kHostC);  // no packet to anyone but known peers
}

TEST_CASE("a peer's probe is acked by our next probe on the same path, or alone out of its arrival interface "
          "when we do not probe that path",
          "[daemonset][fabric]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB});
  FakeFabricSocket b(net, kHostB);  // b's raw socket: what a sends it
  REQUIRE(a.service->Start().ok());
  auto watched = a.codec.Encode(ProbeOf("b", "a", 1, 0, 42));
  auto unwatched = a.codec.Encode(ProbeOf("b", "a", 1, 3, 7));  // path index 3: a does not probe it
  // A spoofed source address changes nothing: a answers b's configured host address.
  net.Inject(kHostA, 1, {watched.begin(), watched.end()}, kHostC);
  net.Inject(kHostA, 1, {unwatched.begin(), unwatched.end()}, kHostC);
  a.socket.sent.clear();
  std::optional<FabricProbe> carried, alone;
  for (int ms = 0; ms < 12 && !(carried && alone); ++ms) {  // within one jittered gap
    clock.Advance(1ms);
    a.service->RunOnce(0ns);
    std::vector<FabricDatagram> got;
    REQUIRE(b.Poll(0ns, got).ok());
    for (const FabricDatagram& d : got) {
      auto p = std::get<FabricProbe>(a.codec.Decode(d.bytes()));
      if (!p.ack) continue;
      if (p.seq && p.ack_rail == 1 && p.ack_path_index == 0) carried = p;
      if (!p.seq && p.ack_path_index == 3) alone = p;
    }
  }
  REQUIRE(carried);
  CHECK(carried->rail == 1);  // a's own probe out of the interface b's probe arrived on
  CHECK(carried->ack->seq == 42);
  REQUIRE(alone);
  CHECK_FALSE(alone->seq.has_value());  // ack only
  CHECK(alone->ack->seq == 7);
  CHECK(alone->ack_rail == 1);
  for (const auto& s : a.socket.sent) {
    CHECK(s.dest == kHostB);
    CHECK(s.source == kHostA);
  }
  CHECK(std::any_of(a.socket.sent.begin(), a.socket.sent.end(), [](const auto& s) { return s.ifindex == 2; }));
  auto& answered = a.registry.Counter("lockstep_fabric_probes_answered_total", "", {"peer"});
  clock.Advance(200ms);
  a.service->RunOnce(0ns);
  CHECK(answered.Get({"b"}) == 1);  // the one ack-only packet
}

TEST_CASE("a missed probe is confirmed with urgent probes, flagged urgent to the peer's one port, which acks them at once",
          "[daemonset][fabric]") {
  World w;
  w.Run(300ms);
  const int home = HomeRail();
  auto urgent_sent = [](const Node& n, int rail) {
    return std::count_if(n.socket.sent.begin(), n.socket.sent.end(), [&](const FakeFabricSocket::Sent& s) {
      return s.urgent && s.port == 7312 && s.ifindex == rail + 1;
    });
  };
  REQUIRE(urgent_sent(w.a, home) == 0);  // nothing missed while all was well
  w.net.Cut(kHostB, home);
  Nanos took{0};
  while (StateOf(w.a, "b", home) != fabric::PathState::kDown && took < 200ms) {
    w.Run(1ms);
    took += 1ms;
  }
  REQUIRE(StateOf(w.a, "b", home) == fabric::PathState::kDown);
  CHECK(took <= fabric::WorstCaseDetection(w.a.options.fabric));
  // missThreshold - 1 urgent probes, out of the dead rail, then none.
  CHECK(urgent_sent(w.a, home) == w.a.options.fabric.miss_threshold - 1);
  CHECK(w.a.registry.Counter("lockstep_fabric_urgent_probes_total", "", {"peer", "rail"})
            .Get({"b", "rail" + std::to_string(home)}) == w.a.options.fabric.miss_threshold - 1);
  w.Run(100ms);
  CHECK(urgent_sent(w.a, home) == w.a.options.fabric.miss_threshold - 1);

  // The other end: an urgent probe is acked in the same wake-up, flagged
  // urgent, out of the interface it arrived on.
  w.net.Cut(kHostB, home, false);
  const int other = 1 - home;
  const uint32_t seq = FirstSeq(EpochOf("a")) + 4242;  // ahead of what a sent (its seqs start there)
  auto probe = w.b.codec.Encode(ProbeOf("a", "b", other, 0, seq));
  FabricDatagram d{.source = kHostA, .ifindex = other + 1, .received = w.clock.Monotonic(), .urgent = true};
  d.Assign(probe);
  w.b.socket.inbox.push_back(d);
  w.b.socket.sent.clear();
  w.b.service->RunOnce(0ns);
  std::vector<FabricDatagram> got;
  REQUIRE(w.a.socket.Poll(0ns, got).ok());
  const auto it = std::find_if(got.begin(), got.end(), [&](const FabricDatagram& d) {
    auto p = std::get<FabricProbe>(w.a.codec.Decode(d.bytes()));
    return d.urgent && p.ack && p.ack->seq == seq;
  });
  REQUIRE(it != got.end());
  CHECK(std::any_of(w.b.socket.sent.begin(), w.b.socket.sent.end(), [&](const FakeFabricSocket::Sent& s) {
    return s.urgent && s.port == 7312 && s.ifindex == other + 1 && s.dest == kHostA;
  }));
}

TEST_CASE("one-way delays are measured only while fabric time is LOCKED", "[daemonset][fabric]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  bool locked = false;
  auto fabric_now = [&]() -> std::optional<int64_t> {
    if (!locked) return std::nullopt;
    return clock.Monotonic().time_since_epoch().count();
  };
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB}, fabric_now);
  Node b(net, clock, "b", kHostB, {"a", NodeIdFromName("a"), kHostA}, fabric_now);
  REQUIRE(a.service->Start().ok());
  REQUIRE(b.service->Start().ok());
  auto run = [&](Nanos d) { RunPair(clock, a, b, d); };
  run(300ms);
  for (const auto& p : a.service->monitor().Paths(clock.Monotonic())) CHECK_FALSE(p.stats.owd_p50.has_value());
  locked = true;
  run(300ms);
  for (const auto& p : a.service->monitor().Paths(clock.Monotonic())) CHECK(p.stats.owd_p50.has_value());
}

TEST_CASE("latency SLAs are judged on the measured one-way delays, only while fabric time is LOCKED",
          "[daemonset][fabric]") {
  // Untiered: an idle path gets ~20 delay samples in a 10 s window, fewer
  // than the SLA's minimum (tiered probing judges SLAs on fast paths only).
  const Untiered untiered;
  FakeClock clock;
  FakeFabricNetwork net(clock);
  bool locked = false;
  // b's fabric time runs 50 us ahead of a's: a's probes arrive at b 50 us
  // "late" in fabric time, so a's paths measure one-way delays of >= 50 us.
  auto fabric_now = [&](Nanos skew) {
    return [&clock, &locked, skew]() -> std::optional<int64_t> {
      if (!locked) return std::nullopt;
      return (clock.Monotonic().time_since_epoch() + skew).count();
    };
  };
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB}, fabric_now(0ns));
  Node b(net, clock, "b", kHostB, {"a", NodeIdFromName("a"), kHostA}, fabric_now(50us));
  a.options.latency.all_rails = 1s;      // generous
  a.options.latency.per_rail[1] = 10us;  // impossible for a 50 us delay
  a.service =
      std::make_unique<FabricService>(a.socket, a.routes, clock, a.codec, fabric_now(0ns), a.options, a.registry);
  REQUIRE(a.service->Start().ok());
  REQUIRE(b.service->Start().ok());
  RunPair(clock, a, b, 2s);
  CHECK(a.service->Health().latency.verdict == fabric::LatencyVerdict::kClockNotLocked);
  CHECK(a.service->TakeLatencyBreaches().empty());
  locked = true;
  RunPair(clock, a, b, 2s);
  const FabricLatencyView v = a.service->Health().latency;
  CHECK(v.verdict == fabric::LatencyVerdict::kBreach);
  CHECK(v.with_sla == 2);
  CHECK(v.judged == 2);
  CHECK(v.breaches == 1);
  CHECK(v.worst_rail == "rail1");
  CHECK(v.worst_peer == "b");
  CHECK(v.worst_p99 >= 50us);
  const std::vector<FabricLatencyBreach> breaches = a.service->TakeLatencyBreaches();
  REQUIRE(breaches.size() == 1);
  CHECK(breaches[0].rail == "rail1");
  CHECK(breaches[0].sla == 10us);
  CHECK(a.registry.Gauge("lockstep_fabric_path_latency_breach", "").Get({"b", "rail1"}) == 1);
  CHECK(a.registry.Gauge("lockstep_fabric_path_latency_breach", "").Get({"b", "rail0"}) == 0);
  // b has no SLA: nothing judged there.
  CHECK(b.service->Health().latency.verdict == fabric::LatencyVerdict::kNoSla);
}

// Replays (fabric_probe.h, "Replays"): an attacker on a rail, without the
// key, sends genuine packets again.

// Runs both agents 1 ms at a time for d; every datagram a sends b is
// appended to `a_to_b` (as b receives it) when given.
void RunCapturing(FakeClock& clock, Node& a, Node& b, Nanos d, std::vector<FabricDatagram>* a_to_b) {
  for (Nanos t{0}; t < d; t += 1ms) {
    clock.Advance(1ms);
    a.service->RunOnce(0ns);
    if (a_to_b) a_to_b->insert(a_to_b->end(), b.socket.inbox.begin(), b.socket.inbox.end());
    b.service->RunOnce(0ns);
  }
}

uint64_t Misses(const Node& n, MonoTime now) {
  uint64_t m = 0;
  for (const auto& p : n.service->monitor().Paths(now)) m += p.stats.misses;
  return m;
}

int PathFlaps(const Node& n, MonoTime now) {  // path flaps (into down after delivering) in the flap window
  int f = 0;
  for (const auto& p : n.service->monitor().Paths(now)) f += p.flaps_in_window;
  return f;
}

double Dropped(Node& n, const char* reason) {
  return n.registry.Counter("lockstep_fabric_probe_dropped_total", "", {"reason"}).Get({reason});
}

size_t UrgentSent(const Node& n) {
  return static_cast<size_t>(std::count_if(n.socket.sent.begin(), n.socket.sent.end(), [](const auto& s) {
    return s.urgent;
  }));
}

TEST_CASE("a replayed probe stream, at any rate, to either port, takes no path down and moves no traffic",
          "[daemonset][fabric]") {
  // One genuine probe (a's rail-0 path to b, as in the attack on netlab) or
  // every packet a sent, replayed to b's regular or urgent port from 20/s to
  // 20,000/s for 3 s.
  struct Attack {
    bool one_probe;
    bool urgent;
    int per_ms;     // replays per ms (0: one every 50 ms)
  };
  for (Attack attack : {Attack{true, false, 1}, Attack{true, true, 1}, Attack{true, false, 0},
                        Attack{false, false, 20}, Attack{false, true, 20}, Attack{false, true, 0}}) {
    CAPTURE(attack.one_probe, attack.urgent, attack.per_ms);
    World w(/*skewed=*/true);
    std::vector<FabricDatagram> captured;
    RunCapturing(w.clock, w.a, w.b, 300ms, &captured);
    REQUIRE(StateOf(w.a, "b", 0) == fabric::PathState::kUp);
    REQUIRE(StateOf(w.a, "b", 1) == fabric::PathState::kUp);
    if (attack.one_probe) {
      auto it = std::find_if(captured.begin(), captured.end(), [&](const FabricDatagram& d) {
        auto p = std::get<FabricProbe>(w.b.codec.Decode(d.bytes()));
        return p.seq && p.rail == 0;
      });
      REQUIRE(it != captured.end());
      captured = {*it};
    }
    const MonoTime t0 = w.clock.Monotonic();
    const uint64_t misses = Misses(w.a, t0) + Misses(w.b, t0);
    const auto routes_a = w.a.routes.routes;
    const auto routes_b = w.b.routes.routes;
    const size_t urgent_b = UrgentSent(w.b);
    size_t next = 0;
    double replayed = 0;
    for (Nanos t{0}; t < 3s; t += 1ms) {
      w.clock.Advance(1ms);
      w.a.service->RunOnce(0ns);
      // The replays sit in b's socket beside a's genuine packets (and, to
      // the urgent port, are read first: the order changes nothing).
      const int n = attack.per_ms > 0 ? attack.per_ms : (t % 50ms == Nanos(0) ? 1 : 0);
      for (int i = 0; i < n; ++i) {
        FabricDatagram d = captured[next++ % captured.size()];
        d.received = w.clock.Monotonic();
        d.urgent = attack.urgent;
        w.b.socket.inbox.push_front(d);
        ++replayed;
      }
      w.b.service->RunOnce(0ns);
    }
    const MonoTime t1 = w.clock.Monotonic();
    CHECK(Misses(w.a, t1) + Misses(w.b, t1) == misses);  // not a single probe missed
    for (int r : {0, 1}) {
      CHECK(StateOf(w.a, "b", r) == fabric::PathState::kUp);
      CHECK(StateOf(w.b, "a", r) == fabric::PathState::kUp);
    }
    CHECK(w.a.routes.routes == routes_a);
    CHECK(w.b.routes.routes == routes_b);
    CHECK(PathFlaps(w.a, t1) + PathFlaps(w.b, t1) == 0);
    // Every replay dropped and counted under its own reason; none woke an
    // urgent reply to a (no amplifier).
    CHECK(Dropped(w.b, "replayed") + Dropped(w.b, "stale") == replayed);
    CHECK(UrgentSent(w.b) == urgent_b);
  }
}

TEST_CASE("replays of a peer's packets do not re-admit a path that is down", "[daemonset][fabric]") {
  // Untiered: the count below assumes the capture holds probes only (an
  // ack-only packet carries no seq, so its replays are not counted as
  // replayed; tiered, the idle path's acks leave ack-only).
  const Untiered untiered;
  World w(/*skewed=*/true);
  const int home = HomeRail();
  std::vector<FabricDatagram> b_to_a;  // what b sent a while all was well
  RunCapturing(w.clock, w.b, w.a, 300ms, &b_to_a);
  w.net.Cut(kHostA, home);
  w.Run(200ms);
  REQUIRE(StateOf(w.a, "b", home) == fabric::PathState::kDown);
  const auto pinned = w.a.routes.routes;
  // 10 s of replays of everything b sent, 1,000/s to each port, on the dead
  // rail: longer than any hold-down the path needs to be re-admitted.
  size_t next = 0;
  for (Nanos t{0}; t < 10s; t += 1ms) {
    w.clock.Advance(1ms);
    for (bool urgent : {false, true}) {
      FabricDatagram d = b_to_a[next++ % b_to_a.size()];
      d.received = w.clock.Monotonic();
      d.urgent = urgent;
      d.ifindex = home + 1;
      w.a.socket.inbox.push_back(d);
    }
    w.a.service->RunOnce(0ns);
    w.b.service->RunOnce(0ns);
    REQUIRE(StateOf(w.a, "b", home) == fabric::PathState::kDown);
  }
  CHECK(w.a.routes.routes == pinned);
  // All dropped but a few: after 10 s without a genuine probe the silent
  // path's ack window is dropped (Sweep), and the replays then start it
  // again once (fabric_probe.h): acks of old seqs, which deliver nothing.
  const double dropped = Dropped(w.a, "replayed") + Dropped(w.a, "stale");
  CHECK(dropped >= static_cast<double>(next - b_to_a.size()));
  CHECK(dropped < static_cast<double>(next));
  // The link back: re-admitted by the peer's real packets.
  w.net.Cut(kHostA, home, false);
  w.Run(3s);
  CHECK(StateOf(w.a, "b", home) == fabric::PathState::kUp);
}

TEST_CASE("a peer restart (a newer signed epoch) is recognised at once, its old boot's packets are stale",
          "[daemonset][fabric]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB});
  auto b = std::make_unique<Node>(net, clock, "b", kHostB, FabricPeer{"a", NodeIdFromName("a"), kHostA});
  REQUIRE(a.service->Start().ok());
  REQUIRE(b->service->Start().ok());
  std::vector<FabricDatagram> old_boot;
  RunCapturing(clock, *b, a, 300ms, &old_boot);
  // b restarts: a new process, a later epoch, seqs from a new start.
  b = std::make_unique<Node>(net, clock, "b", kHostB, FabricPeer{"a", NodeIdFromName("a"), kHostA}, nullptr,
                             EpochOf("b") + 1'000);
  REQUIRE(b->service->Start().ok());
  // Within a gap and a bit, b's probes are acked: both its paths come up.
  Nanos took{0};
  auto both_up = [&] {
    return StateOf(*b, "a", 0) == fabric::PathState::kUp && StateOf(*b, "a", 1) == fabric::PathState::kUp;
  };
  while (!both_up() && took < 200ms) {
    RunPair(clock, a, *b, 1ms);
    took += 1ms;
  }
  REQUIRE(both_up());
  CHECK(took <= 2 * a.options.fabric.reply_timeout);
  CHECK(a.registry.Counter("lockstep_fabric_peer_restarts_total", "", {"peer"}).Get({"b"}) == 1);
  CHECK(Dropped(a, "stale") == 0);
  CHECK(Dropped(a, "replayed") == 0);
  // The old boot's packets, replayed: stale, and nothing moves.
  const MonoTime t0 = clock.Monotonic();
  const uint64_t misses = Misses(a, t0) + Misses(*b, t0);
  for (const FabricDatagram& old : old_boot) {
    FabricDatagram d = old;
    d.received = clock.Monotonic();
    a.socket.inbox.push_back(d);
  }
  RunPair(clock, a, *b, 500ms);
  CHECK(Dropped(a, "stale") == static_cast<double>(old_boot.size()));
  CHECK(Misses(a, clock.Monotonic()) + Misses(*b, clock.Monotonic()) == misses);
  CHECK(a.registry.Counter("lockstep_fabric_peer_restarts_total", "", {"peer"}).Get({"b"}) == 1);
}

TEST_CASE("a peer restarted with its clock behind its previous start is let in after a stats window of silence",
          "[daemonset][fabric]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB});
  auto b = std::make_unique<Node>(net, clock, "b", kHostB, FabricPeer{"a", NodeIdFromName("a"), kHostA});
  REQUIRE(a.service->Start().ok());
  REQUIRE(b->service->Start().ok());
  RunPair(clock, a, *b, 300ms);
  // b restarts with an epoch older than its previous one (its wall clock
  // was stepped back): stale to a at first, which cannot tell it from a
  // replay while the old boot's packets are fresh.
  b = std::make_unique<Node>(net, clock, "b", kHostB, FabricPeer{"a", NodeIdFromName("a"), kHostA}, nullptr,
                             EpochOf("b") - 1);
  REQUIRE(b->service->Start().ok());
  RunPair(clock, a, *b, 2s);
  CHECK(Dropped(a, "stale") > 0);
  CHECK(StateOf(*b, "a", 0) != fabric::PathState::kUp);
  // Nothing fresh from b for a stats window (10 s): its older epoch is let in.
  auto& restarts = a.registry.Counter("lockstep_fabric_peer_restarts_total", "", {"peer"});
  Nanos since_restart = 2s;
  while (restarts.Get({"b"}) == 0 && since_restart < 20s) {
    RunPair(clock, a, *b, 1ms);
    since_restart += 1ms;
  }
  CHECK(restarts.Get({"b"}) == 1);
  CHECK(since_restart <= a.options.fabric.stats_window + 20ms);
  // b's paths, down meanwhile, come back after their clean period.
  RunPair(clock, a, *b, a.options.fabric.readmit_after + 500ms);
  CHECK(StateOf(*b, "a", 0) == fabric::PathState::kUp);
  CHECK(StateOf(*b, "a", 1) == fabric::PathState::kUp);
  CHECK(StateOf(a, "b", 0) == fabric::PathState::kUp);
  CHECK(StateOf(a, "b", 1) == fabric::PathState::kUp);
}

TEST_CASE("a node takes a new epoch before its seqs could wrap, its peers follow, no path goes down",
          "[daemonset][fabric]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB}, nullptr, 0, /*renew_epoch_after=*/50);
  Node b(net, clock, "b", kHostB, {"a", NodeIdFromName("a"), kHostA});
  REQUIRE(a.service->Start().ok());
  REQUIRE(b.service->Start().ok());
  const uint64_t first = a.service->epoch();
  RunPair(clock, a, b, 3s);  // ~200 probes per path: a few new epochs
  CHECK(a.service->epoch() > first);
  CHECK(b.registry.Counter("lockstep_fabric_peer_restarts_total", "", {"peer"}).Get({"a"}) >= 3);
  for (int r : {0, 1}) {
    CHECK(StateOf(a, "b", r) == fabric::PathState::kUp);
    CHECK(StateOf(b, "a", r) == fabric::PathState::kUp);
  }
  CHECK(PathFlaps(a, clock.Monotonic()) + PathFlaps(b, clock.Monotonic()) == 0);
  CHECK(Dropped(b, "stale") + Dropped(b, "replayed") == 0);
}

TEST_CASE("urgent replies are rate-limited per peer, the acks still ride on the next packets", "[daemonset][fabric]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  Node a(net, clock, "a", kHostA, {"b", NodeIdFromName("b"), kHostB});
  FakeFabricSocket b(net, kHostB);  // b's raw socket: a peer asking for far too many urgent replies
  REQUIRE(a.service->Start().ok());
  clock.Advance(1ms);
  a.service->RunOnce(0ns);
  a.socket.sent.clear();
  // 100 fresh, authenticated urgent probes on 100 of b's paths at once.
  for (int index = 0; index < 100; ++index) {
    FabricProbe p = ProbeOf("b", "a", 0, index, 1'000);
    auto bytes = a.codec.Encode(p);
    FabricDatagram d{.source = kHostB, .ifindex = 1, .received = clock.Monotonic(), .urgent = true};
    d.Assign(bytes);
    a.socket.inbox.push_back(d);
  }
  clock.Advance(1ms);
  a.service->RunOnce(0ns);
  // The budget: twice (missThreshold - 1) urgent probes per rail per interval.
  const auto budget = static_cast<size_t>(2 * (a.options.fabric.miss_threshold - 1) * 2);
  CHECK(UrgentSent(a) == budget);
  CHECK(a.registry.Counter("lockstep_fabric_urgent_replies_limited_total", "").Get() == 100.0 - budget);
  // The rest are acked at the next tick, ack-only to the regular port.
  std::set<int> acked;
  for (int ms = 0; ms < 20; ++ms) {
    clock.Advance(1ms);
    a.service->RunOnce(0ns);
  }
  std::vector<FabricDatagram> got;
  REQUIRE(b.Poll(0ns, got).ok());
  for (const FabricDatagram& d : got) {
    auto p = std::get<FabricProbe>(a.codec.Decode(d.bytes()));
    if (p.ack && p.ack->seq == 1'000) acked.insert(p.ack_path_index);
  }
  CHECK(acked.size() == 100);
  // The budget refills with time: a peer that needs urgent replies gets them.
  a.socket.sent.clear();
  FabricDatagram d{.source = kHostB, .ifindex = 1, .received = clock.Monotonic(), .urgent = true};
  d.Assign(a.codec.Encode(ProbeOf("b", "a", 0, 0, 1'001)));
  a.socket.inbox.push_back(d);
  clock.Advance(1ms);
  a.service->RunOnce(0ns);
  CHECK(UrgentSent(a) == 1);
}

}  // namespace
}  // namespace lockstep::agent

namespace lockstep::agent {
namespace {

// A node's TCP connections for tiered probing: one connection per listed
// remote, moving bytes at every look while `moving`.
struct FakeTraffic final : TrafficSource {
  explicit FakeTraffic(std::shared_ptr<std::vector<uint32_t>> remotes) : remotes(std::move(remotes)) {}
  Result<std::vector<TcpFlow>> Flows() override {
    std::vector<TcpFlow> out;
    bytes += 1000;
    for (uint32_t r : *remotes) out.push_back({.cookie = r, .remote = r, .bytes = bytes});
    return out;
  }
  std::shared_ptr<std::vector<uint32_t>> remotes;
  uint64_t bytes = 0;
};

TEST_CASE("tiered probing: idle paths are probed in the rotation, an active peer's pinned path every interval, "
          "and an idle path's failure is detected within WorstCaseDetectionIdle",
          "[daemonset][fabric][tiers]") {
  World w;
  auto a_talks_to = std::make_shared<std::vector<uint32_t>>();
  auto b_talks_to = std::make_shared<std::vector<uint32_t>>();
  w.a.service->SetTrafficSource(std::make_unique<FakeTraffic>(a_talks_to));
  w.b.service->SetTrafficSource(std::make_unique<FakeTraffic>(b_talks_to));
  w.Run(2s);
  const int home = HomeRail();
  const int other = 1 - home;
  const fabric::PathMonitor& m = w.a.service->monitor();
  auto tier = [&](int rail) { return m.PathTier(*m.Find({rail, "b", 0})); };
  // No connections: both of a's paths idle, both up.
  CHECK(m.tiers().fast() == 0);
  CHECK(tier(home) == fabric::Tier::kIdle);
  CHECK(StateOf(w.a, "b", home) == fabric::PathState::kUp);
  CHECK(StateOf(w.a, "b", other) == fabric::PathState::kUp);
  CHECK(w.a.registry.Gauge("lockstep_fabric_active_peers", "", {}).Get({}) == 0);
  // Packets a sends in 2 s: each path at least every 500 ms and its acks of
  // b's idle probes; untiered it is one per path per 14 ms (~286).
  size_t before = w.a.socket.sent.size();
  w.Run(2s);
  const size_t idle_packets = w.a.socket.sent.size() - before;
  INFO("idle packets in 2 s: " << idle_packets);
  CHECK(idle_packets >= 8);  // 2 paths x 4 probes, at least
  CHECK(idle_packets <= 40);
  CHECK(StateOf(w.a, "b", home) == fabric::PathState::kUp);

  // a and b talk (TCP between their host addresses): the pinned path is
  // fast at both ends within the one-second look.
  a_talks_to->push_back(kHostB);
  b_talks_to->push_back(kHostA);
  w.Run(1100ms);
  CHECK(tier(home) == fabric::Tier::kTraffic);
  CHECK(tier(other) == fabric::Tier::kIdle);
  CHECK(w.a.registry.Gauge("lockstep_fabric_active_peers", "", {}).Get({}) == 1);
  before = w.a.socket.sent.size();
  w.Run(1s);
  const size_t active_packets = w.a.socket.sent.size() - before;
  INFO("active packets in 1 s: " << active_packets);
  CHECK(active_packets >= 64);   // the pinned path every ~14 ms (+ the idle one)
  CHECK(active_packets <= 100);  // not both paths every interval (~143)

  // The idle path fails silently: down within WorstCaseDetectionIdle (the
  // next rotation probe, its timeout, urgent confirmations), and the pin
  // stays home.
  w.net.Cut(kHostB, other);
  const MonoTime cut = w.clock.Monotonic();
  std::optional<MonoTime> down;
  for (int i = 0; i < 2000 && !down; ++i) {
    w.Run(1ms);
    if (StateOf(w.a, "b", other) == fabric::PathState::kDown) down = w.clock.Monotonic();
  }
  REQUIRE(down);
  INFO("idle path detected in " << (*down - cut).count() / 1000 << " us");
  CHECK(*down - cut <= fabric::WorstCaseDetectionIdle(w.a.options.fabric) + 2ms);  // + the 1 ms steps
  CHECK(w.a.routes.routes.begin()->second.ToString() == RailRoute(kHostB, home, kHostA));
  // And the active path: down within WorstCaseDetection, traffic moves.
  w.net.Cut(kHostB, other, false);
  w.Run(3s);
  w.net.Cut(kHostB, home);
  const MonoTime cut2 = w.clock.Monotonic();
  down.reset();
  for (int i = 0; i < 2000 && !down; ++i) {
    w.Run(1ms);
    if (StateOf(w.a, "b", home) == fabric::PathState::kDown) down = w.clock.Monotonic();
  }
  REQUIRE(down);
  INFO("active path detected in " << (*down - cut2).count() / 1000 << " us");
  CHECK(*down - cut2 <= fabric::WorstCaseDetection(w.a.options.fabric) + 2ms);
}

TEST_CASE("a peer's idle probes on a path we do not probe are acked at our idle ticks, without fast wake-ups",
          "[daemonset][fabric][tiers]") {
  World w(true);
  auto none = std::make_shared<std::vector<uint32_t>>();  // no connections: every path idle
  w.a.service->SetTrafficSource(std::make_unique<FakeTraffic>(none));
  w.b.service->SetTrafficSource(std::make_unique<FakeTraffic>(none));
  // Both agents run every millisecond; a's wake-ups are counted from the
  // waits it asks for (when it would have woken, sleeping as asked).
  MonoTime a_due = w.clock.Monotonic();
  int a_wakeups = 0;
  auto run = [&](Nanos d) {
    for (Nanos t{0}; t < d; t += 1ms) {
      w.clock.Advance(1ms);
      const MonoTime now = w.clock.Monotonic();
      w.a.service->RunOnce(1s);
      if (now >= a_due) {
        ++a_wakeups;
        a_due = now + w.a.socket.last_wait;
      }
      w.b.service->RunOnce(1s);
    }
  };
  run(3s);
  REQUIRE(w.a.service->monitor().OnIdleTicks());
  // a's wake-ups on idle ticks alone (its ticks and its idle probes' timeouts).
  a_wakeups = 0;
  run(3s);
  const int idle_wakeups = a_wakeups;
  // b also probes a's path index 3 on rail 1, which a does not probe (no
  // carrier for its acks): a's acks of it leave alone, and b drops them as
  // unmatched (it does not watch that path either), which counts them here.
  auto& unmatched = w.b.registry.Counter("lockstep_fabric_probe_dropped_total", "", {"reason"});
  uint32_t seq = 100;
  auto inject = [&](bool slow) {
    FabricProbe p = ProbeOf("b", "a", 1, 3, ++seq);
    p.slow = slow;
    auto bytes = w.b.codec.Encode(p);
    w.net.Inject(kHostA, 1, {bytes.begin(), bytes.end()}, kHostB);
  };
  const fabric::FabricOptions& o = w.a.options.fabric;
  // Idle probes every 300 ms for 3 s: each acked within IdleAckTimeout, and
  // a keeps its idle ticks (~10 wake-ups a second, not one per probe interval).
  a_wakeups = 0;
  for (int i = 0; i < 10; ++i) {
    const double before = unmatched.Get({"unmatched"});
    inject(true);
    run(fabric::IdleAckTimeout(o) - 1ms);
    CHECK(unmatched.Get({"unmatched"}) == before + 1);
    run(300ms - fabric::IdleAckTimeout(o) + 1ms);
  }
  INFO("a's wake-ups in 3 s: " << idle_wakeups << " on idle ticks alone, " << a_wakeups
                                 << " with a peer's idle probes on a path it does not probe");
  CHECK(idle_wakeups <= 75);                 // ~10 ticks a second and their probes' timeouts
  CHECK(a_wakeups <= idle_wakeups * 6 / 5);  // every probe interval would be >= 214
  CHECK(w.a.service->monitor().OnIdleTicks());
  // Fast probes on it: acked within the fast reply timeout, a ticks fast.
  a_wakeups = 0;
  for (int i = 0; i < 20; ++i) {
    const double before = unmatched.Get({"unmatched"});
    inject(false);
    run(o.reply_timeout - 1ms);
    CHECK(unmatched.Get({"unmatched"}) == before + 1);
    run(50ms - o.reply_timeout + 1ms);
  }
  INFO("a's wake-ups in 1 s with a peer's fast probes on it: " << a_wakeups);
  CHECK(a_wakeups >= 60);
  // They stop: after kFastTickHold a is back on idle ticks, its wake-ups too.
  run(fabric::kFastTickHold + 500ms);
  a_wakeups = 0;
  run(2s);
  INFO("a's wake-ups in 2 s after the fast probes stopped: " << a_wakeups);
  CHECK(w.a.service->monitor().OnIdleTicks());
  CHECK(a_wakeups <= idle_wakeups * 2 / 3 * 6 / 5);
}

}  // namespace
}  // namespace lockstep::agent
