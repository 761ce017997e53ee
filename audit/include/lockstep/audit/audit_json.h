// JSON and text views of checks: what the agent writes into its NodeAudit's
// status (every check with its rule, so the operator can judge the pool) and
// what `lockstep-agent audit` prints. Pure.
//
// A check: {"id", "subject"?, "observed", "number"?, "expected"?, "verdict",
// "message"?, "rule"?}; empty fields and rule "none" are left out to keep
// the per-node object small.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/audit/check.h"
#include "lockstep/audit/pool.h"
#include "lockstep/common/result.h"

namespace lockstep::audit {

nlohmann::json CheckToJson(const Check& c);
nlohmann::json ChecksToJson(const std::vector<Check>& checks);
// InvalidArgument naming the entry and field when a check is malformed.
Result<std::vector<Check>> ChecksFromJson(const nlohmann::json& j);

// {"node", "pool", "verdict", "passed", "failed", "notPresent", "checks": [...]}
nlohmann::json NodeVerdictToJson(const NodeVerdict& v);

// A table for people: one line per check (failures first when
// `failures_first`), then "audit: Fail (3 failed, 40 passed, 12 not present)".
std::string FormatText(const NodeVerdict& v, bool failures_first = true);

}  // namespace lockstep::audit
