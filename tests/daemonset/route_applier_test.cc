// RouteApplier: the monitor's pin decisions carried out on a fake route
// actuator: start-up adoption, pin/unpin, neighbours released on the rail
// traffic left, failures retried by the reconcile.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../support/fake_clock.h"
#include "../support/fake_route_actuator.h"
#include "lockstep/agent/runtime/route_applier.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

const uint32_t kSelf = *ParseIpv4("10.0.200.1");
const uint32_t kHostB = *ParseIpv4("10.0.200.2");
const uint32_t kHostC = *ParseIpv4("10.0.200.3");

FabricSetup Setup() {
  FabricSetup s;
  s.host_address = kSelf;
  s.rails = {{"rail0", 1, 0, {*ParseIpv4("10.0.100.1"), "rail0", true}},
             {"rail1", 2, 0, {*ParseIpv4("10.0.100.2"), "rail1", true}}};
  s.peers = {{"b", NodeIdFromName("b"), kHostB}, {"c", NodeIdFromName("c"), kHostC}};
  return s;
}

double Changes(metrics::Registry& r, const std::string& action, const std::string& result) {
  return r.Counter("lockstep_fabric_route_changes_total", "", {"action", "result"}).Get({action, result});
}

struct Fixture {
  Fixture() {
    actuator.AddInterface("rail0", true);
    actuator.AddInterface("rail1", true);
  }
  FakeClock clock;
  FakeRouteActuator actuator;
  FabricSetup setup = Setup();
  metrics::Registry registry;
  RouteApplier routes{actuator, clock, setup, 30s, registry};
};

TEST_CASE("route applier: start-up adoption returns the pins found and deletes the routes no peer explains",
          "[daemonset][fabric]") {
  Fixture f;
  const OwnedRoute pin_b = *PinRoute(f.setup, {1, "b", 0});
  const OwnedRoute stale{
      {*ParseIpv4("10.0.200.9"), 32}, {*ParseIpv4("10.0.100.1"), "rail0", true}, kSelf, kDefaultRtoMin};
  f.actuator.routes[pin_b.destination] = pin_b;
  f.actuator.routes[stale.destination] = stale;
  auto pins = f.routes.Adopt(f.clock.Monotonic());
  REQUIRE(pins.ok());
  REQUIRE(pins->size() == 1);
  CHECK((*pins)[0].first == "b");
  CHECK((*pins)[0].second == fabric::PathKey{1, "b", 0});
  REQUIRE(f.actuator.routes.size() == 1);
  CHECK(f.actuator.routes.begin()->second == pin_b);
  CHECK(Changes(f.registry, "reconcile", "ok") == 1);

  // The adopted pin is known as installed: moving b to rail 0 releases rail 1's neighbours.
  f.routes.Apply({fabric::PinPeer{"b", {0, "b", 0}}});
  CHECK(f.actuator.released == std::vector<std::string>{"rail1"});
}

TEST_CASE("route applier: a failed listing is returned and retried by the reconcile a second later",
          "[daemonset][fabric]") {
  Fixture f;
  const MonoTime now = f.clock.Monotonic();
  f.routes.ScheduleReconcile(now);
  f.actuator.fail = Error{ErrorCode::kUnavailable, "netlink down"};
  auto pins = f.routes.Adopt(now);
  REQUIRE_FALSE(pins.ok());
  CHECK_FALSE(f.routes.ReconcileDue(now + 999ms));
  CHECK(f.routes.ReconcileDue(now + 1s));
  f.actuator.fail.reset();
  f.routes.Reconcile(now + 1s, {});
  CHECK(Changes(f.registry, "reconcile", "ok") == 1);
  CHECK_FALSE(f.routes.ReconcileDue(now + 2s));  // the retry is done
  CHECK(f.routes.ReconcileDue(now + 1s + 30s));  // the periodic one
}

TEST_CASE("route applier: pins replace the peer's route, unpins delete it, the rail traffic left is released",
          "[daemonset][fabric]") {
  Fixture f;
  f.routes.Apply({fabric::PinPeer{"b", {0, "b", 0}}, fabric::PinPeer{"c", {1, "c", 0}}});
  REQUIRE(f.actuator.routes.size() == 2);
  CHECK(f.actuator.routes.at({kHostB, 32}) == *PinRoute(f.setup, {0, "b", 0}));
  CHECK(f.actuator.released.empty());  // nothing was installed before
  CHECK(Changes(f.registry, "pin", "ok") == 2);

  f.routes.Apply({fabric::PinPeer{"b", {1, "b", 0}}});
  CHECK(f.actuator.routes.at({kHostB, 32}) == *PinRoute(f.setup, {1, "b", 0}));
  CHECK(f.actuator.released == std::vector<std::string>{"rail0"});

  f.routes.Apply({fabric::UnpinPeer{"c"}, fabric::UnpinPeer{"unknown"}});
  CHECK_FALSE(f.actuator.routes.contains({kHostC, 32}));
  CHECK(f.actuator.released == std::vector<std::string>{"rail0", "rail1"});
  CHECK(Changes(f.registry, "unpin", "ok") == 1);  // an unknown peer is skipped

  // Already gone is done: counted ok, nothing released (no pin was installed).
  f.routes.Apply({fabric::UnpinPeer{"c"}});
  CHECK(Changes(f.registry, "unpin", "ok") == 2);
  CHECK(f.actuator.released.size() == 2);

  // A peer forgotten (it left): its pin no longer counts as installed.
  f.routes.Forget("b");
  f.routes.Apply({fabric::PinPeer{"b", {0, "b", 0}}});
  CHECK(f.actuator.released.size() == 2);
}

TEST_CASE("route applier: a failed change is counted and retried by the reconcile", "[daemonset][fabric]") {
  Fixture f;
  const MonoTime start = f.clock.Monotonic();
  f.routes.ScheduleReconcile(start);
  CHECK_FALSE(f.routes.ReconcileDue(start + 1s));
  f.actuator.fail = Error{ErrorCode::kUnavailable, "netlink busy"};
  f.clock.Advance(5s);
  f.routes.Apply({fabric::PinPeer{"b", {0, "b", 0}}});
  CHECK(Changes(f.registry, "pin", "error") == 1);
  CHECK_FALSE(f.routes.ReconcileDue(start + 5s + 999ms));
  CHECK(f.routes.ReconcileDue(start + 6s));  // the applier's clock at the failure + 1 s

  // The reconcile fails too: retried a second later; then it converges on the pins.
  f.routes.Reconcile(start + 6s, {{0, "b", 0}});
  CHECK(Changes(f.registry, "reconcile", "error") == 1);
  CHECK(f.routes.ReconcileDue(start + 7s));
  f.actuator.fail.reset();
  f.routes.Reconcile(start + 7s, {{0, "b", 0}});
  CHECK(f.actuator.routes.at({kHostB, 32}) == *PinRoute(f.setup, {0, "b", 0}));
  CHECK_FALSE(f.routes.ReconcileDue(start + 8s));
}

TEST_CASE("route applier: neighbours of a rail we do not have are left alone", "[daemonset][fabric]") {
  Fixture f;
  f.routes.ReleaseNeighbours(2, true);
  f.routes.ReleaseNeighbours(-1, false);
  CHECK(f.actuator.released.empty());
  f.routes.ReleaseNeighbours(1, false);
  CHECK(f.actuator.released == std::vector<std::string>{"rail1"});
}

}  // namespace
}  // namespace lockstep::agent
