// REST paths and query strings for the Kubernetes API. Pure functions;
// thread-safe.
//
//   ResourcePath(gvr::kPods, "ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
//   ResourcePath(gvr::kDaemonSets, "", "")        == "/apis/apps/v1/daemonsets"
#pragma once

#include <string>
#include <string_view>

#include "lockstep/kube/gvr.h"

namespace lockstep::kube {

// Builds /api/v1[/namespaces/<ns>]/<resource>[/<name>[/<subresource>]] (core
// group) or /apis/<group>/<version>/... . ns is ignored for cluster-scoped
// resources; an empty ns on a namespaced resource addresses all namespaces.
// Path segments are percent-encoded. REQUIRES: subresource is empty when name is.
std::string ResourcePath(const Gvr& r, std::string_view ns, std::string_view name = "",
                         std::string_view subresource = "");

// Percent-encodes everything outside RFC 3986 "unreserved".
std::string UrlEncode(std::string_view s);

// Accumulates "k=v&k2=v2", encoding values; empty values are skipped.
class QueryBuilder {
 public:
  QueryBuilder& Add(std::string_view key, std::string_view value);
  QueryBuilder& Add(std::string_view key, long long value) { return Add(key, std::to_string(value)); }
  // "" when no parameter was added, otherwise "?k=v...".
  std::string ToString() const { return q_.empty() ? "" : "?" + q_; }

 private:
  std::string q_;
};

}  // namespace lockstep::kube
