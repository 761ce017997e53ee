// Condition: a metav1.Condition as the lockstep CRDs' status.conditions hold
// it. Plain value; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"

namespace lockstep::api {

using Json = nlohmann::json;

struct Condition {
  std::string type;    // CamelCase, e.g. Ready
  std::string status;  // "True", "False" or "Unknown"
  std::optional<int64_t> observed_generation;
  std::string last_transition_time;  // RFC 3339
  std::string reason;
  std::string message;
  bool operator==(const Condition&) const = default;
};

Json ToJson(const Condition& c);
Json ToJson(const std::vector<Condition>& conditions);

// Parses a conditions list. `context` prefixes errors (e.g. "FabricHealth \"n1\": ").
Result<std::vector<Condition>> ConditionsFromJson(const Json& list, const std::string& context,
                                                  const std::string& path);

}  // namespace lockstep::api
