#include "lockstep/operator/policy_status.h"

#include "lockstep/api/fabric_policy.h"
#include "lockstep/operator/agent_objects.h"
#include "lockstep/kube/conditions.h"

namespace lockstep::op {

using kube::Condition;
using kube::SetCondition;

Json ComputePolicyStatus(const PolicyStatusInput& in) {
  const Json& policy = *in.policy;
  const std::string name = policy["metadata"].value("name", "");
  const long long generation = policy["metadata"].value("generation", 0LL);
  Json old = policy.contains("status") && policy["status"].is_object() ? policy["status"] : Json::object();

  int desired = 0, conflicting = 0;
  for (const Json* node : in.nodes) {
    std::vector<std::string> m = MatchingPolicies(*node, in.policies);
    if (std::find(m.begin(), m.end(), name) == m.end()) continue;
    ++desired;
    if (m.size() > 1) ++conflicting;
  }
  int ready = 0, updated = 0, scheduled = 0;
  if (in.daemonset && in.daemonset->contains("status")) {
    const Json& ds = (*in.daemonset)["status"];
    ready = ds.value("numberReady", 0);
    updated = ds.value("updatedNumberScheduled", 0);
    scheduled = ds.value("desiredNumberScheduled", 0);
  }
  api::FabricPolicyStatus typed;  // the scalar fields; conditions are merged below
  typed.observed_generation = generation;
  typed.desired_nodes = desired;
  typed.ready_nodes = ready;
  typed.conflicting_nodes = conflicting;
  typed.nodes = std::to_string(ready) + "/" + std::to_string(desired);
  typed.daemon_set = AgentObjectName(name);
  Json status = api::ToJson(typed);
  Json conds = old.contains("conditions") ? old["conditions"] : Json::array();
  auto set = [&](const Condition& c) { conds = SetCondition(conds, c, generation, in.now); };

  if (!in.spec_error.empty()) {
    set({"Ready", "False", "InvalidSpec", in.spec_error});
    set({"Progressing", "False", "InvalidSpec", "fix the spec to continue"});
    set({"Degraded", "True", "InvalidSpec", in.spec_error});
  } else if (!in.apply_error.empty()) {
    set({"Ready", "False", "ApplyFailed", in.apply_error});
    set({"Progressing", "True", "Retrying", "applying the agent DaemonSet failed; retrying"});
    set({"Degraded", "True", "ApplyFailed", in.apply_error});
  } else {
    const bool rolling = !in.daemonset || updated < scheduled || ready < scheduled;
    if (desired == 0) {
      set({"Ready", "False", "NoMatchingNodes", "spec.nodeSelector matches no node"});
    } else if (ready >= desired && !rolling) {
      set({"Ready", "True", "AgentsReady", "node agents ready on " + std::to_string(ready) + "/" +
                                               std::to_string(desired) + " nodes"});
    } else {
      set({"Ready", "False", "AgentsNotReady", "node agents ready on " + std::to_string(ready) + "/" +
                                                   std::to_string(desired) + " nodes"});
    }
    if (rolling) set({"Progressing", "True", "RollingOut", "the agent DaemonSet is rolling out"});
    else set({"Progressing", "False", "RolloutComplete", "the agent DaemonSet is up to date"});
    if (conflicting > 0) {
      set({"Degraded", "True", "NodeConflict", std::to_string(conflicting) +
                                                  " node(s) are also selected by another FabricPolicy; see each "
                                                  "FabricHealth's PolicyConflict condition"});
    } else {
      set({"Degraded", "False", "AsExpected", "no conflicts"});
    }
  }
  status["conditions"] = conds;
  return status;
}

}  // namespace lockstep::op
