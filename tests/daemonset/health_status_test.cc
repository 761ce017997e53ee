// The FabricHealth status the agent writes: phase and Ready from the clock
// state, the operator's fields preserved, merge patches that remove what the
// agent no longer reports.
#include <catch2/catch.hpp>

#include "lockstep/agent/kube/health_status.h"

namespace lockstep::agent {
namespace {

// As the operator initialises it (operator/src/health_plan.cc).
Json OperatorStatus() {
  return Json::parse(R"({
    "nodeName": "gpu-node-0", "policy": "default", "phase": "Pending",
    "conditions": [
      {"type": "Ready", "status": "Unknown", "reason": "AgentNotReporting",
       "message": "the node agent has not reported for this node yet", "lastTransitionTime": "2026-01-01T00:00:00Z"},
      {"type": "PolicyConflict", "status": "True", "reason": "MultiplePolicies",
       "message": "node is selected by FabricPolicies a, b", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})");
}

AgentReport Locked() {
  AgentReport r;
  r.node_name = "gpu-node-0";
  r.probe_addresses = {"10.0.0.1:7311"};
  r.rails_up = 1;
  r.rails_total = 2;
  r.clock.state = ClockSyncState::kLocked;
  r.clock.has_model = true;
  r.clock.offset_ns = -1234;
  r.clock.drift_ppb = 150;
  r.clock.error_bound_ns = 87;
  r.clock.peers = 7;
  return r;
}

const Json* Condition(const Json& status, const std::string& type) {
  for (const Json& c : status["conditions"]) {
    if (c["type"] == type) return &c;
  }
  return nullptr;
}

TEST_CASE("clock states map to phase and Ready", "[daemonset][kube]") {
  ClockSnapshot c;
  REQUIRE(Assess(c).phase == "Pending");
  REQUIRE(Assess(c).reason == "ClockNotLocked");
  REQUIRE(Assess(c).status == "False");
  c.state = ClockSyncState::kLocked;
  c.has_model = true;
  REQUIRE(Assess(c).phase == "Healthy");
  REQUIRE(Assess(c).status == "True");
  REQUIRE(Assess(c).reason == "ClockLocked");
  c.state = ClockSyncState::kHoldover;
  REQUIRE(Assess(c).phase == "Degraded");
  REQUIRE(Assess(c).reason == "ClockHoldover");
  c.state = ClockSyncState::kFreerun;  // after a lock
  REQUIRE(Assess(c).phase == "Degraded");
  REQUIRE(Assess(c).reason == "ClockLockLost");
  c.enabled = false;
  REQUIRE(Assess(c).phase == "Healthy");
  REQUIRE(Assess(c).reason == "ClockSyncDisabled");
}

TEST_CASE("a locked report fills the agent's fields and keeps the operator's", "[daemonset][kube]") {
  Json s = BuildStatus(OperatorStatus(), Locked(), "2026-01-01T00:01:00Z");
  REQUIRE(s["phase"] == "Healthy");
  REQUIRE(s["nodeName"] == "gpu-node-0");
  REQUIRE(s["policy"] == "default");
  REQUIRE(s["lastReportTime"] == "2026-01-01T00:01:00Z");
  REQUIRE(s["clock"] == Json::parse(R"({"state":"LOCKED","offsetNs":-1234,"driftPpb":150,"errorBoundNs":87,"peers":7})"));
  REQUIRE(s["clockErrorBoundNs"] == 87);
  REQUIRE(s["probeAddresses"] == Json::array({"10.0.0.1:7311"}));
  REQUIRE_FALSE(s.contains("rails"));  // derived values are not stored; printer columns read these
  REQUIRE(s["railsUp"] == 1);
  REQUIRE(s["railsTotal"] == 2);
  REQUIRE(s["flapsLastHour"] == 0);
  const Json* ready = Condition(s, "Ready");
  REQUIRE(ready);
  REQUIRE((*ready)["status"] == "True");
  REQUIRE((*ready)["reason"] == "ClockLocked");
  REQUIRE((*ready)["lastTransitionTime"] == "2026-01-01T00:01:00Z");
  REQUIRE(*Condition(s, "PolicyConflict") == *Condition(OperatorStatus(), "PolicyConflict"));
  REQUIRE(s["conditions"].size() == 2);
}

TEST_CASE("Ready moves its lastTransitionTime only when its status changes", "[daemonset][kube]") {
  Json s1 = BuildStatus(OperatorStatus(), Locked(), "2026-01-01T00:01:00Z");
  AgentReport r = Locked();
  r.clock.error_bound_ns = 90;
  Json s2 = BuildStatus(s1, r, "2026-01-01T00:02:00Z");
  REQUIRE((*Condition(s2, "Ready"))["lastTransitionTime"] == "2026-01-01T00:01:00Z");
  r.clock.state = ClockSyncState::kHoldover;
  r.clock.error_bound_ns = 5000;
  Json s3 = BuildStatus(s2, r, "2026-01-01T00:03:00Z");
  REQUIRE(s3["phase"] == "Degraded");
  REQUIRE((*Condition(s3, "Ready"))["status"] == "False");
  REQUIRE((*Condition(s3, "Ready"))["reason"] == "ClockHoldover");
  REQUIRE((*Condition(s3, "Ready"))["lastTransitionTime"] == "2026-01-01T00:03:00Z");
}

TEST_CASE("an unbounded clock removes the bound fields through the merge patch", "[daemonset][kube]") {
  Json locked = BuildStatus(OperatorStatus(), Locked(), "2026-01-01T00:01:00Z");
  AgentReport r = Locked();
  r.clock.state = ClockSyncState::kFreerun;  // lock lost
  r.clock.error_bound_ns.reset();
  r.probe_addresses.clear();
  Json freerun = BuildStatus(locked, r, "2026-01-01T00:05:00Z");
  REQUIRE(freerun["phase"] == "Degraded");
  REQUIRE_FALSE(freerun.contains("clockErrorBoundNs"));
  REQUIRE_FALSE(freerun.contains("probeAddresses"));
  REQUIRE(freerun["clock"] == Json::parse(R"({"state":"FREERUN","peers":7})"));

  Json object = {{"metadata", {{"name", "gpu-node-0"}, {"resourceVersion", "42"}}}, {"status", locked}};
  Json patch = StatusPatch(object, freerun);
  REQUIRE(patch["metadata"]["resourceVersion"] == "42");
  REQUIRE(patch["status"]["clockErrorBoundNs"].is_null());
  REQUIRE(patch["status"]["probeAddresses"].is_null());
  REQUIRE(patch["status"]["clock"]["errorBoundNs"].is_null());
  REQUIRE_FALSE(patch["status"].contains("policy"));  // unchanged fields are not sent
  Json applied = locked;
  applied.merge_patch(patch["status"]);
  REQUIRE(applied == freerun);
}

TEST_CASE("merge patch diffs round-trip", "[daemonset][kube]") {
  const Json cases[][2] = {
      {Json::object(), Json::parse(R"({"a":1})")},
      {Json::parse(R"({"a":1,"b":{"c":2,"d":3}})"), Json::parse(R"({"a":1,"b":{"c":4}})")},
      {Json::parse(R"({"l":[1,2,3]})"), Json::parse(R"({"l":[1,2]})")},
      {Json::parse(R"({"x":{"y":1}})"), Json::parse(R"({"x":5})")},
  };
  for (const auto& c : cases) {
    Json patch = MergePatchDiff(c[0], c[1]);
    Json applied = c[0];
    applied.merge_patch(patch);
    INFO(c[0].dump() << " -> " << c[1].dump() << " via " << patch.dump());
    REQUIRE(applied == c[1]);
  }
  REQUIRE(MergePatchDiff(Json::parse(R"({"a":1})"), Json::parse(R"({"a":1})")) == Json::object());
}

TEST_CASE("only lastReportTime changing is recognised as no change", "[daemonset][kube]") {
  Json a = BuildStatus(OperatorStatus(), Locked(), "2026-01-01T00:01:00Z");
  Json b = BuildStatus(a, Locked(), "2026-01-01T00:01:10Z");
  REQUIRE(a != b);
  REQUIRE_FALSE(ChangedBeyondReportTime(a, b));
  AgentReport r = Locked();
  r.clock.offset_ns += 1;
  REQUIRE(ChangedBeyondReportTime(a, BuildStatus(a, r, "2026-01-01T00:01:10Z")));
}

// A device entry of status.gpu with the fields given (the rest absent).
api::GpuDeviceStatus Device(int index, std::optional<std::string> uuid, const std::string& state) {
  api::GpuDeviceStatus d;
  d.index = index;
  d.uuid = std::move(uuid);
  d.state = state;
  return d;
}

// A GPU report as GpuReportOf builds it: GPU 1 hot.
GpuReport HotGpu() {
  GpuReport g;
  g.condition = {"GPUHealthy", "False", "EarlyWarning", "GPU 1 (GPU-one) temperature 93 C >= 90 C"};
  g.status.state = "Warning";
  g.status.warnings = 1;
  g.status.devices = {Device(0, "GPU-zero", "Healthy"), Device(1, "GPU-one", "Warning")};
  g.status.devices[0].temperature_celsius = 45;
  g.status.devices[1].temperature_celsius = 93;
  return g;
}

TEST_CASE("GPU health: status.gpu and GPUHealthy written, Ready and the phase left to fabric and clock",
          "[daemonset][kube][gpu]") {
  AgentReport r = Locked();
  r.gpu = HotGpu();
  Json s = BuildStatus(OperatorStatus(), r, "2026-01-01T00:01:00Z");
  REQUIRE(s["gpu"]["state"] == "Warning");
  REQUIRE(s["gpu"]["devices"][1] ==
          Json::parse(R"({"index":1,"uuid":"GPU-one","state":"Warning","temperatureCelsius":93})"));
  const Json* gpu = Condition(s, "GPUHealthy");
  REQUIRE(gpu);
  REQUIRE((*gpu)["status"] == "False");
  REQUIRE((*gpu)["reason"] == "EarlyWarning");
  REQUIRE((*gpu)["message"] == "GPU 1 (GPU-one) temperature 93 C >= 90 C");
  REQUIRE(s["phase"] == "Healthy");
  REQUIRE((*Condition(s, "Ready"))["status"] == "True");
  // The status the agent writes parses under the typed contract.
  auto typed = api::ParseFabricHealthStatus("gpu-node-0", s);
  REQUIRE(typed.ok());
  REQUIRE(typed->agent.gpu == r.gpu->status);

  // Cooler, then healthy: the message follows the values; the transition time moves with the status only.
  r.gpu->condition.message = "GPU 1 (GPU-one) temperature 95 C >= 90 C";
  Json s2 = BuildStatus(s, r, "2026-01-01T00:02:00Z");
  REQUIRE((*Condition(s2, "GPUHealthy"))["message"] == "GPU 1 (GPU-one) temperature 95 C >= 90 C");
  REQUIRE((*Condition(s2, "GPUHealthy"))["lastTransitionTime"] == "2026-01-01T00:01:00Z");
  r.gpu->condition = {"GPUHealthy", "True", "Healthy", "2 GPUs within the early-warning thresholds"};
  Json s3 = BuildStatus(s2, r, "2026-01-01T00:03:00Z");
  REQUIRE((*Condition(s3, "GPUHealthy"))["status"] == "True");
  REQUIRE((*Condition(s3, "GPUHealthy"))["lastTransitionTime"] == "2026-01-01T00:03:00Z");

  // gpu.mode Disabled: both go, through the merge patch too.
  r.gpu.reset();
  Json s4 = BuildStatus(s3, r, "2026-01-01T00:04:00Z");
  REQUIRE_FALSE(s4.contains("gpu"));
  REQUIRE(Condition(s4, "GPUHealthy") == nullptr);
  Json object = {{"metadata", {{"resourceVersion", "7"}}}, {"status", s3}};
  REQUIRE(StatusPatch(object, s4)["status"]["gpu"].is_null());
}

TEST_CASE("a GPU condition change is due for a write at once, a value change is not", "[daemonset][kube][gpu]") {
  AgentReport r = Locked();
  const std::string without = ReportSignature(r);
  r.gpu = HotGpu();
  const std::string warning = ReportSignature(r);
  REQUIRE(warning != without);
  r.gpu->condition.message = "GPU 1 (GPU-one) temperature 97 C >= 90 C";
  r.gpu->status.devices[1].temperature_celsius = 97;
  REQUIRE(ReportSignature(r) == warning);
  r.gpu->condition = {"GPUHealthy", "True", "Healthy", "2 GPUs within the early-warning thresholds"};
  REQUIRE(ReportSignature(r) != warning);
}

}  // namespace
}  // namespace lockstep::agent
