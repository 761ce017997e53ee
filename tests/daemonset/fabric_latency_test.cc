// Latency SLAs in the agent: the publisher judges the paths' one-way delay
// p99 (gauges lockstep_fabric_path_owd_sla_seconds and
// lockstep_fabric_path_latency_breach, the health view, breaches handed over
// for Events), FabricHealth's LatencyWithinSLA condition, and the Warning
// Event per breach. A PathMonitor fed replies with one-way delays, a fake
// clock and the fake Kubernetes API.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "../support/fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/agent/kube/health_status.h"
#include "lockstep/agent/kube/kube_agent.h"
#include "lockstep/agent/runtime/fabric_publisher.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;
using kube::Json;

FabricSetup Setup() {
  FabricSetup s;
  s.host_address = *ParseIpv4("10.0.200.1");
  s.rails = {{"rail0", 1, 0, {*ParseIpv4("10.0.100.1"), "rail0", true}},
             {"rail1", 2, 0, {*ParseIpv4("10.0.100.2"), "rail1", true}}};
  s.peers = {{"b", NodeIdFromName("b"), *ParseIpv4("10.0.200.2")},
             {"c", NodeIdFromName("c"), *ParseIpv4("10.0.200.3")}};
  return s;
}

fabric::FabricOptions Options(const std::string& self) {
  fabric::FabricOptions o;
  o.self = self;
  return o;
}

// SLA 100 us on every rail, 20 us on rail1.
fabric::LatencySlaOptions Sla() {
  fabric::LatencySlaOptions o;
  o.all_rails = 100us;
  o.per_rail[1] = 20us;
  o.min_samples = 50;
  return o;
}

struct Fixture {
  explicit Fixture(fabric::LatencySlaOptions sla = Sla())
      : publisher{self, setup, fabric, 1s, clock, registry, std::move(sla)} {
    (void)monitor.SetPaths(fabric::EnumeratePaths(2, {"b", "c"}), clock.Monotonic());
  }
  double Gauge(const std::string& family, const metrics::LabelValues& lv) { return registry.Gauge(family, "").Get(lv); }
  // The series {peer, rail} is rendered.
  bool HasGauge(const std::string& family, const metrics::LabelValues& lv) {
    return registry.Render().find(family + "{peer=\"" + lv.at(0) + "\",rail=\"" + lv.at(1) + "\"}") !=
           std::string::npos;
  }
  // `n` probes on every path, each answered after 50 us with the path's
  // one-way delay (owd(path)), 1 ms apart.
  template <typename Owd>
  void Feed(int n, Owd owd) {
    for (int i = 0; i < n; ++i) {
      now += 1ms;
      for (fabric::PathId id = 0; id < monitor.size(); ++id) {
        monitor.OnProbeSent(id, ++seq, now);
        (void)monitor.OnReply(id, {.seq = seq, .received = now + 50us, .one_way_delay = owd(monitor.Key(id))});
      }
    }
    now += 1ms;
  }
  FakeClock clock;
  std::string self = "a";
  FabricSetup setup = Setup();
  fabric::FabricOptions fabric = Options(self);
  metrics::Registry registry;
  fabric::PathMonitor monitor{fabric, 1};
  FabricPublisher publisher;
  MonoTime now = clock.Monotonic();
  uint64_t seq = 0;
};

Nanos Healthy(const fabric::PathKey& p) { return p.rail == 1 ? 10us : 40us; }

TEST_CASE("latency SLA in the publisher: the SLA in force and the breach flag per path, within",
          "[daemonset][fabric]") {
  Fixture f;
  f.Feed(60, Healthy);
  f.publisher.Publish(f.now, f.monitor, true);
  CHECK(f.Gauge("lockstep_fabric_path_owd_sla_seconds", {"b", "rail0"}) == Approx(100e-6));
  CHECK(f.Gauge("lockstep_fabric_path_owd_sla_seconds", {"c", "rail1"}) == Approx(20e-6));
  CHECK(f.Gauge("lockstep_fabric_path_latency_breach", {"b", "rail0"}) == 0);
  CHECK(f.Gauge("lockstep_fabric_path_latency_breach", {"c", "rail1"}) == 0);
  const FabricLatencyView v = f.publisher.Health().latency;
  CHECK(v.verdict == fabric::LatencyVerdict::kWithin);
  CHECK(v.with_sla == 4);
  CHECK(v.judged == 4);
  CHECK(v.breaches == 0);
  CHECK(f.publisher.TakeLatencyBreaches().empty());
  const nlohmann::json s = f.publisher.StatusJson();
  CHECK(s["latency"]["verdict"] == "WithinSLA");
  CHECK(s["paths"][0]["owd_sla_ns"] == 100000);
  CHECK(s["paths"][0]["latency"] == "WithinSLA");
}

