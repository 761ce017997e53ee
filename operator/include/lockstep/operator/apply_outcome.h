// Pure helpers for applying the agent objects: whether a live object already
// carries what we would apply (drift detection), and how to explain an object
// the API server rejected (422 Invalid) in terms of the FabricPolicy's spec.
// Stateless; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace lockstep::op {

using Json = nlohmann::json;

// True when every field of `desired` is in `live` with the same value: objects
// compare key by key (extra live keys, such as server defaults, are ignored);
// arrays element by element over desired's length (elements others appended
// are theirs, as with server-side apply); scalars by value. A desired null, "",
// [] or {} is also matched by an absent live field (the API server omits
// empty values). So a `kubectl edit` of any field the operator sets makes this
// false, and an untouched live object makes it true.
bool LiveCovers(const Json& live, const Json& desired);

// The first field path an API server 422 message names, e.g.
// "spec.template.spec.containers[0].image" from
// `DaemonSet.apps "x" is invalid: spec.template.spec.containers[0].image: Required value`.
// "" when none.
std::string InvalidFieldPath(const std::string& message);

// The FabricPolicy field that produces `path` of the rendered agent object of
// `kind` ("DaemonSet" or "ConfigMap"), e.g. "spec.agent.image"; "" if unknown.
std::string PolicyFieldForAgentPath(const std::string& kind, const std::string& path);

// A status/event message for an agent object the API server rejected: names
// the policy field first when known, then the object field and the server's
// words, and what to do.
std::string DescribeRejectedApply(const std::string& kind, const std::string& name, const std::string& message);

}  // namespace lockstep::op
