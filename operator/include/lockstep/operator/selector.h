// Label selectors (metav1.LabelSelector) evaluated against object labels, and
// converted into the node affinity a DaemonSet needs. Pure.
#pragma once

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"

namespace lockstep::op {

// True when `labels` (a JSON object of string values, or null) satisfies
// `selector`. An empty selector matches everything. Malformed selectors are
// kInvalidArgument.
Result<bool> SelectorMatches(const nlohmann::json& selector, const nlohmann::json& labels);

// The selector as a pod spec `affinity` object (requiredDuringScheduling node
// affinity with one term), or null when the selector is empty.
nlohmann::json SelectorToNodeAffinity(const nlohmann::json& selector);

}  // namespace lockstep::op
