// FencedKubeApi over a LeaderElector on a FakeClock: writes pass only while
// the lease is held and renewed within the deadline.
#include <catch2/catch.hpp>

#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/kube/fenced_kube_api.h"
#include "lockstep/kube/leader_elector.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::kube {
namespace {

using std::chrono::seconds;

Json ConfigMap(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}, {"namespace", "ls"}}}};
}

TEST_CASE("fenced API: writes stop when the renew deadline passes or the lease is lost", "[kube][leader]") {
  FakeClock clock;
  FakeKubeApi api(clock);
  LeaderElector a(api, clock, {.lease_namespace = "ls", .lease_name = "l", .identity = "a"}, {});
  LeaderElector b(api, clock, {.lease_namespace = "ls", .lease_name = "l", .identity = "b"}, {});
  FencedKubeApi fenced(api, [&] { return a.IsLeader(); });

  // Not yet leader: refused, and nothing reaches the server.
  uint64_t writes = api.WriteCount();
  auto refused = fenced.Create(gvr::kConfigMaps, "ls", ConfigMap("early"));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.code() == ErrorCode::kUnavailable);
  CHECK(refused.error().message.find("not the leader") != std::string::npos);
  CHECK(api.WriteCount() == writes);

  REQUIRE(a.Poll());
  REQUIRE(fenced.Create(gvr::kConfigMaps, "ls", ConfigMap("cm")).ok());
  REQUIRE(fenced.MergePatch(gvr::kConfigMaps, "ls", "cm", {{"data", {{"k", "v"}}}}).ok());
  // Delete options pass through: the uid precondition and the grace period.
  auto gone = fenced.Create(gvr::kConfigMaps, "ls", ConfigMap("gone"));
  REQUIRE(gone.ok());
  REQUIRE(fenced.Delete(gvr::kConfigMaps, "ls", "gone", Uid(*gone), 0).ok());
  REQUIRE(api.Deletes().size() == 1);
  CHECK(api.Deletes()[0].uid_precondition == Uid(*gone));
  CHECK(api.Deletes()[0].grace_period_seconds == std::optional<int64_t>(0));

  // A reconcile still running after the last renewal: once the renew deadline
  // has passed on the clock, its writes are refused (before anyone else holds the lease).
  clock.Advance(seconds(10));
  writes = api.WriteCount();
  CHECK_FALSE(fenced.MergePatch(gvr::kConfigMaps, "ls", "cm", {{"data", {{"k", "late"}}}}).ok());
  CHECK_FALSE(fenced.Apply(gvr::kConfigMaps, "ls", "cm", ConfigMap("cm"), {}).ok());
  CHECK_FALSE(fenced.Update(gvr::kConfigMaps, "ls", ConfigMap("cm")).ok());
  CHECK_FALSE(fenced.Delete(gvr::kConfigMaps, "ls", "cm").ok());
  CHECK(api.WriteCount() == writes);
  CHECK(fenced.Refused() == 5);
  // Reads still pass.
  auto cm = fenced.Get(gvr::kConfigMaps, "ls", "cm");
  REQUIRE(cm.ok());
  CHECK((*cm)["data"]["k"] == "v");

  // Another process takes the lease; a observes the loss and stays fenced.
  CHECK_FALSE(b.Poll());
  clock.Advance(seconds(16));
  REQUIRE(b.Poll());
  CHECK_FALSE(a.Poll());
  CHECK(a.Lost());
  CHECK_FALSE(fenced.Create(gvr::kConfigMaps, "ls", ConfigMap("after")).ok());
  CHECK_FALSE(api.Peek(gvr::kConfigMaps, "ls", "after"));
}

}  // namespace
}  // namespace lockstep::kube
