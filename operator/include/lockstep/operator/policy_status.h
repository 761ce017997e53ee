// The status of a FabricPolicy, computed from the cache. Pure.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/operator/health_plan.h"

namespace lockstep::op {

struct PolicyStatusInput {
  const Json* policy = nullptr;          // the FabricPolicy
  std::vector<const Json*> nodes;        // all nodes
  std::vector<PolicyView> policies;      // all policies (for conflicts)
  const Json* daemonset = nullptr;       // the agent DaemonSet, or null
  std::string spec_error;                // non-empty when the spec failed to parse
  std::string apply_error;               // non-empty when applying children failed
  std::string now;                       // RFC 3339, for lastTransitionTime
};

// The complete new .status object.
Json ComputePolicyStatus(const PolicyStatusInput& in);

}  // namespace lockstep::op