TEST_CASE("latency SLA in the publisher: a breach sets the flag, names the worst path and asks for one Event",
          "[daemonset][fabric]") {
  Fixture f;
  // b over rail1 at 50 us against 20 (2.5x); c over rail0 at 150 us against 100 (1.5x).
  auto slow = [](const fabric::PathKey& p) -> Nanos {
    if (p.peer == "b" && p.rail == 1) return 50us;
    if (p.peer == "c" && p.rail == 0) return 150us;
    return Healthy(p);
  };
  f.Feed(60, slow);
  f.publisher.Publish(f.now, f.monitor, true);
  CHECK(f.Gauge("lockstep_fabric_path_latency_breach", {"b", "rail1"}) == 1);
  CHECK(f.Gauge("lockstep_fabric_path_latency_breach", {"c", "rail0"}) == 1);
  CHECK(f.Gauge("lockstep_fabric_path_latency_breach", {"b", "rail0"}) == 0);
  const FabricLatencyView v = f.publisher.Health().latency;
  CHECK(v.verdict == fabric::LatencyVerdict::kBreach);
  CHECK(v.breaches == 2);
  CHECK(v.worst_peer == "b");
  CHECK(v.worst_rail == "rail1");
  CHECK(v.worst_p99 == 50us);
  CHECK(v.worst_sla == 20us);
  std::vector<FabricLatencyBreach> b = f.publisher.TakeLatencyBreaches();
  REQUIRE(b.size() == 2);
  CHECK(b[0].rail == "rail0");
  CHECK(b[0].peer == "c");
  CHECK(b[0].owd_p99 == 150us);
  CHECK(b[0].sla == 100us);
  CHECK(b[0].samples >= 50);
  CHECK(f.publisher.TakeLatencyBreaches().empty());  // handed over once
  f.publisher.Publish(f.now + 1s, f.monitor, true);  // still in breach: no new one
  CHECK(f.publisher.TakeLatencyBreaches().empty());
  CHECK(f.Gauge("lockstep_fabric_path_latency_breach", {"b", "rail1"}) == 1);
}

TEST_CASE("latency SLA in the publisher: not judged while the clock is not LOCKED or with too few delays",
          "[daemonset][fabric]") {
  Fixture f;
  f.Feed(60, [](const fabric::PathKey&) { return 500us; });
  f.publisher.Publish(f.now, f.monitor, false);
  CHECK(f.publisher.Health().latency.verdict == fabric::LatencyVerdict::kClockNotLocked);
  CHECK(f.Gauge("lockstep_fabric_path_latency_breach", {"b", "rail0"}) == 0);
  CHECK(f.publisher.TakeLatencyBreaches().empty());

  Fixture few;
  few.Feed(49, [](const fabric::PathKey&) { return 500us; });
  few.publisher.Publish(few.now, few.monitor, true);
  CHECK(few.publisher.Health().latency.verdict == fabric::LatencyVerdict::kNotEnoughSamples);
  CHECK(few.Gauge("lockstep_fabric_path_latency_breach", {"b", "rail0"}) == 0);
  CHECK(few.publisher.Health().latency.min_samples == 50);
}

