// The NodeAudit contract between the operator and the agents: the labels the
// operator puts on each NodeAudit (the agent watches its own node's with a
// label selector) and the status the agent writes (the operator reads
// `checks` back with ChecksFromJson). Pure.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/audit/check.h"

namespace lockstep::audit {

inline constexpr char kFleetAuditLabel[] = "lockstep.dev/fleet-audit";
inline constexpr char kAuditNodeLabel[] = "lockstep.dev/node";

// {"phase": "Completed", "completionTime", "verdict" (the local one), "passed",
// "failed", "notPresent", "checks": [...]}.
nlohmann::json CompletedNodeAuditStatus(const std::vector<Check>& checks, const std::string& completion_time);

// {"phase": "Error", "completionTime", "error"}.
nlohmann::json ErrorNodeAuditStatus(const std::string& error, const std::string& completion_time);

}  // namespace lockstep::audit
