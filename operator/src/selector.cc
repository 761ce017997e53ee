#include "lockstep/operator/selector.h"

#include <algorithm>

namespace lockstep::op {

using Json = nlohmann::json;

namespace {

const std::string* Label(const Json& labels, const std::string& key) {
  if (!labels.is_object()) return nullptr;
  auto it = labels.find(key);
  if (it == labels.end() || !it->is_string()) return nullptr;
  return it->get_ptr<const std::string*>();
}

}  // namespace

Result<bool> SelectorMatches(const Json& selector, const Json& labels) {
  if (selector.is_null()) return true;
  if (!selector.is_object()) return InvalidArgument("label selector must be an object");
  if (auto ml = selector.find("matchLabels"); ml != selector.end() && !ml->is_null()) {
    if (!ml->is_object()) return InvalidArgument("matchLabels must be a map of strings");
    for (const auto& [k, v] : ml->items()) {
      if (!v.is_string()) return InvalidArgument("matchLabels[" + k + "] must be a string");
      const std::string* have = Label(labels, k);
      if (!have || *have != v.get<std::string>()) return false;
    }
  }
  if (auto me = selector.find("matchExpressions"); me != selector.end() && !me->is_null()) {
    if (!me->is_array()) return InvalidArgument("matchExpressions must be a list");
    for (const Json& e : *me) {
      std::string key = e.value("key", "");
      std::string op = e.value("operator", "");
      std::vector<std::string> values;
      if (e.contains("values") && e["values"].is_array()) {
        for (const Json& v : e["values"]) {
          if (v.is_string()) values.push_back(v.get<std::string>());
        }
      }
      const std::string* have = Label(labels, key);
      bool in = have && std::find(values.begin(), values.end(), *have) != values.end();
      if (op == "In") { if (!in) return false; }
      else if (op == "NotIn") { if (in) return false; }
      else if (op == "Exists") { if (!have) return false; }
      else if (op == "DoesNotExist") { if (have) return false; }
      else return InvalidArgument("matchExpressions operator must be In, NotIn, Exists or DoesNotExist (got \"" + op + "\")");
    }
  }
  return true;
}

Json SelectorToNodeAffinity(const Json& selector) {
  Json exprs = Json::array();
  if (selector.is_object()) {
    if (selector.contains("matchLabels") && selector["matchLabels"].is_object()) {
      for (const auto& [k, v] : selector["matchLabels"].items()) {
        exprs.push_back({{"key", k}, {"operator", "In"}, {"values", Json::array({v})}});
      }
    }
    if (selector.contains("matchExpressions") && selector["matchExpressions"].is_array()) {
      for (const Json& e : selector["matchExpressions"]) {
        Json x = {{"key", e.value("key", "")}, {"operator", e.value("operator", "")}};
        if (e.contains("values") && e["values"].is_array() && !e["values"].empty()) x["values"] = e["values"];
        exprs.push_back(x);
      }
    }
  }
  if (exprs.empty()) return nullptr;
  return {{"nodeAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             {{"nodeSelectorTerms", Json::array({{{"matchExpressions", exprs}}})}}}}}};
}

}  // namespace lockstep::op