TEST_CASE("latency SLA in the publisher: without an SLA the flag is exported at 0 and no SLA series",
          "[daemonset][fabric]") {
  Fixture f{fabric::LatencySlaOptions{}};
  f.Feed(60, [](const fabric::PathKey&) { return 500us; });
  f.publisher.Publish(f.now, f.monitor, true);
  CHECK(f.publisher.Health().latency.verdict == fabric::LatencyVerdict::kNoSla);
  CHECK(f.HasGauge("lockstep_fabric_path_latency_breach", {"b", "rail0"}));
  CHECK(f.Gauge("lockstep_fabric_path_latency_breach", {"b", "rail0"}) == 0);
  CHECK_FALSE(f.HasGauge("lockstep_fabric_path_owd_sla_seconds", {"b", "rail0"}));
}

TEST_CASE("latency SLA in the publisher: a peer that left takes its SLA and breach series along",
          "[daemonset][fabric]") {
  Fixture f;
  f.Feed(60, Healthy);
  f.publisher.Publish(f.now, f.monitor, true);
  REQUIRE(f.HasGauge("lockstep_fabric_path_owd_sla_seconds", {"c", "rail0"}));
  (void)f.publisher.ForgetPeersExcept({"b"});
  CHECK_FALSE(f.HasGauge("lockstep_fabric_path_owd_sla_seconds", {"c", "rail0"}));
  CHECK_FALSE(f.HasGauge("lockstep_fabric_path_latency_breach", {"c", "rail1"}));
  CHECK(f.HasGauge("lockstep_fabric_path_latency_breach", {"b", "rail1"}));
}

Json Cond(const Json& status, const std::string& type) {
  for (const Json& c : status["conditions"]) {
    if (c["type"] == type) return c;
  }
  return nullptr;
}

AgentReport Report(LatencyReport latency) {
  AgentReport r;
  r.node_name = "gpu-node-0";
  r.clock.state = ClockSyncState::kLocked;
  r.clock.error_bound_ns = 100;
  r.fabric = FabricSnapshot{.host_address = "10.0.200.1", .rails = {{.name = "rail0", .paths = 1, .usable = 1}}};
  r.fabric->latency = std::move(latency);
  return r;
}

