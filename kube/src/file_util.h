// Internal helpers for kube/: whole-file reads and base64 decoding. Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "lockstep/common/result.h"

namespace lockstep::kube::internal {

// Reads a whole file. kNotFound when it does not exist, kUnavailable otherwise.
Result<std::string> ReadFile(const std::string& path);

// Standard base64 (RFC 4648, "=" padding optional, whitespace ignored).
Result<std::string> Base64Decode(std::string_view in);

// Trims ASCII whitespace at both ends (token files often end with "\n").
std::string Trim(std::string s);

}  // namespace lockstep::kube::internal
