// Route reconciliation (PlanRoutes, ApplyRoutePlan, ReconcileRoutes) and the
// route vocabulary, on the in-memory FakeRouteActuator.
#include <catch2/catch.hpp>

#include "fake_route_actuator.h"
#include "lockstep/agent/ports/route_actuator.h"
#include "lockstep/agent/route_reconcile.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

Ipv4Prefix P(const char* text) { return Ipv4Prefix::Parse(text).value(); }
uint32_t A(const char* text) { return ParseIpv4(text).value(); }

// Peer `peer`'s host route pinned to rail `rail` (gateway 10.0.<rail>.254).
OwnedRoute Pin(int peer, int rail, std::chrono::milliseconds rto_min = kDefaultRtoMin) {
  OwnedRoute r;
  r.destination = P(("10.0.200." + std::to_string(peer)).c_str());
  r.nexthop = {A(("10.0." + std::to_string(rail) + ".254").c_str()), "rail" + std::to_string(rail)};
  r.source = A("10.0.200.1");
  r.rto_min = rto_min;
  return r;
}

const std::set<std::string> kBothUp = {"rail0", "rail1"};

TEST_CASE("route vocabulary: prefixes parse and routes print like ip route", "[daemonset][routes]") {
  CHECK(P("10.0.200.2") == Ipv4Prefix{A("10.0.200.2"), 32});
  CHECK(P("10.0.200.0/24").length == 24);
  CHECK(P("0.0.0.0/0").ToString() == "0.0.0.0/0");
  auto bad = Ipv4Prefix::Parse("10.0.200.1/24");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("did you mean 10.0.200.0/24") != std::string::npos);
  CHECK_FALSE(Ipv4Prefix::Parse("10.0.200.0/33").ok());
  CHECK_FALSE(Ipv4Prefix::Parse("rail0").ok());
  CHECK(Pin(2, 1).ToString() == "10.0.200.2/32 via 10.0.1.254 dev rail1 src 10.0.200.1 rto_min 10ms");
}

TEST_CASE("plan: an empty kernel gets every desired route", "[daemonset][routes]") {
  std::vector<OwnedRoute> desired = {Pin(3, 1), Pin(2, 0)};
  auto plan = PlanRoutes({}, desired, kBothUp);
  REQUIRE(plan.ok());
  CHECK(plan->add == std::vector<OwnedRoute>{Pin(2, 0), Pin(3, 1)});  // sorted by destination
  CHECK(plan->replace.empty());
  CHECK(plan->remove.empty());
  CHECK(plan->blocked.empty());
}

TEST_CASE("plan: routes already right are left alone", "[daemonset][routes]") {
  std::vector<OwnedRoute> routes = {Pin(2, 0), Pin(3, 1)};
  auto plan = PlanRoutes(routes, routes, kBothUp);
  REQUIRE(plan.ok());
  CHECK(plan->empty());
}

TEST_CASE("plan: a moved nexthop, source or rto_min is replaced in place", "[daemonset][routes]") {
  std::vector<OwnedRoute> installed = {Pin(2, 0), Pin(3, 0), Pin(4, 0, 200ms)};
  OwnedRoute other_src = Pin(3, 0);
  other_src.source = A("10.0.200.9");
  std::vector<OwnedRoute> desired = {Pin(2, 1), other_src, Pin(4, 0)};
  auto plan = PlanRoutes(installed, desired, kBothUp);
  REQUIRE(plan.ok());
  CHECK(plan->replace == desired);
  CHECK(plan->add.empty());
  CHECK(plan->remove.empty());
}

TEST_CASE("plan: owned routes nobody wants are deleted", "[daemonset][routes]") {
  std::vector<OwnedRoute> installed = {Pin(2, 0), Pin(3, 1)};
  std::vector<OwnedRoute> desired = {Pin(3, 1)};
  auto plan = PlanRoutes(installed, desired, kBothUp);
  REQUIRE(plan.ok());
  CHECK(plan->remove == std::vector<Ipv4Prefix>{P("10.0.200.2")});
  CHECK(plan->add.empty());
  CHECK(plan->replace.empty());
}

