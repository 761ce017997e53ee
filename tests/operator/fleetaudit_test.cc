// The FleetAudit controller: the pure plan (PlanFleetAudit) and the
// reconciler as BuildOperator wires it, on the in-memory FakeKubeApi, with
// agents' results made by the audit's own checks (RunChecks on node facts).
#include <catch2/catch.hpp>

#include "../audit/good_node.h"
#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/audit/audit_json.h"
#include "lockstep/audit/checks.h"
#include "lockstep/audit/node_audit.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/time_format.h"
#include "lockstep/operator/fleetaudit_plan.h"
#include "lockstep/operator/operator_runtime.h"

namespace lockstep::op {
namespace {

using kube::FakeKubeApi;
using kube::Json;
using std::chrono::seconds;

Json Node(const std::string& name, const std::string& pool, bool gpu = true) {
  Json labels = {{"node.kubernetes.io/instance-type", pool}};
  if (gpu) labels["lockstep.dev/gpu"] = "true";
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}}};
}

Json Health(const std::string& node) {
  return {{"apiVersion", "lockstep.dev/v1alpha1"},
          {"kind", "FabricHealth"},
          {"metadata", {{"name", node}, {"labels", {{"lockstep.dev/policy", "p"}}}}}};
}

Json Audit(Json spec = {{"nodeSelector", {{"lockstep.dev/gpu", "true"}}}}) {
  return {{"apiVersion", "lockstep.dev/v1alpha1"},
          {"kind", "FleetAudit"},
          {"metadata", {{"name", "pre"}, {"uid", "uid-pre"}}},
          {"spec", spec}};
}

// What an agent writes into its NodeAudit's status.
Json Result(const audit::NodeFacts& f) {
  return audit::CompletedNodeAuditStatus(audit::RunChecks(f), "2027-01-15T08:00:00Z");
}

audit::NodeFacts WrongMtu() {
  auto f = audit::testing::GoodNode();
  f.rails[1].mtu = 1500;  // passes alone; fails against its pool
  return f;
}

