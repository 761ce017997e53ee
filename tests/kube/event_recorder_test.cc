#include <catch2/catch.hpp>

#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/kube/event_recorder.h"

namespace lockstep::kube {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

Json Policy() {
  return {{"apiVersion", "lockstep.dev/v1alpha1"},
          {"kind", "FabricPolicy"},
          {"metadata", {{"name", "default"}, {"uid", "u-1"}, {"resourceVersion", "9"}}}};
}

TEST_CASE("event recorder creates events and aggregates repeats", "[kube][events]") {
  FakeClock clock;
  FakeKubeApi api(clock);
  metrics::Registry reg;
  EventRecorder rec(api, clock, {.component = "lockstep-operator", .host = "node-1", .registry = &reg});

  rec.Warning(Policy(), "InvalidSpec", "spec.probe.intervalMs must be between 1 and 60000 (got 0)");
  auto events = api.Objects(gvr::kEvents);
  REQUIRE(events.size() == 1);
  const Json& ev = events[0];
  CHECK(ev["metadata"]["namespace"] == "default");  // cluster-scoped object
  CHECK(ev["involvedObject"]["kind"] == "FabricPolicy");
  CHECK(ev["involvedObject"]["apiVersion"] == "lockstep.dev/v1alpha1");
  CHECK(ev["involvedObject"]["uid"] == "u-1");
  CHECK(ev["type"] == "Warning");
  CHECK(ev["reason"] == "InvalidSpec");
  CHECK(ev["source"]["component"] == "lockstep-operator");
  CHECK(ev["source"]["host"] == "node-1");
  CHECK(ev["count"] == 1);
  CHECK(ev["firstTimestamp"] == ev["lastTimestamp"]);

  clock.Advance(seconds(30));
  rec.Warning(Policy(), "InvalidSpec", "spec.probe.intervalMs must be between 1 and 60000 (got 0)");
  events = api.Objects(gvr::kEvents);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["count"] == 2);
  CHECK(events[0]["lastTimestamp"] != events[0]["firstTimestamp"]);

  rec.Normal(Policy(), "Reconciled", "agents rolled out");  // different reason: new event
  CHECK(api.Objects(gvr::kEvents).size() == 2);

  clock.Advance(minutes(6));  // outside the aggregation window
  rec.Warning(Policy(), "InvalidSpec", "spec.probe.intervalMs must be between 1 and 60000 (got 0)");
  CHECK(api.Objects(gvr::kEvents).size() == 3);
  CHECK(rec.SentCount() == 4);
  CHECK(rec.FailureCount() == 0);
}

TEST_CASE("event recorder never fails the caller", "[kube][events]") {
  FakeClock clock;
  FakeKubeApi api(clock);
  metrics::Registry reg;
  EventRecorder rec(api, clock, {.registry = &reg});
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}, {"namespace", "ns"}}}};
  api.FailNext(1, ErrorCode::kUnavailable, Verb::kCreate);
  rec.Warning(pod, "Failed", "boom");
  CHECK(rec.FailureCount() == 1);
  CHECK(reg.Counter("lockstep_kube_events_failed_total", "").Get() == 1);
  rec.Warning(pod, "Failed", "boom");
  auto events = api.Objects(gvr::kEvents);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["metadata"]["namespace"] == "ns");
  // The aggregated event was deleted (TTL): the next repeat creates a new one.
  REQUIRE(api.Delete(gvr::kEvents, "ns", events[0]["metadata"]["name"]).ok());
  rec.Warning(pod, "Failed", "boom");
  CHECK(api.Objects(gvr::kEvents).size() == 1);
  CHECK(rec.FailureCount() == 1);
}

}  // namespace
}  // namespace lockstep::kube
