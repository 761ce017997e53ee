// FabricPublisher: what the fabric service publishes (gauges, counters, the
// status snapshot, the health view, flap alerts), from a PathMonitor and the
// decisions it is fed, on a fake clock.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../support/fake_clock.h"
#include "lockstep/agent/runtime/fabric_publisher.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

const uint32_t kSelf = *ParseIpv4("10.0.200.1");

FabricSetup Setup() {
  FabricSetup s;
  s.host_address = kSelf;
  s.rails = {{"rail0", 1, 0, {*ParseIpv4("10.0.100.1"), "rail0", true}},
             {"rail1", 2, 0, {*ParseIpv4("10.0.100.2"), "rail1", true}}};
  s.peers = {{"b", NodeIdFromName("b"), *ParseIpv4("10.0.200.2")},
             {"c", NodeIdFromName("c"), *ParseIpv4("10.0.200.3")}};
  return s;
}

// (A string argument: GCC 12's -Wrestrict misfires on assigning a short literal.)
fabric::FabricOptions Options(const std::string& self) {
  fabric::FabricOptions o;
  o.self = self;
  return o;
}

struct Fixture {
  Fixture() { (void)monitor.SetPaths(fabric::EnumeratePaths(2, {"b", "c"}), clock.Monotonic()); }
  double Value(const std::string& family, const metrics::LabelValues& lv) {
    return registry.Counter(family, "").Get(lv);
  }
  FakeClock clock;
  std::string self = "a";
  FabricSetup setup = Setup();
  fabric::FabricOptions fabric = Options(self);
  metrics::Registry registry;
  fabric::PathMonitor monitor{fabric, 1};
  FabricPublisher publisher{self, setup, fabric, 1s, clock, registry};
};

TEST_CASE("publisher: the snapshot, the gauges and the health view follow the monitor", "[daemonset][fabric]") {
  Fixture f;
  const MonoTime now = f.clock.Monotonic();
  CHECK(f.publisher.Due(now));
  f.publisher.Publish(now, f.monitor);
  CHECK_FALSE(f.publisher.Due(now + 999ms));
  CHECK(f.publisher.Due(now + 1s));

  const nlohmann::json s = f.publisher.StatusJson();
  CHECK(s["node"] == "a");
  CHECK(s["host_address"] == "10.0.200.1");
  REQUIRE(s["paths"].size() == 4);
  CHECK(s["paths"][0]["interface"] == "rail0");
  CHECK(s["paths"][0]["state"] == "unknown");
  REQUIRE(s["rails"].size() == 2);
  CHECK(s["rails"][1]["interface"] == "rail1");
  CHECK(s["rails"][1]["gateway"] == "10.0.100.2");
  REQUIRE(s["peers"].size() == 2);
  CHECK(s["peers"][0]["via"] == "ecmp");
  CHECK(s["peers"][0]["route"].is_null());

  CHECK(f.Value("lockstep_fabric_path_state", {"b", "rail0", "unknown"}) == 1);
  CHECK(f.Value("lockstep_fabric_path_state", {"b", "rail0", "up"}) == 0);
  CHECK(f.Value("lockstep_fabric_peer_rail", {"b"}) == -1);
  CHECK(f.Value("lockstep_fabric_flaps_total", {"rail1"}) == 0);  // present from the start

  const FabricHealthView h = f.publisher.Health();
  REQUIRE(h.rails.size() == 2);
  CHECK(h.rails[0].name == "rail0");
  CHECK(h.rails[0].paths == 2);
  CHECK(h.peers == 2);
  CHECK_FALSE(h.prober_stalled);
  CHECK_FALSE(h.last_flap);
}

TEST_CASE("publisher: a decision is published within the change gap, flaps and alerts are counted by rail name",
          "[daemonset][fabric]") {
  Fixture f;
  const MonoTime now = f.clock.Monotonic();
  f.publisher.Publish(now, f.monitor);
  f.publisher.OnDecisions({});
  CHECK_FALSE(f.publisher.Due(now + 20ms));  // nothing decided

  fabric::Decisions d;
  d.flaps.push_back({.rail = 1, .at = now});
  d.alerts.push_back({.rail = 1, .flaps_in_window = 9, .at = now});
  d.alerts.push_back({.rail = 7, .flaps_in_window = 9, .at = now});  // a rail we do not have: by number
  f.publisher.OnDecisions(d);
  CHECK_FALSE(f.publisher.Due(now + 19ms));
  CHECK(f.publisher.Due(now + 20ms));
  CHECK(f.Value("lockstep_fabric_flaps_total", {"rail1"}) == 1);
  CHECK(f.Value("lockstep_fabric_flap_alerts_total", {"rail1"}) == 1);
  CHECK(f.Value("lockstep_fabric_flap_alerts_total", {"7"}) == 1);

  const std::vector<FabricFlapAlert> alerts = f.publisher.TakeFlapAlerts();
  REQUIRE(alerts.size() == 2);
  CHECK(alerts[0].rail == "rail1");
  CHECK(alerts[0].flaps_last_hour == 9);
  CHECK(alerts[0].threshold == f.fabric.flap_alert_per_hour);
  CHECK(alerts[1].rail == "7");
  CHECK(f.publisher.TakeFlapAlerts().empty());  // each raise once

  f.publisher.Publish(now + 20ms, f.monitor);
  CHECK(f.publisher.Health().last_flap == f.clock.Wall());
}

