#include <catch2/catch.hpp>

#include "lockstep/kube/conditions.h"
#include "lockstep/operator/policy_status.h"

namespace lockstep::op {
namespace {

using kube::FindCondition;

Json Node(const std::string& name, bool gpu) {
  Json labels = gpu ? Json{{"nvidia.com/gpu.present", "true"}} : Json::object();
  return {{"metadata", {{"name", name}, {"labels", labels}}}};
}

TEST_CASE("policy status counts desired, ready and conflicting nodes", "[operator]") {
  Json policy = {{"metadata", {{"name", "default"}, {"generation", 3}, {"creationTimestamp", "a"}}}};
  Json other = {{"metadata", {{"name", "other"}, {"creationTimestamp", "b"}}},
                {"spec", {{"nodeSelector", {{"matchLabels", {{"pool", "x"}}}}}}}};
  std::vector<Json> nodes = {Node("g1", true), Node("g2", true), Node("c1", false)};
  nodes[1]["metadata"]["labels"]["pool"] = "x";
  Json ds = {{"status", {{"numberReady", 2}, {"desiredNumberScheduled", 2}, {"updatedNumberScheduled", 2}}}};
  PolicyStatusInput in;
  in.policy = &policy;
  for (const Json& n : nodes) in.nodes.push_back(&n);
  in.policies = {ToPolicyView(policy), ToPolicyView(other)};
  in.daemonset = &ds;
  in.now = "t";
  Json st = ComputePolicyStatus(in);
  REQUIRE(st["desiredNodes"] == 2);
  REQUIRE(st["readyNodes"] == 2);
  REQUIRE(st["nodes"] == "2/2");
  REQUIRE(st["conflictingNodes"] == 1);
  REQUIRE(st["observedGeneration"] == 3);
  REQUIRE((*FindCondition(st, "Ready"))["status"] == "True");
  REQUIRE((*FindCondition(st, "Degraded"))["reason"] == "NodeConflict");
  REQUIRE((*FindCondition(st, "Ready"))["observedGeneration"] == 3);
}

TEST_CASE("an invalid spec is reported, not applied", "[operator]") {
  Json policy = {{"metadata", {{"name", "bad"}, {"generation", 1}}}};
  PolicyStatusInput in;
  in.policy = &policy;
  in.spec_error = "FabricPolicy \"bad\": spec.probe.intervalMs must be between 1 and 60000 (got 0)";
  in.now = "t";
  Json st = ComputePolicyStatus(in);
  REQUIRE((*FindCondition(st, "Ready"))["status"] == "False");
  REQUIRE((*FindCondition(st, "Degraded"))["message"] == in.spec_error);
}

TEST_CASE("a rollout in progress is Progressing and not Ready", "[operator]") {
  Json policy = {{"metadata", {{"name", "default"}, {"generation", 1}}}};
  Json n1 = Node("g1", true), n2 = Node("g2", true);
  Json ds = {{"status", {{"numberReady", 1}, {"desiredNumberScheduled", 2}, {"updatedNumberScheduled", 1}}}};
  PolicyStatusInput in;
  in.policy = &policy;
  in.nodes = {&n1, &n2};
  in.policies = {ToPolicyView(policy)};
  in.daemonset = &ds;
  in.now = "t";
  Json st = ComputePolicyStatus(in);
  REQUIRE(st["nodes"] == "1/2");
  REQUIRE((*FindCondition(st, "Ready"))["reason"] == "AgentsNotReady");
  REQUIRE((*FindCondition(st, "Progressing"))["status"] == "True");
}

}  // namespace
}  // namespace lockstep::op
