// Kubernetes timestamp formats. Pure functions; thread-safe.
//   metav1.Time      "2026-11-22T07:15:38Z"          (FormatRfc3339)
//   metav1.MicroTime "2026-11-22T07:15:38.123456Z"   (FormatMicroTime; leases, events)
#pragma once

#include <string>
#include <string_view>

#include "lockstep/common/clock.h"
#include "lockstep/common/result.h"

namespace lockstep::kube {

std::string FormatRfc3339(WallTime t);
std::string FormatMicroTime(WallTime t);

// Parses RFC 3339 with an optional fraction (any number of digits, kept to
// microseconds) and a "Z" or "+hh:mm"/"-hh:mm" offset.
Result<WallTime> ParseRfc3339(std::string_view s);

}  // namespace lockstep::kube
