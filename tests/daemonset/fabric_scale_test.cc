// FabricService at production scale: one agent with 128 paths (16 peers x 8
// rails), on simulated time over the in-memory fabric, its socket read as
// UdpFabricSocket reads it (the urgent port first). The peers probe only the
// hub, as in e2e/bench/fabric-probe-cost.sh. What the 128-path lab showed
// (docs/benchmarks.md, "Probe cost"): once the node is late, every path turns
// suspect at once, and the urgent confirmations of 128 paths then share the
// hub's late reads with the regular acks.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "../support/fake_clock.h"
#include "../support/fake_fabric_socket.h"
#include "../support/fake_route_actuator.h"
#include "lockstep/agent/runtime/fabric_service.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

constexpr int kRails = 8;
constexpr int kPeers = 16;

uint32_t HostAddress(int i) { return *ParseIpv4("10.0.200." + std::to_string(i + 1)); }
std::string Name(int i) { return "h" + std::to_string(i); }
FabricPeer PeerOf(int i) { return {Name(i), NodeIdFromName(Name(i)), HostAddress(i)}; }
ProbeKey Key() { return *ProbeKey::FromBytes("a-shared-probe-key-of-32-bytes!!"); }

struct Agent {
  Agent(FakeFabricNetwork& net, FakeClock& clock, int self, const std::vector<FabricPeer>& peers, int stall_excuses)
      : socket(net, HostAddress(self)), codec(Key()) {
    socket.urgent_first = true;
    FabricServiceOptions o;
    o.self_name = Name(self);
    o.setup.host_address = HostAddress(self);
    for (int r = 0; r < kRails; ++r) {
      const std::string rail = "rail" + std::to_string(r);
      routes.AddInterface(rail, true);
      o.setup.rails.push_back({rail, r + 1, 0, {*ParseIpv4("10.0.100." + std::to_string(r + 1)), rail, true}});
    }
    o.setup.peers = peers;
    o.peer_port = 7312;
    o.seed = 11 + static_cast<uint64_t>(self);  // ticks jittered apart, as on a real fabric
    o.epoch = 1'000 + static_cast<uint64_t>(self);
    o.fabric.stall_excuses = stall_excuses;
    service = std::make_unique<FabricService>(socket, routes, clock, codec, nullptr, o, registry);
  }
  FakeFabricSocket socket;
  FakeRouteActuator routes;
  FabricProbeCodec codec;
  metrics::Registry registry;
  std::unique_ptr<FabricService> service;
};

struct Totals {
  uint64_t misses = 0;
  int flaps = 0;  // transitions into down after delivering, in the flap window
  int up = 0;
};

struct Fabric {
  explicit Fabric(int stall_excuses) {
    std::vector<FabricPeer> peers;
    for (int i = 1; i <= kPeers; ++i) peers.push_back(PeerOf(i));
    hub = std::make_unique<Agent>(net, clock, 0, peers, stall_excuses);
    for (int i = 1; i <= kPeers; ++i) {
      spokes.push_back(std::make_unique<Agent>(net, clock, i, std::vector<FabricPeer>{PeerOf(0)}, stall_excuses));
    }
    REQUIRE(hub->service->Start().ok());
    for (auto& s : spokes) REQUIRE(s->service->Start().ok());
  }
  // 1 ms steps; the peers run every step, the hub every `hub_every`.
  void Run(Nanos d, Nanos hub_every = 1ms, Nanos spokes_every = 1ms) {
    for (Nanos t{0}; t < d; t += 1ms) {
      clock.Advance(1ms);
      ++step_;
      if (step_ % (hub_every / 1ms) == 0) hub->service->RunOnce(0ns);
      if (step_ % (spokes_every / 1ms) == 0) {
        for (auto& s : spokes) s->service->RunOnce(0ns);
      }
    }
  }
  Totals Hub() const {
    Totals t;
    for (const fabric::PathView& v : hub->service->monitor().Paths(clock.Monotonic())) {
      t.misses += v.stats.misses;
      t.flaps += v.flaps_in_window;
      t.up += v.state == fabric::PathState::kUp ? 1 : 0;
    }
    return t;
  }
  FakeClock clock;
  FakeFabricNetwork net{clock};
  std::unique_ptr<Agent> hub;
  std::vector<std::unique_ptr<Agent>> spokes;
  int64_t step_ = 0;
};

TEST_CASE("128 paths come up and stay up, the socket sized for 100 ms of their arrivals", "[daemonset][fabric]") {
  Fabric f(5);
  f.Run(2s);
  const Totals t0 = f.Hub();
  CHECK(t0.up == kPeers * kRails);
  f.Run(5s);
  const Totals t1 = f.Hub();
  CHECK(t1.up == kPeers * kRails);
  CHECK(t1.misses == t0.misses);
  CHECK(t1.flaps == 0);
  // 128 paths x 2 datagrams an interval (a probe, an urgent one or an ack)
  // x 8 intervals of 14 ms.
  CHECK(f.hub->socket.reserved == 128 * 2 * 8);
  CHECK(f.spokes[0]->socket.reserved == 256);  // 8 paths: the floor
}

TEST_CASE("at 128 paths, after a stall that left every path suspect, a late hub judges each ack by its arrival: no "
          "path goes down",
          "[daemonset][fabric]") {
  // The excuse budget spent (0): every stall is judged, as on the lab VM
  // ~8 s into a run. The whole machine stops 30 ms: every path misses one
  // probe, at both ends, and asks for urgent confirmation. Then the hub runs
  // late (every 6 ms: its reads hold 6 ms of urgent and regular datagrams)
  // while the peers run on time, so every ack it reads arrived in time.
  Fabric f(0);
  f.Run(2s);
  REQUIRE(f.Hub().up == kPeers * kRails);
  f.clock.Advance(30ms);
  f.Run(1ms);  // everybody wakes: the timeouts in the stall are misses
  const Totals after_stall = f.Hub();
  CHECK(after_stall.misses > 0);
  f.Run(2s, 6ms);
  f.Run(500ms);
  const Totals t = f.Hub();
  INFO("misses in the stall " << after_stall.misses << ", after it " << t.misses - after_stall.misses);
  CHECK(t.flaps == 0);
  CHECK(t.up == kPeers * kRails);
  CHECK(t.misses == after_stall.misses);
}

}  // namespace
}  // namespace lockstep::agent
