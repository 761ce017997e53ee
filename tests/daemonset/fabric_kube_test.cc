// Kubernetes-mode fabric failover: FabricService with discovered peers
// (SetPeers), its health view and flap alerts, the FabricHealth status built
// from it (railsUp/railsTotal, one condition per rail, Ready/phase, hostAddress,
// lastFlapTime), the reporter's rate limit while paths flap, the Event per
// flap alert, and the peer hand-off from discovery. Simulated time and
// in-memory fakes throughout.
#include <catch2/catch.hpp>

#include <memory>
#include <regex>

#include "../support/fake_clock.h"
#include "../support/fake_fabric_socket.h"
#include "../support/fake_route_actuator.h"
#include "fake_kube_api.h"
#include "lockstep/agent/runtime/fabric_service.h"
#include "lockstep/agent/kube/fabric_health_reporter.h"
#include "lockstep/agent/kube/kube_agent.h"
#include "lockstep/agent/kube/peer_directory.h"
#include "lockstep/agent/kube/peer_discovery.h"
#include "lockstep/fabric/failover_choice.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;
using kube::Json;

const uint32_t kHostA = *ParseIpv4("10.0.200.1");
const uint32_t kHostB = *ParseIpv4("10.0.200.2");
const uint32_t kHostC = *ParseIpv4("10.0.200.3");

FabricPeer Peer(const std::string& name, uint32_t host) { return {name, NodeIdFromName(name), host}; }

// A node in Kubernetes mode: no configured peers, they come from SetPeers.
struct KubeNode {
  KubeNode(FakeFabricNetwork& net, FakeClock& clock, const std::string& name, uint32_t self, int flap_alert = 8)
      : socket(net, self), codec(*ProbeKey::FromBytes("a-shared-probe-key-of-32-bytes!!")) {
    routes.AddInterface("rail0", true);
    routes.AddInterface("rail1", true);
    FabricServiceOptions o;
    o.self_name = name;
    o.setup.host_address = self;
    o.setup.rails = {{"rail0", 1, 0, {*ParseIpv4("10.0.100.1"), "rail0", true}},
                     {"rail1", 2, 0, {*ParseIpv4("10.0.100.2"), "rail1", true}}};
    o.peer_port = 7312;
    o.seed = 11;
    o.await_peers = true;
    o.fabric.flap_alert_per_hour = flap_alert;
    o.publish_every = 100ms;  // the tests read the health view soon after a change
    service = std::make_unique<FabricService>(socket, routes, clock, codec, FabricService::FabricNow{}, o, registry);
  }
  FakeFabricSocket socket;
  FakeRouteActuator routes;
  FabricProbeCodec codec;
  metrics::Registry registry;
  std::unique_ptr<FabricService> service;
};

struct Trio {
  FakeClock clock;
  FakeFabricNetwork net{clock};
  KubeNode a{net, clock, "a", kHostA, 1};
  KubeNode b{net, clock, "b", kHostB, 1};
  KubeNode c{net, clock, "c", kHostC, 1};
  std::vector<KubeNode*> all{&a, &b, &c};
  void Run(Nanos d) {
    for (Nanos t{0}; t < d; t += 1ms) {
      clock.Advance(1ms);
      for (KubeNode* n : all) n->service->RunOnce(0ns);
    }
  }
  void Mesh() {
    a.service->SetPeers({Peer("b", kHostB), Peer("c", kHostC)}, {});
    b.service->SetPeers({Peer("a", kHostA), Peer("c", kHostC)}, {});
    c.service->SetPeers({Peer("a", kHostA), Peer("b", kHostB)}, {});
  }
};

const FabricRailHealth& Rail(const FabricHealthView& v, int r) { return v.rails.at(static_cast<size_t>(r)); }

