#include <catch2/catch.hpp>

#include "lockstep/kube/conditions.h"
#include "lockstep/operator/health_plan.h"

namespace lockstep::op {
namespace {

using kube::FindCondition;
using kube::SetCondition;

Json Node(const std::string& name, Json labels) {
  return {{"metadata", {{"name", name}, {"uid", "uid-" + name}, {"labels", labels}}}};
}
Json Policy(const std::string& name, const std::string& created, Json selector) {
  return {{"metadata", {{"name", name}, {"uid", "p-" + name}, {"creationTimestamp", created}}},
          {"spec", {{"nodeSelector", selector}}}};
}
const Json kGpu = {{"nvidia.com/gpu.present", "true"}};
const std::string kNow = "2026-11-22T08:00:00Z";

TEST_CASE("a selected node without a FabricHealth gets one that says the agent has not reported", "[operator]") {
  std::vector<PolicyView> policies = {ToPolicyView(Policy("default", "2026-01-01T00:00:00Z", nullptr))};
  HealthPlan plan = PlanHealth("n1", Node("n1", kGpu), policies, nullptr, kNow);
  REQUIRE(plan.action == HealthPlan::Action::kCreate);
  REQUIRE(plan.object["metadata"]["labels"][kPolicyLabel] == "default");
  REQUIRE(plan.object["metadata"]["ownerReferences"][0]["kind"] == "Node");
  REQUIRE(plan.object["metadata"]["ownerReferences"][0]["uid"] == "uid-n1");
  REQUIRE(plan.status_patch.has_value());
  const Json& st = (*plan.status_patch)["status"];
  REQUIRE(st["phase"] == "Pending");
  REQUIRE((*FindCondition(st, "Ready"))["reason"] == "AgentNotReporting");
  REQUIRE((*FindCondition(st, "PolicyConflict"))["status"] == "False");
}

TEST_CASE("planning is idempotent: an up-to-date FabricHealth needs nothing", "[operator]") {
  std::vector<PolicyView> policies = {ToPolicyView(Policy("default", "t", nullptr))};
  HealthPlan first = PlanHealth("n1", Node("n1", kGpu), policies, nullptr, kNow);
  Json existing = first.object;
  existing["status"] = (*first.status_patch)["status"];
  HealthPlan again = PlanHealth("n1", Node("n1", kGpu), policies, existing, "2026-11-22T09:00:00Z");
  REQUIRE(again.action == HealthPlan::Action::kNone);
  REQUIRE_FALSE(again.status_patch.has_value());
}

TEST_CASE("unselected or deleted nodes lose their FabricHealth", "[operator]") {
  std::vector<PolicyView> policies = {ToPolicyView(Policy("default", "t", nullptr))};
  Json existing = {{"metadata", {{"name", "n1"}}}};
  REQUIRE(PlanHealth("n1", nullptr, policies, existing, kNow).action == HealthPlan::Action::kDelete);
  REQUIRE(PlanHealth("n1", Node("n1", Json::object()), policies, existing, kNow).action == HealthPlan::Action::kDelete);
  REQUIRE(PlanHealth("n1", Node("n1", Json::object()), policies, nullptr, kNow).action == HealthPlan::Action::kNone);
}

TEST_CASE("two policies on one node are reported as a conflict, not fought over", "[operator]") {
  std::vector<PolicyView> policies = {
      ToPolicyView(Policy("young", "2026-02-01T00:00:00Z", nullptr)),
      ToPolicyView(Policy("old", "2026-01-01T00:00:00Z", Json::parse(R"({"matchLabels":{"nvidia.com/gpu.present":"true"}})")))};
  HealthPlan plan = PlanHealth("n1", Node("n1", kGpu), policies, nullptr, kNow);
  REQUIRE(plan.object["metadata"]["labels"][kPolicyLabel] == "old");
  const Json* c = FindCondition((*plan.status_patch)["status"], "PolicyConflict");
  REQUIRE((*c)["status"] == "True");
  REQUIRE((*c)["message"].get<std::string>().find("old, young") != std::string::npos);

  // A node that already belongs to "young" keeps it.
  Json existing = plan.object;
  existing["metadata"]["labels"][kPolicyLabel] = "young";
  existing["status"] = (*plan.status_patch)["status"];
  existing["status"]["policy"] = "young";
  HealthPlan keep = PlanHealth("n1", Node("n1", kGpu), policies, existing, kNow);
  REQUIRE(keep.action == HealthPlan::Action::kNone);
  REQUIRE((*keep.status_patch)["status"]["policy"] == "young");
  existing["status"] = (*keep.status_patch)["status"];
  REQUIRE_FALSE(PlanHealth("n1", Node("n1", kGpu), policies, existing, kNow).status_patch.has_value());
}

TEST_CASE("the agent's report is not overwritten by the operator", "[operator]") {
  std::vector<PolicyView> policies = {ToPolicyView(Policy("default", "t", nullptr))};
  HealthPlan first = PlanHealth("n1", Node("n1", kGpu), policies, nullptr, kNow);
  Json existing = first.object;
  existing["status"] = (*first.status_patch)["status"];
  existing["status"]["lastReportTime"] = kNow;
  existing["status"]["phase"] = "Healthy";
  existing["status"]["conditions"] =
      SetCondition(existing["status"]["conditions"], {"Ready", "True", "AgentReporting", "ok"}, 0, kNow);
  HealthPlan plan = PlanHealth("n1", Node("n1", kGpu), policies, existing, kNow);
  REQUIRE_FALSE(plan.status_patch.has_value());
}

TEST_CASE("conditions keep their transition time while the status holds", "[operator]") {
  Json c = SetCondition(nullptr, {"Ready", "False", "A", "m"}, 1, "t1");
  c = SetCondition(c, {"Ready", "False", "B", "m2"}, 2, "t2");
  REQUIRE(c.size() == 1);
  REQUIRE(c[0]["lastTransitionTime"] == "t1");
  REQUIRE(c[0]["reason"] == "B");
  c = SetCondition(c, {"Ready", "True", "C", "m3"}, 2, "t3");
  REQUIRE(c[0]["lastTransitionTime"] == "t3");
}

}  // namespace
}  // namespace lockstep::op
