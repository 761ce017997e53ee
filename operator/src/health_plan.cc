#include "lockstep/operator/health_plan.h"

#include <algorithm>

#include "lockstep/api/fabric_health.h"
#include "lockstep/api/fabric_policy.h"
#include "lockstep/kube/conditions.h"
#include "lockstep/kube/label_selector.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::op {
namespace {

using kube::Field;
using kube::SelectorMatches;
using kube::SetCondition;

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

PolicyView ToPolicyView(const Json& policy) {
  PolicyView v;
  v.name = Field(policy, {"metadata", "name"}).is_string() ? policy["metadata"]["name"].get<std::string>() : "";
  v.uid = Field(policy, {"metadata", "uid"}).is_string() ? policy["metadata"]["uid"].get<std::string>() : "";
  const Json& created = Field(policy, {"metadata", "creationTimestamp"});
  v.created = created.is_string() ? created.get<std::string>() : "";
  const Json& sel = Field(policy, {"spec", "nodeSelector"});
  // A missing selector takes the CRD default; the API server fills it in, so
  // null here only happens for objects written without the schema.
  v.node_selector = sel.is_null() ? api::ToJson(api::DefaultNodeSelector()) : sel;
  return v;
}

std::vector<std::string> MatchingPolicies(const Json& node, const std::vector<PolicyView>& policies) {
  std::vector<const PolicyView*> hits;
  const Json& labels = Field(node, {"metadata", "labels"});
  for (const PolicyView& p : policies) {
    if (p.node_selector.is_null()) continue;
    auto m = SelectorMatches(p.node_selector, labels);
    if (m.ok() && *m) hits.push_back(&p);
  }
  std::sort(hits.begin(), hits.end(), [](const PolicyView* a, const PolicyView* b) {
    return std::tie(a->created, a->name) < std::tie(b->created, b->name);
  });
  std::vector<std::string> names;
  for (const PolicyView* p : hits) names.push_back(p->name);
  return names;
}

HealthPlan PlanHealth(const std::string& node_name, const Json& node, const std::vector<PolicyView>& policies,
                      const Json& existing, const std::string& now) {
  HealthPlan plan;
  std::vector<std::string> matching = node.is_null() ? std::vector<std::string>{} : MatchingPolicies(node, policies);
  if (matching.empty()) {
    if (!existing.is_null()) plan.action = HealthPlan::Action::kDelete;
    return plan;
  }
  // Keep the policy the node already has while it still matches.
  std::string current;
  if (const Json& labels = Field(existing, {"metadata", "labels"}); labels.is_object()) {
    current = labels.value(kPolicyLabel, "");
  }
  std::string policy =
      std::find(matching.begin(), matching.end(), current) != matching.end() ? current : matching.front();

  Json metadata = {
      {"name", node_name},
      {"labels", {{kPolicyLabel, policy}, {"app.kubernetes.io/managed-by", "lockstep-operator"}}},
      {"ownerReferences",
       Json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_name},
                     {"uid", Field(node, {"metadata", "uid"}).is_string() ? node["metadata"]["uid"] : Json("")}}})}};
  if (existing.is_null()) {
    plan.action = HealthPlan::Action::kCreate;
    plan.object = {{"apiVersion", "lockstep.dev/v1alpha1"}, {"kind", "FabricHealth"}, {"metadata", metadata}};
  } else if (current != policy || Field(existing, {"metadata", "ownerReferences"}) != metadata["ownerReferences"]) {
    plan.action = HealthPlan::Action::kUpdate;
    plan.object = existing;
    plan.object["metadata"]["labels"][kPolicyLabel] = policy;
    plan.object["metadata"]["ownerReferences"] = metadata["ownerReferences"];
  }

  // The status fields the operator owns (api::FabricHealthOperatorStatus), and
  // the agent's until its first report.
  const Json old_status = existing.is_object() && existing.contains("status") ? existing["status"] : Json::object();
  Json status = old_status;
  status["nodeName"] = node_name;
  status.update(api::ToJson(api::FabricHealthOperatorStatus{policy}));
  const bool reported = old_status.contains("lastReportTime") && !old_status["lastReportTime"].is_null();
  Json conds = old_status.contains("conditions") ? old_status["conditions"] : Json::array();
  if (!reported) {
    status["phase"] = "Pending";
    conds = SetCondition(conds, {api::kAgentConditionType, "Unknown", "AgentNotReporting",
                                 "the node agent has not reported for this node yet"}, 0, now);
  }
  if (matching.size() > 1) {
    conds = SetCondition(conds, {api::kOperatorConditionType, "True", "MultiplePolicies",
                                 "node is selected by FabricPolicies " + Join(matching) + "; using \"" + policy +
                                     "\". Make the policies' nodeSelectors disjoint."}, 0, now);
  } else {
    conds = SetCondition(conds, {api::kOperatorConditionType, "False", "SinglePolicy", "node is selected by one FabricPolicy"}, 0,
                         now);
  }
  status["conditions"] = conds;
  if (status != old_status) plan.status_patch = Json{{"status", status}};
  return plan;
}

}  // namespace lockstep::op