TEST_CASE("without peers yet the rails have no paths and owned routes wait for the first peer set",
          "[daemonset][fabric][kube]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  KubeNode a(net, clock, "a", kHostA);
  OwnedRoute earlier{{kHostB, 32}, {*ParseIpv4("10.0.100.2"), "rail1", true}, kHostA, kDefaultRtoMin};
  a.routes.routes[earlier.destination] = earlier;
  REQUIRE(a.service->Start().ok());
  for (int i = 0; i < 31'000; ++i) {  // past a route reconcile period
    clock.Advance(1ms);
    a.service->RunOnce(0ns);
  }
  CHECK(a.routes.routes.size() == 1);  // not judged stale before any peer is known
  FabricHealthView v = a.service->Health();
  REQUIRE(v.rails.size() == 2);
  CHECK(v.peers == 0);
  CHECK(Rail(v, 0).name == "rail0");
  CHECK(Rail(v, 0).paths == 0);
  CHECK_FALSE(Rail(v, 0).down);

  a.service->SetPeers({Peer("b", kHostB)}, {});
  a.service->RunOnce(0ns);
  REQUIRE(a.service->monitor().Pin("b").has_value());  // adopted once b is known
  CHECK(a.service->monitor().Pin("b")->rail == 1);
}

TEST_CASE("discovered peers are probed, a peer that did not select us is still answered",
          "[daemonset][fabric][kube]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  KubeNode a(net, clock, "a", kHostA);
  KubeNode b(net, clock, "b", kHostB);
  REQUIRE(a.service->Start().ok());
  REQUIRE(b.service->Start().ok());
  a.service->SetPeers({Peer("b", kHostB)}, {Peer("b", kHostB)});
  b.service->SetPeers({}, {Peer("a", kHostA)});  // b probes nobody but knows a
  for (int i = 0; i < 300; ++i) {
    clock.Advance(1ms);
    a.service->RunOnce(0ns);
    b.service->RunOnce(0ns);
  }
  CHECK(a.service->monitor().State({0, "b", 0}) == fabric::PathState::kUp);
  CHECK(a.service->monitor().State({1, "b", 0}) == fabric::PathState::kUp);
  CHECK(b.service->monitor().Paths(clock.Monotonic()).empty());
  CHECK(b.routes.routes.empty());
  FabricHealthView v = a.service->Health();
  CHECK(v.peers == 1);
  CHECK(Rail(v, 0).paths == 1);
  CHECK(Rail(v, 0).usable == 1);
}

TEST_CASE("bad peer entries are ignored: ourselves, our address, no address, a shared address",
          "[daemonset][fabric][kube]") {
  FakeClock clock;
  FakeFabricNetwork net(clock);
  KubeNode a(net, clock, "a", kHostA);
  REQUIRE(a.service->Start().ok());
  a.service->SetPeers({Peer("a", kHostB), Peer("b", kHostB), Peer("c", kHostB), Peer("d", kHostA), Peer("e", 0)},
                      {});
  a.service->RunOnce(0ns);
  auto paths = a.service->monitor().Paths(clock.Monotonic());
  REQUIRE(paths.size() == 2);  // b on both rails
  for (const auto& p : paths) CHECK(p.path.peer == "b");
}

TEST_CASE("a removed peer's paths and pin go, the health view names the failed peers of each rail",
          "[daemonset][fabric][kube]") {
  Trio t;
  for (KubeNode* n : t.all) REQUIRE(n->service->Start().ok());
  t.Mesh();
  t.Run(400ms);
  FabricHealthView v = t.a.service->Health();
  for (int r : {0, 1}) {
    CHECK(Rail(v, r).paths == 2);
    CHECK(Rail(v, r).usable == 2);
    CHECK_FALSE(Rail(v, r).down);
  }
  CHECK(t.a.routes.routes.size() == 2);

  // b's link on rail 0 dies silently: b's rail 0 is down (every path), a's
  // rail 0 still delivers to c and names b as failed.
  t.net.Cut(kHostB, 0);
  t.Run(300ms);
  FabricHealthView vb = t.b.service->Health();
  CHECK(Rail(vb, 0).down);
  CHECK(Rail(vb, 0).failed_peers == std::vector<std::string>{"a", "c"});
  CHECK_FALSE(Rail(vb, 1).down);
  REQUIRE(vb.last_flap.has_value());  // b's own link: b's rail flapped
  CHECK(*vb.last_flap <= t.clock.Wall());
  CHECK(vb.flaps_last_hour == 1);
  FabricHealthView va = t.a.service->Health();
  CHECK_FALSE(Rail(va, 0).down);
  CHECK(Rail(va, 0).failed_peers == std::vector<std::string>{"b"});
  CHECK_FALSE(va.last_flap.has_value());  // only b's path failed: not a flap of a's rail
  CHECK(va.flaps_last_hour == 0);

  // c leaves the policy: a stops probing it and removes its pin, and c's
  // series leave the metrics (no gauge keeps reporting a peer that left).
  CHECK(t.a.registry.Render().find("peer=\"c\"") != std::string::npos);
  t.a.service->SetPeers({Peer("b", kHostB)}, {});
  t.Run(300ms);
  const std::string page = t.a.registry.Render();
  for (const char* family : {"lockstep_fabric_path_state{", "lockstep_fabric_path_loss_ratio{",
                             "lockstep_fabric_path_rtt_seconds{", "lockstep_fabric_peer_rail{",
                             "lockstep_fabric_probes_sent_total{"}) {
    INFO(family);
    CHECK(page.find(std::string(family) + "peer=\"c\"") == std::string::npos);
    CHECK(page.find(std::string(family) + "peer=\"b\"") != std::string::npos);
  }
  CHECK(t.a.routes.routes.size() == 1);
  CHECK(t.a.routes.routes.count({kHostC, 32}) == 0);
  for (const auto& p : t.a.service->monitor().Paths(t.clock.Monotonic())) CHECK(p.path.peer == "b");
  CHECK(t.a.service->Health().peers == 1);
}

