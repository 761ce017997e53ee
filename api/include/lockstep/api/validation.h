// Syntax checks shared by the CRD conversions and agent.yaml: IPv4 endpoints,
// Kubernetes label keys and values, resource quantities. Pure functions.
#pragma once

#include <string>

#include "lockstep/common/result.h"

namespace lockstep::api {

// An IPv4 endpoint "a.b.c.d:port".
struct HostPort {
  std::string host;  // IPv4 literal
  int port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
  bool operator==(const HostPort&) const = default;
};

// "a.b.c.d" in dotted decimal, each part 0..255 without leading zeros.
bool IsIpv4(const std::string& s);
// A Linux network interface name: 1 to 15 characters, none of them '/',
// ':' or whitespace, and not "." or "..".
bool IsInterfaceName(const std::string& s);

// Parses "a.b.c.d:port" with port in [min_port, 65535]. `what` names the field.
Result<HostPort> ParseHostPort(const std::string& text, const std::string& what, int min_port = 0);

// A Kubernetes qualified name used as a label key: [prefix/]name, the prefix
// a DNS subdomain (<= 253), the name <= 63 of [A-Za-z0-9-_.] starting and
// ending alphanumeric.
bool IsLabelKey(const std::string& s);
// A label value: empty, or <= 63 of [A-Za-z0-9-_.] starting and ending alphanumeric.
bool IsLabelValue(const std::string& s);

// A non-negative Kubernetes resource quantity ("100m", "64Mi", "1", "1e3").
bool IsNonNegativeQuantity(const std::string& s);

// Standard base64 of exactly `bytes` bytes (with padding).
bool IsBase64OfSize(const std::string& s, size_t bytes);

// The message for a failover section whose hold-down cap is below its clean
// period (the CRD's CEL rule says the same): "<prefix>.maxHoldDownSeconds must
// be greater than or equal to <prefix>.readmitAfterSeconds (got 1 < 2); ..."
std::string FailoverOrderMessage(const std::string& prefix, int readmit_after_seconds, int max_hold_down_seconds);

}  // namespace lockstep::api