TEST_CASE("publisher: stalls are counted, a judged one is published at once", "[daemonset][fabric]") {
  Fixture f;
  const MonoTime now = f.clock.Monotonic();
  // Both counters are exported at 0 before the first stall (rate() and the
  // dashboards need the series to exist).
  const std::string text = f.registry.Render();
  CHECK(text.find("lockstep_fabric_prober_stalls_total 0") != std::string::npos);
  CHECK(text.find("lockstep_fabric_prober_stalls_judged_total 0") != std::string::npos);
  f.publisher.Publish(now, f.monitor);
  f.publisher.NoteStall(now, 60ms, fabric::Stall::kExcused);
  CHECK(f.Value("lockstep_fabric_prober_stalls_total", {}) == 1);
  CHECK(f.Value("lockstep_fabric_prober_stalls_judged_total", {}) == 0);
  CHECK_FALSE(f.publisher.Due(now + 20ms));
  f.publisher.NoteStall(now, 60ms, fabric::Stall::kJudged);
  CHECK(f.Value("lockstep_fabric_prober_stalls_total", {}) == 2);
  CHECK(f.Value("lockstep_fabric_prober_stalls_judged_total", {}) == 1);
  CHECK(f.publisher.Due(now + 20ms));
}

TEST_CASE("publisher: ack-only packets are counted at the publish, a peer that left takes its series along",
          "[daemonset][fabric]") {
  Fixture f;
  const MonoTime now = f.clock.Monotonic();
  f.publisher.CountAnswered("b");
  f.publisher.CountAnswered("b");
  CHECK(f.Value("lockstep_fabric_probes_answered_total", {"b"}) == 0);
  f.publisher.Publish(now, f.monitor);
  CHECK(f.Value("lockstep_fabric_probes_answered_total", {"b"}) == 2);

  CHECK(f.publisher.ForgetPeersExcept({"b", "c"}).empty());
  const std::string before = f.registry.Render();
  CHECK(before.find("peer=\"c\"") != std::string::npos);
  CHECK(f.publisher.ForgetPeersExcept({"b"}) == std::vector<std::string>{"c"});
  const std::string after = f.registry.Render();
  CHECK(after.find("lockstep_fabric_path_state{peer=\"c\"") == std::string::npos);
  CHECK(after.find("lockstep_fabric_peer_rail{peer=\"c\"") == std::string::npos);
  CHECK(after.find("lockstep_fabric_path_state{peer=\"b\"") != std::string::npos);
}

// Runs `f` with stderr (where the log goes) in a temporary file; returns what it wrote.
template <typename F>
std::string CaptureStderr(F f) {
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  REQUIRE(tmp != nullptr);
  const int saved = ::dup(2);
  ::dup2(::fileno(tmp), 2);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string out;
  std::rewind(tmp);
  for (int c; (c = std::fgetc(tmp)) != EOF;) out.push_back(static_cast<char>(c));
  std::fclose(tmp);
  return out;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST_CASE("publisher: in a flap storm a change is published at most every ms a path, and transitions are logged at "
          "most 32 a second (every one into down is)",
          "[daemonset][fabric]") {
  Fixture f;
  CHECK(f.publisher.ChangeGap() == 20ms);  // a few paths: as before
  f.publisher.SetPathCount(128);
  CHECK(f.publisher.ChangeGap() == 128ms);
  const MonoTime t0 = f.clock.Monotonic();
  f.publisher.Publish(t0, f.monitor);
  fabric::Decisions d;
  d.transitions.push_back({{0, "b", 0}, fabric::PathState::kUp, fabric::PathState::kSuspect, t0, false});
  f.publisher.OnDecisions(d);
  CHECK_FALSE(f.publisher.Due(t0 + 127ms));
  CHECK(f.publisher.Due(t0 + 128ms));

  // 1,000 transitions in a second, 100 of them into down: the 100, 32 more
  // and one line that counts the rest.
  const std::string logged = CaptureStderr([&] {
    for (int i = 0; i < 1000; ++i) {
      fabric::Decisions storm;
      const bool down = i % 10 == 9;
      storm.transitions.push_back({{i % 2, "c", 0}, down ? fabric::PathState::kRecovering : fabric::PathState::kDown,
                                   down ? fabric::PathState::kDown : fabric::PathState::kRecovering,
                                   t0 + 1s + std::chrono::milliseconds(i), down});
      f.publisher.OnDecisions(storm);
    }
    fabric::Decisions later;
    later.transitions.push_back(
        {{0, "c", 0}, fabric::PathState::kRecovering, fabric::PathState::kUp, t0 + 2s + 500ms, false});
    f.publisher.OnDecisions(later);
  });
  CHECK(Count(logged, "fabric path state changed") == 100 + 32 + 1);
  CHECK(Count(logged, "\"to\":\"down\"") == 100);
  REQUIRE(Count(logged, "not logged one by one") == 1);
  CHECK(Count(logged, "\"transitions\":\"868\"") == 1);
}

}  // namespace
}  // namespace lockstep::agent