TEST_CASE("a peer set change renumbers the paths, probes and acks of the paths kept go on without a miss",
          "[daemonset][fabric][kube]") {
  Trio t;
  for (KubeNode* n : t.all) REQUIRE(n->service->Start().ok());
  t.Mesh();
  t.Run(400ms);
  auto misses = [&](const std::string& peer) {
    uint64_t n = 0;
    for (const auto& v : t.a.service->monitor().Paths(t.clock.Monotonic())) {
      if (v.path.peer == peer) n += v.stats.misses;
    }
    return n;
  };
  // a stops probing b (c's paths move to ids 0 and 1) but still answers it
  // (ack-only packets), then probes it again (b's paths after c's on each
  // rail again, their seqs going on from where they were).
  t.a.service->SetPeers({Peer("c", kHostC)}, {Peer("b", kHostB)});
  t.Run(300ms);
  REQUIRE(t.a.service->monitor().size() == 2);
  t.a.service->SetPeers({Peer("b", kHostB), Peer("c", kHostC)}, {});
  t.Run(300ms);
  REQUIRE(t.a.service->monitor().size() == 4);
  for (const auto& v : t.a.service->monitor().Paths(t.clock.Monotonic())) {
    INFO(fabric::ToString(v.path));
    CHECK(v.state == fabric::PathState::kUp);
    CHECK(v.stats.replies > 0);
  }
  CHECK(misses("b") == 0);
  CHECK(misses("c") == 0);
  // b's paths to a stayed up throughout: a acked them alone meanwhile.
  CHECK(t.b.service->monitor().State({0, "a", 0}) == fabric::PathState::kUp);
  CHECK(t.b.service->monitor().State({1, "a", 0}) == fabric::PathState::kUp);
}

TEST_CASE("a rail's flap alert is handed over once per raise", "[daemonset][fabric][kube]") {
  Trio t;  // flapAlertPerHour 1
  for (KubeNode* n : t.all) REQUIRE(n->service->Start().ok());
  t.Mesh();
  t.Run(400ms);
  CHECK(t.b.service->TakeFlapAlerts().empty());
  for (int i = 0; i < 3; ++i) {
    t.net.Cut(kHostB, 0);
    t.Run(300ms);
    t.net.Cut(kHostB, 0, false);
    t.Run(20s);  // re-admitted (hold-down grows with each flap)
  }
  std::vector<FabricFlapAlert> alerts = t.b.service->TakeFlapAlerts();
  REQUIRE(alerts.size() == 1);  // raised at the second flap, not again while above
  CHECK(alerts[0].rail == "rail0");
  CHECK(alerts[0].flaps_last_hour == 2);
  CHECK(alerts[0].threshold == 1);
  CHECK(t.b.service->TakeFlapAlerts().empty());
  CHECK(t.b.service->Health().rails[0].alerting);
  CHECK(t.b.service->Health().rails[0].flaps_last_hour == 3);
}

// --- the FabricHealth status ---

