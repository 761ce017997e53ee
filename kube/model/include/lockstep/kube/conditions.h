// metav1.Condition lists (status.conditions), the one implementation both the
// operator and the agent use. Pure functions; thread-safe.
//
//   status["conditions"] = SetCondition(status["conditions"],
//       {"Ready", "True", "ClockLocked", "fabric time is locked"}, generation, FormatRfc3339(now));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lockstep/kube/gvr.h"

namespace lockstep::kube {

struct Condition {
  std::string type;
  std::string status;   // "True", "False", "Unknown"
  std::string reason;   // CamelCase
  std::string message;
};

// Returns `conditions` (a JSON array, possibly null) with `c` upserted by type.
// lastTransitionTime moves to `now_rfc3339` only when the status changes (or
// was never set), so re-running with the same outcome yields an identical
// list. observedGeneration is written when given and kept otherwise; fields
// this code does not know, other conditions and their order are kept.
Json SetCondition(const Json& conditions, const Condition& c, std::optional<int64_t> observed_generation,
                  std::string_view now_rfc3339);

// The condition of `type` in a status object (status.conditions[]), or null.
const Json* FindCondition(const Json& status, std::string_view type);

}  // namespace lockstep::kube
