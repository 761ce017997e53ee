#include <catch2/catch.hpp>

#include <regex>

#include "eventually.h"
#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/kube/leader_elector.h"

namespace lockstep::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

LeaderElectionConfig Config(const std::string& id) {
  return {.lease_namespace = "lockstep", .lease_name = "lockstep-operator", .identity = id};
}

struct Events {
  int started = 0;
  int stopped_lost = 0;
  int stopped_released = 0;
  LeaderCallbacks Callbacks() {
    return {.on_started_leading = [this] { started++; },
            .on_stopped_leading = [this](bool lost) { (lost ? stopped_lost : stopped_released)++; }};
  }
};

Json Lease(FakeKubeApi& api) { return *api.Peek(gvr::kLeases, "lockstep", "lockstep-operator"); }

bool IsMicroTime(const Json& v) {
  static const std::regex re(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)");
  return v.is_string() && std::regex_match(v.get<std::string>(), re);
}

TEST_CASE("leader election: acquire, renew, lose after another takes over", "[kube][leader]") {
  FakeClock clock;
  FakeKubeApi api(clock);
  Events ea, eb;
  LeaderElector a(api, clock, Config("a"), ea.Callbacks());
  LeaderElector b(api, clock, Config("b"), eb.Callbacks());

  REQUIRE(a.Poll());
  CHECK(a.IsLeader());
  CHECK(ea.started == 1);
  Json lease = Lease(api);
  CHECK(lease["spec"]["holderIdentity"] == "a");
  CHECK(lease["spec"]["leaseDurationSeconds"] == 15);
  CHECK(lease["spec"]["leaseTransitions"] == 0);
  CHECK(IsMicroTime(lease["spec"]["acquireTime"]));
  CHECK(IsMicroTime(lease["spec"]["renewTime"]));

  CHECK_FALSE(b.Poll());  // held by a
  CHECK(b.Holder() == "a");

  clock.Advance(seconds(2));
  uint64_t gets = api.CallCount(Verb::kGet);
  REQUIRE(a.Poll());  // renews without re-reading
  CHECK(api.CallCount(Verb::kGet) == gets);
  Json renewed = Lease(api);
  CHECK(renewed["spec"]["renewTime"] != lease["spec"]["renewTime"]);
  CHECK(renewed["spec"]["acquireTime"] == lease["spec"]["acquireTime"]);
  CHECK(ea.started == 1);

  // a stalls. b first sees the current record now and waits a full lease duration.
  CHECK_FALSE(b.Poll());
  clock.Advance(seconds(10));
  CHECK_FALSE(a.IsLeader());  // renew deadline passed: no longer safe to act
  CHECK_FALSE(b.Poll());      // 10 s < 15 s since b observed the record
  clock.Advance(seconds(6));
  REQUIRE(b.Poll());
  CHECK(eb.started == 1);
  Json taken = Lease(api);
  CHECK(taken["spec"]["holderIdentity"] == "b");
  CHECK(taken["spec"]["leaseTransitions"] == 1);

  CHECK_FALSE(a.Poll());  // observes b as holder: lost
  CHECK(a.Lost());
  CHECK(ea.stopped_lost == 1);
  CHECK_FALSE(a.Poll());  // stays ended, never re-acquires
  CHECK(ea.started == 1);
}

TEST_CASE("leader election: renewal failures past the deadline lose leadership", "[kube][leader]") {
  FakeClock clock;
  FakeKubeApi api(clock);
  Events e;
  LeaderElector a(api, clock, Config("a"), e.Callbacks());
  REQUIRE(a.Poll());
  api.FailNext(100, ErrorCode::kUnavailable);
  for (int i = 0; i < 4; ++i) {
    clock.Advance(seconds(2));
    CHECK(a.Poll());  // 2..8 s: still within the 10 s renew deadline
  }
  clock.Advance(seconds(2));
  CHECK_FALSE(a.Poll());
  CHECK(a.Lost());
  CHECK(e.stopped_lost == 1);
}

TEST_CASE("leader election: a 409 on renewal re-reads and retries", "[kube][leader]") {
  FakeClock clock;
  FakeKubeApi api(clock);
  Events e;
  LeaderElector a(api, clock, Config("a"), e.Callbacks());
  REQUIRE(a.Poll());
  api.FailNext(1, ErrorCode::kConflict, Verb::kUpdate);
  clock.Advance(seconds(2));
  CHECK(a.Poll());
  CHECK(Lease(api)["spec"]["holderIdentity"] == "a");
  CHECK(e.stopped_lost == 0);
}

TEST_CASE("leader election: release on shutdown lets a successor in at once", "[kube][leader]") {
  FakeClock clock;
  FakeKubeApi api(clock);
  Events ea, eb;
  LeaderElector a(api, clock, Config("a"), ea.Callbacks());
  LeaderElector b(api, clock, Config("b"), eb.Callbacks());
  REQUIRE(a.Poll());
  CHECK_FALSE(b.Poll());
  a.Stop();
  CHECK(ea.stopped_released == 1);
  CHECK_FALSE(a.IsLeader());
  CHECK(Lease(api)["spec"]["holderIdentity"] == "");
  REQUIRE(b.Poll());  // no waiting for expiry
  CHECK(Lease(api)["spec"]["leaseTransitions"] == 1);
  b.Stop();
  CHECK(eb.stopped_released == 1);
}

TEST_CASE("leader election: Start runs the loop on a thread", "[kube][leader]") {
  FakeKubeApi api;
  Events e;
  LeaderElectionConfig cfg = Config("a");
  cfg.retry_period = milliseconds(5);
  std::atomic<int> started{0};
  LeaderElector a(api, SystemClock::Instance(), cfg,
                  {.on_started_leading = [&] { started++; }, .on_stopped_leading = [](bool) {}});
  a.Start();
  REQUIRE(testing::Eventually([&] { return a.IsLeader(); }));
  REQUIRE(testing::Eventually([&] { return api.CallCount(Verb::kUpdate) >= 2; }));  // renewing
  a.Stop();
  CHECK(started == 1);
  CHECK(Lease(api)["spec"]["holderIdentity"] == "");
}

}  // namespace
}  // namespace lockstep::kube