AgentReport Report(std::vector<RailReport> rails) {
  AgentReport r;
  r.node_name = "gpu-node-0";
  r.clock.state = ClockSyncState::kLocked;
  r.clock.has_model = true;
  r.clock.error_bound_ns = 90;
  r.fabric = FabricSnapshot{.host_address = "10.0.200.1", .rails = std::move(rails)};
  return r;
}
RailReport Up(const std::string& name, int peers = 3) { return {.name = name, .paths = peers, .usable = peers}; }
RailReport Down(const std::string& name, std::vector<std::string> peers) {
  int n = static_cast<int>(peers.size());
  return {.name = name, .paths = n, .usable = 0, .down = true, .failed_peers = std::move(peers)};
}
const Json& Cond(const Json& status, const std::string& type) {
  static const Json kNull;
  for (const Json& c : status["conditions"]) {
    if (c["type"] == type) return c;
  }
  return kNull;
}

TEST_CASE("FabricHealth from the fabric: rails up/total, one condition per rail, Ready and phase",
          "[daemonset][fabric][kube]") {
  Json s = BuildStatus(nullptr, Report({Up("rail0"), Up("rail1")}), "2026-01-01T00:00:00Z");
  CHECK(s["railsUp"] == 2);
  CHECK(s["railsTotal"] == 2);
  CHECK(s["hostAddress"] == "10.0.200.1");
  CHECK(s["phase"] == "Healthy");
  CHECK(Cond(s, "Ready")["status"] == "True");
  CHECK(Cond(s, "Rail-rail0")["status"] == "True");
  CHECK(Cond(s, "Rail-rail0")["reason"] == "RailUp");
  CHECK(Cond(s, "Rail-rail1")["status"] == "True");

  AgentReport one_down = Report({Down("rail0", {"gpu-node-1", "gpu-node-2"}), Up("rail1")});
  one_down.fabric->flaps_last_hour = 4;
  one_down.fabric->last_flap_time = "2026-01-01T00:00:05Z";
  Json d = BuildStatus(s, one_down, "2026-01-01T00:00:10Z");
  CHECK(d["railsUp"] == 1);
  CHECK(d["railsTotal"] == 2);
  CHECK(d["flapsLastHour"] == 4);
  CHECK(d["lastFlapTime"] == "2026-01-01T00:00:05Z");
  CHECK(d["phase"] == "Degraded");
  CHECK(Cond(d, "Ready")["status"] == "False");
  CHECK(Cond(d, "Ready")["reason"] == "RailDown");
  CHECK(Cond(d, "Ready")["message"].get<std::string>().find("rail0") != std::string::npos);
  CHECK(Cond(d, "Rail-rail0")["status"] == "False");
  CHECK(Cond(d, "Rail-rail0")["reason"] == "RailDown");
  CHECK(Cond(d, "Rail-rail0")["message"].get<std::string>().find("gpu-node-1, gpu-node-2") != std::string::npos);
  CHECK(Cond(d, "Rail-rail0")["lastTransitionTime"] == "2026-01-01T00:00:10Z");
  CHECK(Cond(d, "Rail-rail1")["lastTransitionTime"] == "2026-01-01T00:00:00Z");  // unchanged

  Json all = BuildStatus(d, Report({Down("rail0", {"x"}), Down("rail1", {"x"})}), "2026-01-01T00:00:20Z");
  CHECK(all["railsUp"] == 0);
  CHECK(all["phase"] == "Failed");

  // Clock trouble and no rail down: the clock decides, as before.
  AgentReport holdover = Report({Up("rail0"), Up("rail1")});
  holdover.clock.state = ClockSyncState::kHoldover;
  CHECK(Assess(holdover).reason == Assess(holdover.clock).reason);
}

TEST_CASE("a rail without peers counts as up (Unknown), a peer's own failure leaves the rail up",
          "[daemonset][fabric][kube]") {
  Json s = BuildStatus(nullptr, Report({{.name = "rail0"}, {.name = "rail1"}}), "2026-01-01T00:00:00Z");
  CHECK(s["railsUp"] == 2);
  CHECK(s["phase"] == "Healthy");
  CHECK(Cond(s, "Rail-rail0")["status"] == "Unknown");
  CHECK(Cond(s, "Rail-rail0")["reason"] == "NoPeers");

  RailReport partial{.name = "rail0", .paths = 3, .usable = 2, .failed_peers = {"gpu-node-3"}};
  Json p = BuildStatus(nullptr, Report({partial, Up("rail1")}), "2026-01-01T00:00:00Z");
  CHECK(p["railsUp"] == 2);
  CHECK(Cond(p, "Ready")["status"] == "True");
  CHECK(Cond(p, "Rail-rail0")["status"] == "True");
  CHECK(Cond(p, "Rail-rail0")["reason"] == "PathsDown");
  CHECK(Cond(p, "Rail-rail0")["message"].get<std::string>().find("gpu-node-3") != std::string::npos);
}

