#include "crd_schema.h"

#include <yaml-cpp/yaml.h>

#include <map>
#include <stdexcept>

namespace lockstep::api::testing {
namespace {

Json ToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json j = Json::object();
      for (const auto& kv : n) j[kv.first.Scalar()] = ToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      Json j = Json::array();
      for (const auto& v : n) j.push_back(ToJson(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      if (s == "true" || s == "false") return s == "true";
      try {
        size_t used = 0;
        long long v = std::stoll(s, &used);
        if (used == s.size()) return v;
      } catch (const std::exception&) {
      }
      return s;
    }
    default:
      return nullptr;
  }
}

bool IsOpaque(const Json& schema) {
  return schema.value("x-kubernetes-preserve-unknown-fields", false) || schema.contains("additionalProperties");
}

// Values for strings whose schema the generator cannot satisfy generically.
const std::map<std::string, Json>& Overrides() {
  static const std::map<std::string, Json> k = {
      {".status.probeAddresses[]", "10.0.0.1:7311"},
      {".status.nodePublicKey", "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="},
      {".status.hostAddress", "10.0.200.1"},
      {".status.conditions[].type", "Ready"},
      {".status.conditions[].reason", "Populated"},
      {".spec.tolerations[].operator", "Equal"},
      {".spec.nodeSelector.matchExpressions[].operator", "In"},
      {".spec.tolerations[].effect", "NoExecute"},
      {".spec.rails", Json::array({"x"})},  // spec.latency.rails[].name must be one of them
      {".spec.nodeSelector.matchLabels", {{"example.com/role", "gpu"}}},
      {".spec.template", {{"metadata", {{"labels", {{"app", "train"}}}}},
                          {"spec", {{"containers", {{{"name", "trainer"}, {"image", "python:3"}}}}}}}},
  };
  return k;
}

}  // namespace

Json LoadCrdSchema(const std::string& file) {
  YAML::Node crd = YAML::LoadFile(std::string(LOCKSTEP_CRD_DIR) + "/" + file);
  return ToJson(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]);
}

Json Populate(const Json& schema, const std::string& path) {
  if (auto it = Overrides().find(path); it != Overrides().end()) return it->second;
  if (schema.value("x-kubernetes-int-or-string", false)) return "1";
  const std::string type = schema.value("type", "");
  if (type == "object") {
    Json out = Json::object();
    if (schema.contains("additionalProperties")) {
      out["key"] = Populate(schema["additionalProperties"], path + "{}");
      return out;
    }
    const Json props = schema.value("properties", Json::object());
    for (const auto& [k, sub] : props.items()) {
      out[k] = Populate(sub, path + "." + k);
    }
    return out;
  }
  if (type == "array") {
    // Lists of scalars keep their default (e.g. a set of Xids); lists of
    // objects get one fully populated item.
    if (schema.contains("default") && schema["items"].value("type", "") != "object") return schema["default"];
    return Json::array({Populate(schema["items"], path + "[]")});
  }
  if (type == "integer") {
    if (schema.contains("default")) return schema["default"];
    return schema.value("minimum", 1LL) + (schema.contains("maximum") ? 0 : 1);
  }
  if (type == "boolean") return !schema.value("default", false);
  if (type == "string") {
    if (schema.contains("enum")) return schema["enum"].back();
    if (schema.value("format", "") == "date-time") return "2026-01-01T00:00:00Z";
    if (schema.contains("default")) return schema["default"];
    return "x";
  }
  throw std::runtime_error("Populate: no value for " + path + " (type \"" + type + "\")");
}

Json ApplyDefaults(const Json& schema, Json value) {
  if (!value.is_object() || !schema.contains("properties")) return value;
  for (const auto& [k, sub] : schema["properties"].items()) {
    if (!value.contains(k) && sub.contains("default")) value[k] = sub["default"];
    if (value.contains(k)) value[k] = ApplyDefaults(sub, value[k]);
  }
  return value;
}

std::set<std::string> KeysNotInSchema(const Json& schema, const Json& value, const std::string& path) {
  std::set<std::string> out;
  if (IsOpaque(schema)) return out;
  if (value.is_array() && schema.contains("items")) {
    for (const Json& v : value) {
      auto sub = KeysNotInSchema(schema["items"], v, path + "[]");
      out.insert(sub.begin(), sub.end());
    }
    return out;
  }
  if (!value.is_object()) return out;
  const Json props = schema.value("properties", Json::object());
  for (const auto& [k, v] : value.items()) {
    if (!props.contains(k)) {
      out.insert(path + "." + k);
      continue;
    }
    auto sub = KeysNotInSchema(props[k], v, path + "." + k);
    out.insert(sub.begin(), sub.end());
  }
  return out;
}

std::set<std::string> KeyDiff(const Json& a, const Json& b, const std::string& path) {
  std::set<std::string> out;
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items()) {
      if (!b.contains(k)) out.insert(path + "." + k + " (only in the first)");
      else for (const auto& d : KeyDiff(v, b[k], path + "." + k)) out.insert(d);
    }
    for (const auto& [k, v] : b.items()) {
      if (!a.contains(k)) out.insert(path + "." + k + " (only in the second)");
    }
  } else if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      for (const auto& d : KeyDiff(a[i], b[i], path + "[]")) out.insert(d);
    }
  }
  return out;
}

}  // namespace lockstep::api::testing
