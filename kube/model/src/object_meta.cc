#include "lockstep/kube/object_meta.h"

namespace lockstep::kube {

const Json* FindPath(const Json& obj, std::initializer_list<std::string_view> path) {
  const Json* cur = &obj;
  for (std::string_view k : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

const Json& Field(const Json& obj, std::initializer_list<std::string_view> path) {
  static const Json kNull;
  const Json* j = FindPath(obj, path);
  return j != nullptr ? *j : kNull;
}

std::string GetString(const Json& obj, std::initializer_list<std::string_view> path, std::string fallback) {
  const Json* j = FindPath(obj, path);
  if (j == nullptr || !j->is_string()) return fallback;
  return j->get_ref<const std::string&>();
}

int64_t GetInt(const Json& obj, std::initializer_list<std::string_view> path, int64_t fallback) {
  const Json* j = FindPath(obj, path);
  if (j == nullptr || !j->is_number_integer()) return fallback;
  return j->get<int64_t>();
}

std::string ObjectKey(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string k;
  k.reserve(ns.size() + 1 + name.size());
  k.append(ns).append("/").append(name);
  return k;
}

std::pair<std::string, std::string> SplitObjectKey(std::string_view key) {
  size_t slash = key.find('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

std::string DumpJson(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace lockstep::kube
