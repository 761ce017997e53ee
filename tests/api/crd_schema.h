// Test helpers that read the CRDs in crds/ (path from CMake) and walk their
// openAPIV3Schema: build a fully populated object, apply defaults as the API
// server does, and list key paths. Not thread-safe (tests only).
#pragma once

#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace lockstep::api::testing {

using Json = nlohmann::json;

// The openAPIV3Schema of crds/<file> (e.g. "lockstep.dev_fabricpolicies.yaml") as JSON.
Json LoadCrdSchema(const std::string& file);

// A value for every field the schema declares, satisfying its bounds, enums
// and the CRDs' cross-field rules. Maps (additionalProperties) get one entry;
// objects that preserve unknown fields get a minimal valid value.
Json Populate(const Json& schema, const std::string& path = "");

// The API server's defaulting: fills `value` with the schema's defaults.
Json ApplyDefaults(const Json& schema, Json value);

// Key paths ("a.b[].c") of `value` that `schema` does not declare. Maps and
// preserve-unknown-fields objects are opaque.
std::set<std::string> KeysNotInSchema(const Json& schema, const Json& value, const std::string& path = "");

// Key paths present in one of a, b but not the other (object keys, recursing
// into lists element by element).
std::set<std::string> KeyDiff(const Json& a, const Json& b, const std::string& path = "");

}  // namespace lockstep::api::testing
