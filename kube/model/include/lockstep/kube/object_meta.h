// Exception-free accessors for Kubernetes objects held as Json, and the
// "namespace/name" keys used by stores and work queues. nlohmann::json throws
// on a missing key or a type mismatch; these return defaults instead.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "lockstep/kube/gvr.h"

namespace lockstep::kube {

// Walks obj[k0][k1]...; nullptr when a step is missing or not an object.
const Json* FindPath(const Json& obj, std::initializer_list<std::string_view> path);
// The value at path, or a null Json when a step is missing (never throws).
const Json& Field(const Json& obj, std::initializer_list<std::string_view> path);
// The string/integer at path, or `fallback` when missing or of another type.
std::string GetString(const Json& obj, std::initializer_list<std::string_view> path,
                      std::string fallback = "");
int64_t GetInt(const Json& obj, std::initializer_list<std::string_view> path, int64_t fallback = 0);

inline std::string Name(const Json& o) { return GetString(o, {"metadata", "name"}); }
inline std::string Namespace(const Json& o) { return GetString(o, {"metadata", "namespace"}); }
inline std::string Uid(const Json& o) { return GetString(o, {"metadata", "uid"}); }
inline std::string ResourceVersion(const Json& o) { return GetString(o, {"metadata", "resourceVersion"}); }
inline int64_t Generation(const Json& o) { return GetInt(o, {"metadata", "generation"}); }

// "ns/name" for namespaced objects, "name" for cluster-scoped ones (client-go's
// MetaNamespaceKeyFunc).
std::string ObjectKey(std::string_view ns, std::string_view name);
inline std::string ObjectKey(const Json& obj) { return ObjectKey(Namespace(obj), Name(obj)); }
// Inverse of ObjectKey: {"ns","name"} or {"","name"}.
std::pair<std::string, std::string> SplitObjectKey(std::string_view key);

// Serializes without throwing (invalid UTF-8 is replaced with U+FFFD).
std::string DumpJson(const Json& j);

}  // namespace lockstep::kube