TEST_CASE("plan: no route is left or put on an interface that is down", "[daemonset][routes]") {
  // After a restart: the kernel still has a pin on rail0, rail0 is now down,
  // and the (stale) desired set still says rail0 for peer 2 and peer 4.
  std::vector<OwnedRoute> installed = {Pin(2, 0), Pin(3, 1)};
  std::vector<OwnedRoute> desired = {Pin(2, 0), Pin(3, 1), Pin(4, 0)};
  auto plan = PlanRoutes(installed, desired, {"rail1"});
  REQUIRE(plan.ok());
  CHECK(plan->remove == std::vector<Ipv4Prefix>{P("10.0.200.2")});
  CHECK(plan->blocked == std::vector<OwnedRoute>{Pin(2, 0), Pin(4, 0)});
  CHECK(plan->add.empty());
  CHECK(plan->replace.empty());

  // An unwanted route on a down interface goes too; a wanted one on an up
  // interface replaces a route that was on the down one.
  plan = PlanRoutes(installed, std::vector<OwnedRoute>{Pin(2, 1)}, {"rail1"});
  REQUIRE(plan.ok());
  CHECK(plan->replace == std::vector<OwnedRoute>{Pin(2, 1)});
  CHECK(plan->remove == std::vector<Ipv4Prefix>{P("10.0.200.3")});
}

TEST_CASE("plan: a destination named twice is a caller error", "[daemonset][routes]") {
  std::vector<OwnedRoute> desired = {Pin(2, 0), Pin(2, 1)};
  auto plan = PlanRoutes({}, desired, kBothUp);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.code() == ErrorCode::kInvalidArgument);
  CHECK(plan.error().message == "desired routes name 10.0.200.2/32 twice");
}

TEST_CASE("reconcile converges the fake and a second pass changes nothing", "[daemonset][routes]") {
  FakeRouteActuator net;
  net.AddInterface("rail0", false);
  net.AddInterface("rail1", true);
  net.routes[P("10.0.200.2")] = Pin(2, 0);  // left by the previous run, now on a down rail
  net.routes[P("10.0.200.5")] = Pin(5, 1);  // no longer wanted
  std::vector<OwnedRoute> desired = {Pin(2, 1), Pin(3, 1), Pin(4, 0)};

  auto plan = ReconcileRoutes(net, desired);
  REQUIRE(plan.ok());
  CHECK(plan->blocked == std::vector<OwnedRoute>{Pin(4, 0)});
  CHECK(net.log == std::vector<std::string>{
                       "delete 10.0.200.5/32",
                       "replace 10.0.200.2/32 via 10.0.1.254 dev rail1 src 10.0.200.1 rto_min 10ms",
                       "install 10.0.200.3/32 via 10.0.1.254 dev rail1 src 10.0.200.1 rto_min 10ms",
                   });
  CHECK(net.routes.size() == 2);

  net.log.clear();
  plan = ReconcileRoutes(net, desired);
  REQUIRE(plan.ok());
  CHECK(plan->empty());
  CHECK(net.log.empty());
}

TEST_CASE("reconcile on start with the listed routes keeps working pins and drops dead ones", "[daemonset][routes]") {
  FakeRouteActuator net;
  net.AddInterface("rail0", false);
  net.AddInterface("rail1", true);
  net.routes[P("10.0.200.2")] = Pin(2, 0);
  net.routes[P("10.0.200.3")] = Pin(3, 1);
  auto listed = net.List();
  REQUIRE(listed.ok());
  auto plan = ReconcileRoutes(net, *listed);
  REQUIRE(plan.ok());
  CHECK(net.log == std::vector<std::string>{"delete 10.0.200.2/32"});
  CHECK(plan->blocked == std::vector<OwnedRoute>{Pin(2, 0)});
  CHECK(net.routes.size() == 1);
  CHECK(net.routes.contains(P("10.0.200.3")));
}

TEST_CASE("apply tries every step and reports the first error", "[daemonset][routes]") {
  FakeRouteActuator net;
  net.AddInterface("rail1", true);
  net.foreign.insert(P("10.0.200.2"));
  RoutePlan plan;
  plan.add = {Pin(2, 1), Pin(3, 1), Pin(4, 7)};
  plan.remove = {P("10.0.200.9")};  // already gone: not an error
  Status s = ApplyRoutePlan(net, plan);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == ErrorCode::kAlreadyExists);
  CHECK(s.error().message == "a route to 10.0.200.2/32 exists (and 1 more route changes failed)");
  CHECK(net.routes.contains(P("10.0.200.3")));
}

TEST_CASE("flush deletes every owned route and only those", "[daemonset][routes]") {
  FakeRouteActuator net;
  net.AddInterface("rail0", true);
  net.foreign.insert(P("10.0.200.7"));
  net.routes[P("10.0.200.2")] = Pin(2, 0);
  net.routes[P("10.0.200.3")] = Pin(3, 0);
  REQUIRE(FlushOwnedRoutes(net).ok());
  CHECK(net.routes.empty());
  CHECK(net.foreign.contains(P("10.0.200.7")));
  net.fail = Unavailable("netlink socket closed");
  CHECK(FlushOwnedRoutes(net).code() == ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace lockstep::agent