TEST_CASE("FabricHealth LatencyWithinSLA: True, False naming the worst path, Unknown with its reason",
          "[daemonset][fabric][kube]") {
  const std::string t = "2026-01-01T00:00:00Z";
  Json s = BuildStatus(nullptr, Report({}), t);
  CHECK(Cond(s, "LatencyWithinSLA")["status"] == "Unknown");
  CHECK(Cond(s, "LatencyWithinSLA")["reason"] == "NoSLA");
  s = BuildStatus(nullptr, Report({.verdict = "ClockNotLocked"}), t);
  CHECK(Cond(s, "LatencyWithinSLA")["reason"] == "ClockNotLocked");
  s = BuildStatus(nullptr, Report({.verdict = "NotEnoughSamples", .min_samples = 50}), t);
  CHECK(Cond(s, "LatencyWithinSLA")["status"] == "Unknown");
  CHECK(Cond(s, "LatencyWithinSLA")["reason"] == "NotEnoughSamples");
  CHECK(Cond(s, "LatencyWithinSLA")["message"].get<std::string>().find("50 one-way delays") != std::string::npos);
  s = BuildStatus(nullptr, Report({.verdict = "WithinSLA", .with_sla = 2, .judged = 2}), t);
  CHECK(Cond(s, "LatencyWithinSLA")["status"] == "True");
  CHECK(Cond(s, "LatencyWithinSLA")["reason"] == "WithinSLA");

  const LatencyReport breach{.verdict = "SLABreached",
                             .with_sla = 4,
                             .judged = 4,
                             .breaches = 2,
                             .worst_peer = "gpu-node-3",
                             .worst_rail = "rail1",
                             .worst_p99_ns = 94'300,
                             .worst_sla_ns = 1'000};
  Json b = BuildStatus(s, Report(breach), "2026-01-01T00:00:10Z");
  const Json c = Cond(b, "LatencyWithinSLA");
  CHECK(c["status"] == "False");
  CHECK(c["reason"] == "SLABreached");
  CHECK(c["message"] ==
        "path rail1 -> gpu-node-3: one-way delay p99 94.3 us is above its SLA of 1.0 us; 2 of 4 judged paths in "
        "breach (lockstep-agent fabric status lists them)");
  CHECK(c["lastTransitionTime"] == "2026-01-01T00:00:10Z");
  // Latency does not make the node unready: Ready and the phase are the fabric's and the clock's.
  CHECK(Cond(b, "Ready")["status"] == "True");
  CHECK(b["phase"] == "Healthy");
  // A change of the condition is due for a write at once.
  CHECK(ReportSignature(Report(breach)) != ReportSignature(Report({.verdict = "WithinSLA"})));
  // Without fabric the condition goes.
  AgentReport no_fabric = Report({});
  no_fabric.fabric.reset();
  CHECK(Cond(BuildStatus(b, no_fabric, t), "LatencyWithinSLA").is_null());
}

TEST_CASE("FabricHealth FabricCongested: True naming the links, False for a path alone or none, Unknown before",
          "[daemonset][fabric][kube]") {
  const std::string t = "2026-01-01T00:00:00Z";
  auto with = [](CongestionSummary c) {
    AgentReport r = Report({});
    r.fabric->congestion = std::move(c);
    return r;
  };
  Json s = BuildStatus(nullptr, with({}), t);
  CHECK(Cond(s, "FabricCongested")["status"] == "Unknown");
  CHECK(Cond(s, "FabricCongested")["reason"] == "NotJudged");
  s = BuildStatus(s, with({.judged = 14}), t);
  CHECK(Cond(s, "FabricCongested")["status"] == "False");
  CHECK(Cond(s, "FabricCongested")["reason"] == "NoCongestion");
  const CongestionSummary congested{.judged = 14, .links = {"l0>s0"}, .bad_paths = {"h6/rail1/path0"}};
  Json c = BuildStatus(s, with(congested), "2026-01-01T00:00:10Z");
  CHECK(Cond(c, "FabricCongested")["status"] == "True");
  CHECK(Cond(c, "FabricCongested")["reason"] == "LinkCongested");
  CHECK(Cond(c, "FabricCongested")["message"] ==
        "the one-way delays of the fabric paths crossing l0>s0 rose together above their own baselines: congested; "
        "paths whose delay rose alone: h6/rail1/path0 (lockstep-agent fabric status, \"congestion\")");
  CHECK(Cond(c, "FabricCongested")["lastTransitionTime"] == "2026-01-01T00:00:10Z");
  // Congestion does not make the node unready.
  CHECK(Cond(c, "Ready")["status"] == "True");
  CHECK(c["phase"] == "Healthy");
  Json alone = BuildStatus(c, with({.judged = 14, .bad_paths = {"h6/rail1/path0"}}), t);
  CHECK(Cond(alone, "FabricCongested")["status"] == "False");
  CHECK(Cond(alone, "FabricCongested")["reason"] == "PathDelayRose");
  // Names are capped: 7 links, 5 shown.
  const kube::Condition many =
      CongestionCondition({.judged = 40, .links = {"a>b", "b>c", "c>d", "d>e", "e>f", "f>g", "g>h"}});
  CHECK(many.message.find("a>b, b>c, c>d, d>e, e>f and 2 more") != std::string::npos);
  // A change of the condition, another link included, is due for a write at once.
  CHECK(ReportSignature(with(congested)) != ReportSignature(with({.judged = 14})));
  CHECK(ReportSignature(with(congested)) != ReportSignature(with({.judged = 14, .links = {"l1>s0"}})));
  CHECK(ReportSignature(with(congested)) == ReportSignature(with({.judged = 20, .links = congested.links,
                                                                   .bad_paths = congested.bad_paths})));
  // Without fabric the condition goes.
  AgentReport no_fabric = Report({});
  no_fabric.fabric.reset();
  CHECK(Cond(BuildStatus(c, no_fabric, t), "FabricCongested").is_null());
}

TEST_CASE("congestion findings become Warning Events on the node's FabricHealth", "[daemonset][fabric][kube]") {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  kube::EventRecorder events(api, clock, {.component = "lockstep-agent", .host = "gpu-node-0"});
  Json health = {{"apiVersion", "lockstep.dev/v1alpha1"},
                 {"kind", "FabricHealth"},
                 {"metadata", {{"name", "gpu-node-0"}, {"uid", "u-1"}}}};
  RecordCongestion(events, health, "gpu-node-0",
                   {.kind = CongestionFinding::Kind::kLinkCongested, .links = {"l0>s0"}, .rising = 3, .paths = 3});
  RecordCongestion(events, health, "gpu-node-0",
                   {.kind = CongestionFinding::Kind::kBadPath, .path = "h6/rail1/path0", .p50 = 3020us,
                    .base_p50 = 20us});
  auto list = api.Objects(kube::gvr::kEvents);
  REQUIRE(list.size() == 2);
  std::map<std::string, std::string> by_reason;
  for (const Json& e : list) {
    CHECK(e["type"] == "Warning");
    CHECK(e["involvedObject"]["name"] == "gpu-node-0");
    by_reason[e["reason"]] = e["message"];
  }
  CHECK(by_reason["FabricLinkCongested"] ==
        "fabric link l0>s0 congested, as seen from node gpu-node-0: the one-way delays of 3 of the 3 paths crossing "
        "it rose together (lockstep-agent fabric status, \"congestion\")");
  CHECK(by_reason["FabricPathDelayRose"] ==
        "fabric path h6/rail1/path0 of node gpu-node-0: one-way delay p50 3020 us against its baseline of 20 us, "
        "rising alone (no congested link explains it: the path or the peer's end)");
}

TEST_CASE("the report's congestion part mirrors the service's view", "[daemonset][fabric][kube]") {
  FabricHealthView v;
  v.congestion = {.judged = 9, .links = {"l0>s0", "s0>l1"}, .bad_paths = {"b/rail0/path0"}};
  const CongestionSummary c = FabricSnapshotOf(v, "10.0.200.7").congestion;
  CHECK(c.judged == 9);
  CHECK(c.links == std::vector<std::string>{"l0>s0", "s0>l1"});
  CHECK(c.bad_paths == std::vector<std::string>{"b/rail0/path0"});
}

TEST_CASE("the report's latency part mirrors the service's view", "[daemonset][fabric][kube]") {
  FabricHealthView v;
  v.latency = {.verdict = fabric::LatencyVerdict::kBreach,
               .with_sla = 4,
               .judged = 3,
               .breaches = 1,
               .min_samples = 50,
               .worst_peer = "b",
               .worst_rail = "rail1",
               .worst_p99 = 94us,
               .worst_sla = 1us};
  const LatencyReport l = FabricSnapshotOf(v, "10.0.200.7").latency;
  CHECK(l.verdict == "SLABreached");
  CHECK(l.with_sla == 4);
  CHECK(l.judged == 3);
  CHECK(l.breaches == 1);
  CHECK(l.min_samples == 50);
  CHECK(l.worst_peer == "b");
  CHECK(l.worst_rail == "rail1");
  CHECK(l.worst_p99_ns == 94'000);
  CHECK(l.worst_sla_ns == 1'000);
}

TEST_CASE("a latency SLA breach becomes a Warning Event on the node's FabricHealth", "[daemonset][fabric][kube]") {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  kube::EventRecorder events(api, clock, {.component = "lockstep-agent", .host = "gpu-node-0"});
  Json health = {{"apiVersion", "lockstep.dev/v1alpha1"},
                 {"kind", "FabricHealth"},
                 {"metadata", {{"name", "gpu-node-0"}, {"uid", "u-1"}}}};
  RecordLatencyBreach(events, health, "gpu-node-0", {"gpu-node-3", "rail1", 94300ns, 1us, 700});
  auto list = api.Objects(kube::gvr::kEvents);
  REQUIRE(list.size() == 1);
  const Json& e = list[0];
  CHECK(e["type"] == "Warning");
  CHECK(e["reason"] == "FabricLatencySLABreach");
  CHECK(e["involvedObject"]["kind"] == "FabricHealth");
  CHECK(e["involvedObject"]["name"] == "gpu-node-0");
  CHECK(e["message"] ==
        "fabric path rail1 -> gpu-node-3 of node gpu-node-0: one-way delay p99 94.3 us (over 700 delays) is above "
        "its latency SLA of 1.0 us (FabricPolicy spec.latency); lockstep-agent fabric status shows its paths");
}

}  // namespace
}  // namespace lockstep::agent
