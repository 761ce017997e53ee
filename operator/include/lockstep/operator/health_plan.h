// Planning for FabricHealth objects: one per node that a FabricPolicy selects,
// named after the node. Pure: cached objects in, a decision out.
//
// Two policies selecting the same node is a conflict: the node keeps the policy
// it already has (or the oldest policy, by creation time then name, when it has
// none) and the conflict is reported on the FabricHealth and on both policies.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/api/defaults.h"

namespace lockstep::op {

using Json = nlohmann::json;

// A FabricPolicy as planning needs it.
struct PolicyView {
  std::string name;
  std::string uid;
  std::string created;  // metadata.creationTimestamp (RFC 3339 sorts as text)
  Json node_selector;   // null when the spec is invalid: such a policy selects nothing
};

PolicyView ToPolicyView(const Json& policy);

// Names of the policies whose selector matches the node, oldest first.
std::vector<std::string> MatchingPolicies(const Json& node, const std::vector<PolicyView>& policies);

struct HealthPlan {
  enum class Action { kNone, kCreate, kDelete, kUpdate };
  Action action = Action::kNone;
  Json object;                       // kCreate/kUpdate: metadata (labels, ownerReferences)
  std::optional<Json> status_patch;  // a merge patch for the status subresource, when it must change
};

// node: the Node or null if it is gone; existing: the FabricHealth or null.
HealthPlan PlanHealth(const std::string& node_name, const Json& node, const std::vector<PolicyView>& policies,
                      const Json& existing, const std::string& now_rfc3339);

// The label that records which policy a FabricHealth belongs to.
inline constexpr const char* kPolicyLabel = api::kPolicyLabel;

}  // namespace lockstep::op
