#include "lockstep/kube/label_selector.h"

#include <algorithm>
#include <cctype>

#include "lockstep/kube/object_meta.h"

namespace lockstep::kube {
namespace {

std::string_view TrimView(std::string_view s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Splits on commas outside parentheses.
std::vector<std::string_view> SplitTerms(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      out.push_back(TrimView(s.substr(start, i - start)));
      start = i + 1;
    } else if (s[i] == '(') {
      ++depth;
    } else if (s[i] == ')') {
      --depth;
    }
  }
  return out;
}

bool ValidKey(std::string_view k) {
  if (k.empty()) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

}  // namespace

Result<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector sel;
  if (TrimView(text).empty()) return sel;
  auto bad = [&](std::string_view term) {
    return InvalidArgument("invalid label selector \"" + std::string(text) + "\": cannot parse \"" +
                           std::string(term) + "\"");
  };
  for (std::string_view term : SplitTerms(text)) {
    if (term.empty()) return bad(term);
    Requirement r;
    if (term[0] == '!') {
      r.key = std::string(TrimView(term.substr(1)));
      r.op = Op::kNotExists;
    } else if (size_t p = term.find("!="); p != std::string_view::npos) {
      r.key = std::string(TrimView(term.substr(0, p)));
      r.op = Op::kNotEquals;
      r.values.emplace_back(TrimView(term.substr(p + 2)));
    } else if (size_t p = term.find("=="); p != std::string_view::npos) {
      r.key = std::string(TrimView(term.substr(0, p)));
      r.op = Op::kEquals;
      r.values.emplace_back(TrimView(term.substr(p + 2)));
    } else if (size_t p = term.find('='); p != std::string_view::npos) {
      r.key = std::string(TrimView(term.substr(0, p)));
      r.op = Op::kEquals;
      r.values.emplace_back(TrimView(term.substr(p + 1)));
    } else if (size_t open = term.find('('); open != std::string_view::npos) {
      if (term.back() != ')') return bad(term);
      std::string_view head = TrimView(term.substr(0, open));
      size_t sp = head.find_last_of(" \t");
      if (sp == std::string_view::npos) return bad(term);
      std::string_view op = head.substr(sp + 1);
      r.key = std::string(TrimView(head.substr(0, sp)));
      if (op == "in") {
        r.op = Op::kIn;
      } else if (op == "notin") {
        r.op = Op::kNotIn;
      } else {
        return bad(term);
      }
      std::string_view inner = term.substr(open + 1, term.size() - open - 2);
      size_t start = 0;
      for (size_t i = 0; i <= inner.size(); ++i) {
        if (i == inner.size() || inner[i] == ',') {
          std::string_view v = TrimView(inner.substr(start, i - start));
          if (!v.empty()) r.values.emplace_back(v);
          start = i + 1;
        }
      }
      if (r.values.empty()) return bad(term);
    } else {
      r.key = std::string(term);
      r.op = Op::kExists;
    }
    if (!ValidKey(r.key)) return bad(term);
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

Result<LabelSelector> LabelSelector::FromJson(const Json& selector) {
  LabelSelector sel;
  if (selector.is_null()) return sel;
  if (!selector.is_object()) return InvalidArgument("a label selector must be an object with matchLabels and/or matchExpressions");
  if (auto ml = selector.find("matchLabels"); ml != selector.end() && !ml->is_null()) {
    if (!ml->is_object()) return InvalidArgument("matchLabels must be a map of label keys to string values");
    for (const auto& [k, v] : ml->items()) {
      if (!ValidKey(k)) return InvalidArgument("matchLabels: \"" + k + "\" is not a valid label key");
      if (!v.is_string()) return InvalidArgument("matchLabels[" + k + "] must be a string");
      sel.reqs_.push_back({k, Op::kEquals, {v.get<std::string>()}});
    }
  }
  auto me = selector.find("matchExpressions");
  if (me == selector.end() || me->is_null()) return sel;
  if (!me->is_array()) return InvalidArgument("matchExpressions must be a list");
  for (size_t i = 0; i < me->size(); ++i) {
    const Json& e = (*me)[i];
    const std::string at = "matchExpressions[" + std::to_string(i) + "]";
    if (!e.is_object()) return InvalidArgument(at + " must be an object with key, operator and values");
    Requirement r;
    const Json& key = Field(e, {"key"});
    if (!key.is_string() || !ValidKey(key.get<std::string>())) {
      return InvalidArgument(at + ".key must be a valid label key (got " + key.dump() + ")");
    }
    r.key = key.get<std::string>();
    const Json& values = Field(e, {"values"});
    if (!values.is_null() && !values.is_array()) return InvalidArgument(at + ".values must be a list of strings");
    for (const Json& v : values.is_array() ? values : Json::array()) {
      if (!v.is_string()) return InvalidArgument(at + ".values must be a list of strings (got " + v.dump() + ")");
      r.values.push_back(v.get<std::string>());
    }
    const std::string op = Field(e, {"operator"}).is_string() ? e["operator"].get<std::string>() : "";
    if (op == "In" || op == "NotIn") {
      r.op = op == "In" ? Op::kIn : Op::kNotIn;
      if (r.values.empty()) return InvalidArgument(at + ".values must not be empty for operator " + op);
    } else if (op == "Exists" || op == "DoesNotExist") {
      r.op = op == "Exists" ? Op::kExists : Op::kNotExists;
      if (!r.values.empty()) return InvalidArgument(at + ".values must be empty for operator " + op);
    } else {
      return InvalidArgument(at + ".operator must be In, NotIn, Exists or DoesNotExist (got \"" + op + "\")");
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

Json LabelSelector::ToNodeAffinity() const {
  if (reqs_.empty()) return nullptr;
  Json exprs = Json::array();
  for (const Requirement& r : reqs_) {
    static constexpr const char* kNames[] = {"In", "NotIn", "In", "NotIn", "Exists", "DoesNotExist"};
    Json x = {{"key", r.key}, {"operator", kNames[static_cast<int>(r.op)]}};
    if (!r.values.empty()) x["values"] = r.values;
    exprs.push_back(std::move(x));
  }
  return {{"nodeAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             {{"nodeSelectorTerms", Json::array({{{"matchExpressions", exprs}}})}}}}}};
}

Result<bool> SelectorMatches(const Json& selector, const Json& labels) {
  auto sel = LabelSelector::FromJson(selector);
  if (!sel.ok()) return sel.error();
  return sel->Matches(labels);
}

bool LabelSelector::Matches(const Json& labels) const {
  for (const Requirement& r : reqs_) {
    const Json* v = labels.is_object() ? FindPath(labels, {r.key}) : nullptr;
    bool has = v != nullptr && v->is_string();
    std::string value = has ? v->get<std::string>() : "";
    bool in = has && std::find(r.values.begin(), r.values.end(), value) != r.values.end();
    switch (r.op) {
      case Op::kEquals:
      case Op::kIn:
        if (!in) return false;
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        if (in) return false;
        break;
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kNotExists:
        if (has) return false;
        break;
    }
  }
  return true;
}

bool LabelSelector::MatchesObject(const Json& obj) const {
  const Json* labels = FindPath(obj, {"metadata", "labels"});
  return Matches(labels != nullptr ? *labels : Json());
}

}  // namespace lockstep::kube
