// metav1.Condition helpers. Pure.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace lockstep::op {

struct Condition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;  // CamelCase
  std::string message;
};

// Returns `conditions` (a JSON array, possibly null) with `c` set. The
// lastTransitionTime is kept when the status did not change, so re-running a
// reconcile with the same outcome yields an identical list.
nlohmann::json SetCondition(const nlohmann::json& conditions, const Condition& c, long long observed_generation,
                            const std::string& now_rfc3339);

// The condition of `type` in a status object, or null.
const nlohmann::json* FindCondition(const nlohmann::json& status, const std::string& type);

}  // namespace lockstep::op
