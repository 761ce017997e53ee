#include <catch2/catch.hpp>

#include "lockstep/kube/label_selector.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/paths.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::kube {
namespace {

TEST_CASE("well-known resources", "[kube][paths]") {
  CHECK(gvr::kNodes.ApiVersion() == "v1");
  CHECK_FALSE(gvr::kNodes.namespaced);
  CHECK(gvr::kNodes.kind == "Node");
  CHECK(gvr::kDaemonSets.ApiVersion() == "apps/v1");
  CHECK(gvr::kLeases.ApiVersion() == "coordination.k8s.io/v1");
  CHECK(gvr::kFabricPolicies.ApiVersion() == "lockstep.dev/v1alpha1");
  CHECK_FALSE(gvr::kFabricPolicies.namespaced);
  CHECK(gvr::kFabricHealths.kind == "FabricHealth");
  CHECK(gvr::kTrainingJobs.namespaced);
  CHECK(gvr::kTrainingJobs.kind == "TrainingJob");
  CHECK(gvr::kEvents.resource == "events");
  CHECK(gvr::kPodDisruptionBudgets.ApiVersion() == "policy/v1");
  CHECK(gvr::kPodDisruptionBudgets.kind == "PodDisruptionBudget");
  CHECK(ResourcePath(gvr::kPodDisruptionBudgets, "ml", "demo-ranks") ==
        "/apis/policy/v1/namespaces/ml/poddisruptionbudgets/demo-ranks");
}

TEST_CASE("resource paths", "[kube][paths]") {
  CHECK(ResourcePath(gvr::kPods, "ns1", "p", "status") == "/api/v1/namespaces/ns1/pods/p/status");
  CHECK(ResourcePath(gvr::kPods, "", "") == "/api/v1/pods");
  CHECK(ResourcePath(gvr::kPods, "ns1") == "/api/v1/namespaces/ns1/pods");
  CHECK(ResourcePath(gvr::kNodes, "ignored", "n1") == "/api/v1/nodes/n1");
  CHECK(ResourcePath(gvr::kDaemonSets, "kube-system", "agent") ==
        "/apis/apps/v1/namespaces/kube-system/daemonsets/agent");
  CHECK(ResourcePath(gvr::kLeases, "lockstep", "lockstep-operator") ==
        "/apis/coordination.k8s.io/v1/namespaces/lockstep/leases/lockstep-operator");
  CHECK(ResourcePath(gvr::kFabricPolicies, "", "default", "status") ==
        "/apis/lockstep.dev/v1alpha1/fabricpolicies/default/status");
  CHECK(ResourcePath(gvr::kPods, "ns", "we ird") == "/api/v1/namespaces/ns/pods/we%20ird");
}

TEST_CASE("query strings encode values and skip empty ones", "[kube][paths]") {
  QueryBuilder q;
  q.Add("labelSelector", "app=x,env in (a,b)").Add("fieldSelector", "").Add("limit", 500);
  CHECK(q.ToString() == "?labelSelector=app%3Dx%2Cenv%20in%20%28a%2Cb%29&limit=500");
  CHECK(QueryBuilder().ToString().empty());
}

TEST_CASE("object keys and safe accessors", "[kube][paths]") {
  Json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}, {"generation", 3}}}};
  CHECK(ObjectKey(pod) == "ns/p");
  CHECK(ObjectKey(Json{{"metadata", {{"name", "n1"}}}}) == "n1");
  CHECK(SplitObjectKey("ns/p") == std::pair<std::string, std::string>{"ns", "p"});
  CHECK(SplitObjectKey("n1") == std::pair<std::string, std::string>{"", "n1"});
  CHECK(Generation(pod) == 3);
  CHECK(Name(Json::array()) == "");
  CHECK(GetString(pod, {"metadata", "generation"}, "x") == "x");  // wrong type -> fallback
  CHECK(GetInt(pod, {"spec", "missing"}, 7) == 7);
  CHECK(FindPath(Json(nullptr), {"a"}) == nullptr);
}

TEST_CASE("timestamps round-trip in MicroTime and RFC 3339", "[kube][paths]") {
  auto t = ParseRfc3339("2026-11-22T07:15:38.123456Z");
  REQUIRE(t.ok());
  CHECK(FormatMicroTime(*t) == "2026-11-22T07:15:38.123456Z");
  CHECK(FormatRfc3339(*t) == "2026-11-22T07:15:38Z");
  auto offset = ParseRfc3339("2026-11-22T09:15:38+02:00");
  REQUIRE(offset.ok());
  CHECK(FormatRfc3339(*offset) == "2026-11-22T07:15:38Z");
  CHECK(FormatMicroTime(WallTime{}) == "1970-01-01T00:00:00.000000Z");
  CHECK_FALSE(ParseRfc3339("2026-11-22 nonsense").ok());
  CHECK_FALSE(ParseRfc3339("2026-11-22T07:15:38").ok());
}

TEST_CASE("label selectors parse and match", "[kube][paths]") {
  Json labels = {{"app", "agent"}, {"tier", "node"}, {"env", "prod"}};
  auto match = [&](const char* sel) {
    auto s = LabelSelector::Parse(sel);
    REQUIRE(s.ok());
    return s->Matches(labels);
  };
  CHECK(match(""));
  CHECK(match("app=agent"));
  CHECK(match("app==agent,tier"));
  CHECK_FALSE(match("app!=agent"));
  CHECK(match("env in (prod, staging)"));
  CHECK_FALSE(match("env notin (prod)"));
  CHECK(match("!legacy"));
  CHECK_FALSE(match("!tier"));
  CHECK_FALSE(match("missing"));
  CHECK_FALSE(LabelSelector::Parse("a in b").ok());
  CHECK_FALSE(LabelSelector::Parse("a,,b").ok());
  CHECK(LabelSelector::Parse("x=1")->Matches(nullptr) == false);
}

}  // namespace
}  // namespace lockstep::kube
