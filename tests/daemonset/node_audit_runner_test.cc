// The agent's NodeAuditRunner on the in-memory FakeKubeApi: it sees only its
// own node's NodeAudits, runs each once and writes the status the operator
// reads.
#include <catch2/catch.hpp>

#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/agent/audit/node_audit_runner.h"
#include "lockstep/audit/audit_json.h"
#include "lockstep/audit/node_audit.h"
#include "lockstep/kube/gvr.h"

namespace lockstep::agent::audit {
namespace {

using kube::Json;
namespace la = lockstep::audit;

Json NodeAudit(const std::string& audit, const std::string& node, Json spec_extra = Json::object()) {
  Json spec = {{"fleetAudit", audit}, {"nodeName", node}};
  spec.update(spec_extra);
  return {{"apiVersion", "lockstep.dev/v1alpha1"},
          {"kind", "NodeAudit"},
          {"metadata",
           {{"name", audit + "." + node}, {"labels", {{la::kFleetAuditLabel, audit}, {la::kAuditNodeLabel, node}}}}},
          {"spec", spec}};
}

TEST_CASE("node audit runner: runs its own node's NodeAudits once and writes their status", "[audit]") {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  REQUIRE(
      api.Create(kube::gvr::kNodeAudits, "", NodeAudit("a1", "n1", {{"requiredModules", {"nvidia_peermem"}}})).ok());
  REQUIRE(api.Create(kube::gvr::kNodeAudits, "", NodeAudit("a1", "n2")).ok());
  metrics::Registry registry;
  int runs = 0;
  std::vector<std::string> modules_seen;
  NodeAuditRunner runner(
      api, clock,
      [&](const std::vector<std::string>& modules) -> Result<std::vector<la::Check>> {
        ++runs;
        modules_seen = modules;
        return std::vector<la::Check>{
            {.id = "backend.mtu", .subject = "rail0", .observed = "9000", .pool = la::PoolRule::kMajority},
            {.id = "pcie.link_width",
             .subject = "gpu0",
             .observed = "x8",
             .expected = "x16",
             .verdict = la::Verdict::kFail,
             .message = "downtrained"}};
      },
      {.node_name = "n1", .informer_seed = 1}, registry);
  REQUIRE(runner.informer().ListOnce().ok());
  REQUIRE(runner.RunPending() == 1);
  REQUIRE(runs == 1);
  REQUIRE(modules_seen == std::vector<std::string>{"nvidia_peermem"});
  Json mine = *api.Peek(kube::gvr::kNodeAudits, "", "a1.n1");
  REQUIRE(mine["status"]["phase"] == "Completed");
  REQUIRE(mine["status"]["verdict"] == "Fail");
  REQUIRE(mine["status"]["failed"] == 1);
  auto checks = la::ChecksFromJson(mine["status"]["checks"]);
  REQUIRE(checks.ok());
  REQUIRE(checks->size() == 2);
  REQUIRE((*checks)[0].pool == la::PoolRule::kMajority);
  REQUIRE_FALSE(api.Peek(kube::gvr::kNodeAudits, "", "a1.n2")->contains("status"));  // not this node's

  // Once: neither before the watch shows the status nor after.
  REQUIRE(runner.RunPending() == 0);
  REQUIRE(runner.informer().ListOnce().ok());
  REQUIRE(runner.RunPending() == 0);
  REQUIRE(runs == 1);
  // Its informer holds its own node's NodeAudits only (the label selector).
  REQUIRE(runner.informer().store().Size() == 1);
}

TEST_CASE("node audit runner: checks that cannot run give phase Error with the reason", "[audit]") {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  REQUIRE(api.Create(kube::gvr::kNodeAudits, "", NodeAudit("a2", "n1")).ok());
  metrics::Registry registry;
  NodeAuditRunner runner(
      api, clock,
      [](const std::vector<std::string>&) -> Result<std::vector<la::Check>> { return Unavailable("cannot read /sys"); },
      {.node_name = "n1", .informer_seed = 1}, registry);
  REQUIRE(runner.informer().ListOnce().ok());
  REQUIRE(runner.RunPending() == 1);
  Json na = *api.Peek(kube::gvr::kNodeAudits, "", "a2.n1");
  REQUIRE(na["status"]["phase"] == "Error");
  REQUIRE(na["status"]["error"] == "cannot read /sys");
}

}  // namespace
}  // namespace lockstep::agent::audit