TEST_CASE("a prober stalling beyond its excuse budget is the ProberStalled condition, it goes with fabric",
          "[daemonset][fabric][kube]") {
  Json s = BuildStatus(nullptr, Report({Up("rail0"), Up("rail1")}), "2026-01-01T00:00:00Z");
  CHECK(Cond(s, "ProberStalled")["status"] == "False");
  CHECK(Cond(s, "ProberStalled")["reason"] == "OnTime");
  AgentReport stalled = Report({Up("rail0"), Up("rail1")});
  stalled.fabric->prober_stalled = true;
  CHECK(ReportSignature(stalled) != ReportSignature(Report({Up("rail0"), Up("rail1")})));  // written at once
  Json t = BuildStatus(s, stalled, "2026-01-01T00:00:10Z");
  CHECK(Cond(t, "ProberStalled")["status"] == "True");
  CHECK(Cond(t, "ProberStalled")["reason"] == "StallsNotExcused");
  CHECK(Cond(t, "ProberStalled")["message"].get<std::string>().find("SCHED_FIFO") != std::string::npos);
  CHECK(Cond(t, "ProberStalled")["lastTransitionTime"] == "2026-01-01T00:00:10Z");
  CHECK(Cond(t, "Ready")["status"] == "True");  // the rails decide Ready
  AgentReport plain = Report({});
  plain.fabric.reset();
  CHECK(Cond(BuildStatus(t, plain, "t"), "ProberStalled").is_null());
}

TEST_CASE("an always-late prober spends its excuses: the health view, the gauge and FabricHealth say so, on time "
          "again, they clear after a stall window",
          "[daemonset][fabric][kube]") {
  Trio t;
  t.Mesh();
  t.Run(300ms);
  auto stalled = [&] { return t.a.service->Health().prober_stalled; };
  auto gauge = [&] { return t.a.registry.Gauge("lockstep_fabric_prober_stalled", "").Get(); };
  REQUIRE_FALSE(stalled());
  // Woken every 20 ms: most wake-ups are past their due time by more than
  // the 5 ms urgent timeout (a stall each).
  for (int i = 0; i < 100; ++i) {
    t.clock.Advance(20ms);
    for (KubeNode* n : t.all) n->service->RunOnce(0ns);
  }
  t.Run(50ms);  // a change is published within 20 ms
  CHECK(stalled());
  CHECK(gauge() == 1);
  const FabricHealthView v = t.a.service->Health();
  CHECK(v.stalls > 20);
  CHECK(v.stalls_judged == v.stalls - 5);  // the budget: 5 per 10 s
  CHECK(t.a.registry.Counter("lockstep_fabric_prober_stalls_judged_total", "").Get() ==
        static_cast<double>(v.stalls_judged));
  Json s = BuildStatus(nullptr, [&] {
    AgentReport r = Report({});
    r.fabric = FabricSnapshotOf(v, "10.0.200.1");
    return r;
  }(), "t");
  CHECK(Cond(s, "ProberStalled")["status"] == "True");
  t.Run(10s + 1100ms);  // on time for a whole stall window (and a publish)
  CHECK_FALSE(stalled());
  CHECK(gauge() == 0);
}

TEST_CASE("rail conditions of rails no longer configured are removed, others' conditions kept",
          "[daemonset][fabric][kube]") {
  Json s = BuildStatus(nullptr, Report({Up("rail0"), Up("rail1")}), "t");
  s["conditions"].push_back({{"type", "PolicyConflict"}, {"status", "False"}});
  Json t = BuildStatus(s, Report({Up("rail0")}), "t");
  CHECK(Cond(t, "Rail-rail1").is_null());
  CHECK_FALSE(Cond(t, "Rail-rail0").is_null());
  CHECK_FALSE(Cond(t, "PolicyConflict").is_null());
  // Without fabric: no rail conditions and no host address.
  AgentReport plain = Report({});
  plain.fabric.reset();
  plain.rails_up = plain.rails_total = 1;
  Json u = BuildStatus(t, plain, "t");
  CHECK(Cond(u, "Rail-rail0").is_null());
  CHECK_FALSE(u.contains("hostAddress"));
  CHECK(u["railsTotal"] == 1);
}

