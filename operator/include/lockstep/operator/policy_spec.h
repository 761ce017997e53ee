// PolicySpec: a FabricPolicy's spec as typed values with the CRD's defaults.
// The type and its parser are the typed contract's (lockstep/api/
// fabric_policy.h); these names keep the operator's call sites short.
// Pure; thread-compatible.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/api/fabric_policy.h"

namespace lockstep::op {

using Json = nlohmann::json;
using PolicySpec = api::FabricPolicySpec;

// Parses spec (may be null or partial). Errors name the policy and the field:
//   FabricPolicy "default": spec.probe.intervalMs must be between 1 and 60000 (got 0)
inline Result<PolicySpec> ParsePolicySpec(const std::string& policy_name, const Json& spec) {
  return api::ParseFabricPolicySpec(policy_name, spec);
}

}  // namespace lockstep::op