TEST_CASE("plan: a NodeAudit per selected node with an agent, then Running until the timeout", "[operator]") {
  Json fa = Audit();
  std::vector<Json> nodes = {Node("a", "h100"), Node("b", "h100"), Node("no-agent", "h100"), Node("cpu", "c", false)};
  FleetAuditView v{.audit = fa, .agents = {"a", "b", "cpu"}, .now = WallTime(seconds(1'800'000'000))};
  for (const Json& n : nodes) v.nodes.push_back(&n);
  FleetAuditPlan plan = PlanFleetAudit(v);
  REQUIRE(plan.create.size() == 2);
  const Json& na = plan.create[0];
  REQUIRE(na["metadata"]["name"] == "pre.a");
  REQUIRE(na["metadata"]["labels"][kFleetAuditLabel] == "pre");
  REQUIRE(na["metadata"]["labels"][kAuditNodeLabel] == "a");
  REQUIRE(na["metadata"]["ownerReferences"][0]["uid"] == "uid-pre");
  REQUIRE(na["spec"]["nodeName"] == "a");
  REQUIRE(plan.status["phase"] == "Running");
  REQUIRE(plan.status["nodes"] == 2);
  REQUIRE(plan.status["pending"] == 2);
  REQUIRE_FALSE(plan.completed);
  REQUIRE(plan.requeue_after == seconds(300));
  REQUIRE(plan.events.size() == 1);
  REQUIRE(plan.events[0].reason == "AuditStarted");
}

struct PlannedFleet {
  Json fa = Audit();
  std::vector<Json> nodes, audits;
  FleetAuditView View(WallTime now) {
    FleetAuditView v{.audit = fa, .now = now};
    for (const Json& n : nodes) {
      v.nodes.push_back(&n);
      v.agents.insert(n["metadata"]["name"].get<std::string>());
    }
    for (const Json& a : audits) v.node_audits.push_back(&a);
    return v;
  }
};

TEST_CASE("plan: every node reported, the odd one out fails, verdicts go to the FabricHealths", "[operator]") {
  PlannedFleet p;
  for (int i = 0; i < 5; ++i) {
    std::string name = "n" + std::to_string(i);
    p.nodes.push_back(Node(name, "h100"));
    Json na = NodeAuditObject(p.fa, name, {});
    na["status"] = Result(i == 3 ? WrongMtu() : audit::testing::GoodNode());
    p.audits.push_back(na);
  }
  FleetAuditPlan plan = PlanFleetAudit(p.View(WallTime(seconds(1'800'000'010))));
  REQUIRE(plan.create.empty());
  REQUIRE(plan.completed);
  REQUIRE(plan.status["phase"] == "Completed");
  REQUIRE(plan.status["nodes"] == 5);
  REQUIRE(plan.status["passed"] == 4);
  REQUIRE(plan.status["failed"] == 1);
  REQUIRE(plan.status["pending"] == 0);
  REQUIRE(plan.status["failingChecks"][0]["check"] == "backend.mtu");
  REQUIRE(plan.status["failingChecks"][0]["nodeNames"] == Json::array({"n3"}));
  const Json& bad = plan.status["failedNodes"][0];
  REQUIRE(bad["node"] == "n3");
  REQUIRE(bad["failures"][0]["subject"] == "rail1");
  REQUIRE(bad["failures"][0]["observed"] == "1500");
  REQUIRE(bad["failures"][0]["expected"] == "9000");
  REQUIRE(plan.mirrors.size() == 5);
  for (const AuditMirror& m : plan.mirrors) {
    INFO(m.node);
    REQUIRE(m.status_patch["auditResult"] == (m.node == "n3" ? "Fail" : "Pass"));
    REQUIRE(m.status_patch["audit"]["lastRunTime"] == "2027-01-15T08:00:00Z");
  }
  REQUIRE(plan.mirrors[3].status_patch["audit"]["checks"][0]["name"] == "backend.mtu[rail1]");
  bool node_event = false, audit_event = false;
  for (const FleetAuditEvent& e : plan.events) {
    node_event |= e.node == "n3" && e.warning && e.reason == "AuditFailed";
    audit_event |= e.node.empty() && e.warning && e.message == "1 of 5 nodes failed: backend.mtu (1)";
  }
  REQUIRE(node_event);
  REQUIRE(audit_event);

  // A completed audit is final: nothing more to do.
  p.fa["status"] = plan.status;
  FleetAuditPlan again = PlanFleetAudit(p.View(WallTime(seconds(1'800'000'020))));
  REQUIRE(again.create.empty());
  REQUIRE(again.mirrors.empty());
  REQUIRE(again.events.empty());
}

TEST_CASE("plan: at the timeout the audit completes with the silent nodes pending", "[operator]") {
  PlannedFleet p;
  p.fa["status"] = {{"startTime", "2027-01-15T08:00:00Z"}};
  const WallTime start = *kube::ParseRfc3339("2027-01-15T08:00:00Z");
  for (int i = 0; i < 3; ++i) {
    std::string name = "n" + std::to_string(i);
    p.nodes.push_back(Node(name, "h100"));
    Json na = NodeAuditObject(p.fa, name, {});
    if (i != 1) na["status"] = Result(audit::testing::GoodNode());
    p.audits.push_back(na);
  }
  FleetAuditPlan running = PlanFleetAudit(p.View(start + seconds(100)));
  REQUIRE_FALSE(running.completed);
  REQUIRE(running.requeue_after == seconds(200));
  REQUIRE(running.status["pending"] == 1);
  FleetAuditPlan done = PlanFleetAudit(p.View(start + seconds(300)));
  REQUIRE(done.completed);
  REQUIRE(done.status["pending"] == 1);
  REQUIRE(done.status["passed"] == 2);
  REQUIRE(done.mirrors.size() == 2);  // the silent node's FabricHealth is left alone
  REQUIRE(done.events.back().warning);
  REQUIRE(done.events.back().message == "0 of 3 nodes failed, 1 did not report within 300s");
}

TEST_CASE("plan: an agent's error or malformed checks fail its node", "[operator]") {
  PlannedFleet p;
  p.nodes = {Node("a", "x"), Node("b", "x")};
  Json a = NodeAuditObject(p.fa, "a", {});
  a["status"] = {{"phase", "Error"}, {"error", "cannot read /sys"}};
  Json b = NodeAuditObject(p.fa, "b", {});
  b["status"] = {{"phase", "Completed"}, {"checks", Json::array({{{"id", "x.y"}, {"verdict", "Maybe"}}})}};
  p.audits = {a, b};
  FleetAuditPlan plan = PlanFleetAudit(p.View(WallTime(seconds(1'800'000'000))));
  REQUIRE(plan.status["failed"] == 2);
  REQUIRE(plan.status["failedNodes"][0]["failures"][0]["message"] == "cannot read /sys");
  REQUIRE(plan.status["failedNodes"][1]["failures"][0]["check"] == "audit.report");
}

TEST_CASE("plan: spec expectations and pools reach the judgement", "[operator]") {
  PlannedFleet p;
  p.fa = Audit({{"poolLabel", "pool"},
                {"medianTolerancePercent", 20},
                {"expectations", Json::array({{{"check", "backend.mtu"}, {"value", "4200"}, {"pool", "b"}}})}});
  FleetAuditSpec spec = ParseFleetAuditSpec(p.fa);
  REQUIRE(spec.pool_label == "pool");
  REQUIRE(spec.pool.median_tolerance == Approx(0.2));
  REQUIRE(spec.pool.expectations.at("b").at("backend.mtu") == "4200");
  REQUIRE(spec.timeout_seconds == 300);
  for (int i = 0; i < 4; ++i) {
    std::string name = "n" + std::to_string(i);
    Json n = Node(name, "");
    n["metadata"]["labels"]["pool"] = i < 2 ? "a" : "b";
    p.nodes.push_back(n);
    Json na = NodeAuditObject(p.fa, name, spec);
    na["status"] = Result(audit::testing::GoodNode());
    p.audits.push_back(na);
  }
  FleetAuditPlan plan = PlanFleetAudit(p.View(WallTime(seconds(1'800'000'000))));
  REQUIRE(plan.status["failed"] == 2);  // pool b expects 4200
  REQUIRE(plan.status["failedNodes"][0]["pool"] == "b");
  REQUIRE(plan.status["failedNodes"][0]["failures"][0]["expected"] == "4200");
}

OperatorOptions Options() {
  OperatorOptions o;
  o.settings.namespace_name = "ls";
  o.workers = 1;
  o.leader_elect = false;
  return o;
}

TEST_CASE("reconciler: one bad node among six, NodeAudits made and judged, AUDIT mirrored", "[operator]") {
  FakeClock clock;
  FakeKubeApi api{clock};
  for (int i = 0; i < 6; ++i) {
    std::string name = "n" + std::to_string(i);
    REQUIRE(api.Create(kube::gvr::kNodes, "", Node(name, "h100")).ok());
    REQUIRE(api.Create(kube::gvr::kFabricHealths, "", Health(name)).ok());
  }
  REQUIRE(api.Create(kFleetAudits, "", Audit()).ok());
  auto built = BuildOperator(api, clock, Options());
  REQUIRE(built.ok());
  Operator& op = **built;
  REQUIRE(op.ListOnce().ok());
  auto r = op.fleetaudit_reconciler().Reconcile("pre");
  REQUIRE_FALSE(r.error);
  REQUIRE(r.requeue_after == seconds(300));
  REQUIRE(api.Objects(kNodeAudits).size() == 6);
  REQUIRE((*api.Peek(kFleetAudits, "", "pre"))["status"]["pending"] == 6);

  // The agents report (as the agent's NodeAuditRunner writes it).
  for (int i = 0; i < 6; ++i) {
    std::string name = "n" + std::to_string(i);
    Json status = Result(i == 4 ? WrongMtu() : audit::testing::GoodNode());
    REQUIRE(api.MergePatch(kNodeAudits, "", NodeAuditName("pre", name), {{"status", status}}, "status").ok());
  }
  clock.Advance(seconds(5));
  REQUIRE(op.ListOnce().ok());
  api.ClearCalls();
  r = op.fleetaudit_reconciler().Reconcile("pre");
  REQUIRE_FALSE(r.error);
  Json fa = *api.Peek(kFleetAudits, "", "pre");
  REQUIRE(fa["status"]["phase"] == "Completed");
  REQUIRE(fa["status"]["failed"] == 1);
  REQUIRE(fa["status"]["passed"] == 5);
  REQUIRE(fa["status"]["failedNodes"][0]["node"] == "n4");
  for (int i = 0; i < 6; ++i) {
    Json h = *api.Peek(kube::gvr::kFabricHealths, "", "n" + std::to_string(i));
    REQUIRE(h["status"]["auditResult"] == (i == 4 ? "Fail" : "Pass"));
  }
  // The writes: six FabricHealth patches, one FleetAudit status, Events.
  uint64_t health_patches = 0, audit_patches = 0;
  for (const auto& c : api.Calls()) {
    health_patches += c.resource == "fabrichealths" && c.subresource == "status";
    audit_patches += c.resource == "fleetaudits" && c.subresource == "status";
  }
  REQUIRE(health_patches == 6);
  REQUIRE(audit_patches == 1);
  bool event = false;
  for (const Json& e : api.Objects(kube::gvr::kEvents)) {
    event |= e["reason"] == "AuditFailed" && e["involvedObject"]["name"] == "n4";
  }
  REQUIRE(event);

  // Completed: a later reconcile writes nothing.
  REQUIRE(op.ListOnce().ok());
  api.ClearCalls();
  REQUIRE_FALSE(op.fleetaudit_reconciler().Reconcile("pre").error);
  REQUIRE(api.WriteCount() == 0);
}

}  // namespace
}  // namespace lockstep::op