TEST_CASE("rail condition types satisfy metav1.Condition's type pattern", "[daemonset][fabric][kube]") {
  const std::regex pattern(
      R"(^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$)");
  for (const std::string name : {"rail0", "eth1.100", "ib0@x", "enp1s0f0-", "r:1", "___"}) {
    const std::string type = RailConditionType(name);
    INFO(name << " -> " << type);
    CHECK(std::regex_match(type, pattern));
    CHECK(type.rfind("Rail-", 0) == 0);
  }
  CHECK(RailConditionType("rail0") == "Rail-rail0");
  CHECK(RailConditionType("eth1.100") == "Rail-eth1.100");
}

// --- the reporter's rate limit ---

TEST_CASE("paths flapping every second cost at most one FabricHealth write per report interval",
          "[daemonset][fabric][kube]") {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  metrics::Registry registry;
  AgentReport report = Report({Up("rail0"), Up("rail1")});
  ReporterOptions o{.node_name = "gpu-node-0", .interval = 10s, .heartbeat = 30s};
  FabricHealthReporter reporter(api, clock, [&] { return report; }, o, registry);
  Json obj = {{"apiVersion", "lockstep.dev/v1alpha1"},
              {"kind", "FabricHealth"},
              {"metadata", {{"name", "gpu-node-0"}, {"labels", {{"lockstep.dev/policy", "default"}}}}}};
  REQUIRE(api.Create(kube::gvr::kFabricHealths, "", obj).ok());
  REQUIRE(reporter.Tick() == FabricHealthReporter::Outcome::kWritten);
  const uint64_t base = api.WriteCount();

  // Two minutes of rail0 going down and up every second, ticking every 250 ms.
  const int seconds = 120;
  for (int ms = 0; ms < seconds * 1000; ms += 250) {
    clock.Advance(250ms);
    report.fabric->rails[0] = (ms / 1000) % 2 == 0 ? Down("rail0", {"gpu-node-1"}) : Up("rail0");
    report.fabric->flaps_last_hour = ms / 2000;
    (void)reporter.Tick();
  }
  const uint64_t writes = api.WriteCount() - base;
  CHECK(writes >= 1);
  CHECK(writes <= static_cast<uint64_t>(seconds / 10));

  // A change is still written at once when the last write is an interval old.
  report.fabric->rails[0] = Up("rail0");
  clock.Advance(11s);
  (void)reporter.Tick();
  report.fabric->rails[0] = Down("rail0", {"gpu-node-1"});
  clock.Advance(10s);
  const uint64_t before = api.WriteCount();
  REQUIRE(reporter.Tick() == FabricHealthReporter::Outcome::kWritten);
  CHECK(api.WriteCount() == before + 1);
  auto st = (*api.Peek(kube::gvr::kFabricHealths, "", "gpu-node-0"))["status"];
  CHECK(st["railsUp"] == 1);
}

TEST_CASE("a state change right after a write waits for the end of the interval", "[daemonset][fabric][kube]") {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  metrics::Registry registry;
  AgentReport report = Report({Up("rail0"), Up("rail1")});
  FabricHealthReporter reporter(api, clock, [&] { return report; },
                                ReporterOptions{.node_name = "gpu-node-0", .interval = 10s}, registry);
  REQUIRE(api.Create(kube::gvr::kFabricHealths, "",
                     {{"apiVersion", "lockstep.dev/v1alpha1"},
                      {"kind", "FabricHealth"},
                      {"metadata", {{"name", "gpu-node-0"}}}})
              .ok());
  REQUIRE(reporter.Tick() == FabricHealthReporter::Outcome::kWritten);
  report.fabric->rails[1] = Down("rail1", {"gpu-node-2"});
  clock.Advance(1s);
  CHECK(reporter.Tick() == FabricHealthReporter::Outcome::kNotDue);
  clock.Advance(8s);
  CHECK(reporter.Tick() == FabricHealthReporter::Outcome::kNotDue);
  clock.Advance(1s);
  REQUIRE(reporter.Tick() == FabricHealthReporter::Outcome::kWritten);
  CHECK((*api.Peek(kube::gvr::kFabricHealths, "", "gpu-node-0"))["status"]["railsUp"] == 1);
}

// --- Events, snapshots and the peer hand-off ---

TEST_CASE("a flap alert becomes one Warning Event on the node's FabricHealth", "[daemonset][fabric][kube]") {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  kube::EventRecorder events(api, clock, {.component = "lockstep-agent", .host = "gpu-node-0"});
  Json health = {{"apiVersion", "lockstep.dev/v1alpha1"},
                 {"kind", "FabricHealth"},
                 {"metadata", {{"name", "gpu-node-0"}, {"uid", "u-1"}}}};
  RecordFlapAlert(events, health, "gpu-node-0", {"rail1", 9, 8});
  auto list = api.Objects(kube::gvr::kEvents);
  REQUIRE(list.size() == 1);
  const Json& e = list[0];
  CHECK(e["type"] == "Warning");
  CHECK(e["reason"] == kFlapAlertReason);
  CHECK(e["involvedObject"]["kind"] == "FabricHealth");
  CHECK(e["involvedObject"]["name"] == "gpu-node-0");
  CHECK(e["metadata"]["namespace"] == "default");
  CHECK(e["message"].get<std::string>().find("rail1") != std::string::npos);
  // Before the first read of the FabricHealth: a reference by name.
  RecordFlapAlert(events, std::nullopt, "gpu-node-0", {"rail0", 10, 8});
  REQUIRE(api.Objects(kube::gvr::kEvents).size() == 2);
}

TEST_CASE("the report's fabric part mirrors the service's view", "[daemonset][fabric][kube]") {
  FabricHealthView v;
  v.rails = {{.name = "rail0", .paths = 2, .usable = 0, .failed = 2, .down = true, .flaps_last_hour = 3,
              .failed_peers = {"b", "c"}},
             {.name = "rail1", .paths = 2, .usable = 2}};
  v.flaps_last_hour = 3;
  v.last_flap = WallTime{std::chrono::seconds(1'800'000'000)};
  FabricSnapshot f = FabricSnapshotOf(v, "10.0.200.7");
  CHECK(f.host_address == "10.0.200.7");
  REQUIRE(f.rails.size() == 2);
  CHECK(f.rails[0].down);
  CHECK(f.rails[0].failed_peers == std::vector<std::string>{"b", "c"});
  CHECK(f.rails[1].usable == 2);
  CHECK(f.flaps_last_hour == 3);
  CHECK(f.last_flap_time == kube::FormatRfc3339(*v.last_flap));
}

TEST_CASE("fabric peers: clock sync's selection with host addresses, every known node with one is answered",
          "[daemonset][fabric][kube]") {
  auto health = [](const std::string& name, const std::string& host) {
    Json h = {{"metadata", {{"name", name}, {"labels", {{"lockstep.dev/policy", "default"}}}}},
              {"status", {{"probeAddresses", {"10.0.0.9:7311"}}}}};
    if (!host.empty()) h["status"]["hostAddress"] = host;
    return h;
  };
  std::vector<Json> healths = {health("n0", "10.0.200.1"), health("n1", "10.0.200.2"), health("n2", ""),
                               health("n3", "not-an-ip"), health("n4", "10.0.200.5")};
  PeerDirectory dir = BuildPeerDirectory(healths, {}, {.self = "n0", .policy = "default"});
  CHECK(dir.host_addresses == std::map<std::string, std::string>{{"n1", "10.0.200.2"}, {"n4", "10.0.200.5"}});

  PeerSet set;
  set.known = dir.known;
  set.host_addresses = dir.host_addresses;
  for (const PeerTarget& p : dir.candidates) {
    if (p.name == "n1" || p.name == "n2") set.selected.push_back(p);  // what rendezvous picked
  }
  FabricPeerSet f = FabricPeersOf(set);
  REQUIRE(f.probed.size() == 1);
  CHECK(f.probed[0] == FabricPeer{"n1", NodeIdFromName("n1"), *ParseIpv4("10.0.200.2")});
  REQUIRE(f.known.size() == 2);
  CHECK(f.known[0].name == "n1");
  CHECK(f.known[1].name == "n4");
}

}  // namespace
}  // namespace lockstep::agent
