#include "lockstep/audit/audit_json.h"

#include <algorithm>

namespace lockstep::audit {

using nlohmann::json;

json CheckToJson(const Check& c) {
  json j = {{"id", c.id}};
  if (!c.subject.empty()) j["subject"] = c.subject;
  j["observed"] = c.observed;
  if (c.number) j["number"] = *c.number;
  if (!c.expected.empty()) j["expected"] = c.expected;
  j["verdict"] = VerdictName(c.verdict);
  if (!c.message.empty()) j["message"] = c.message;
  if (c.pool != PoolRule::kNone) j["rule"] = PoolRuleName(c.pool);
  if (!c.column.empty()) j["column"] = c.column;
  return j;
}

json ChecksToJson(const std::vector<Check>& checks) {
  json a = json::array();
  for (const Check& c : checks) a.push_back(CheckToJson(c));
  return a;
}

Result<std::vector<Check>> ChecksFromJson(const json& j) {
  if (!j.is_array()) return InvalidArgument("checks: expected an array");
  std::vector<Check> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    const std::string at = "checks[" + std::to_string(i) + "]";
    if (!e.is_object()) return InvalidArgument(at + ": expected an object");
    auto str = [&](const char* key, bool required, std::string& to) -> Status {
      auto it = e.find(key);
      if (it == e.end()) return required ? Status(InvalidArgument(at + "." + key + " is required")) : Status();
      if (!it->is_string()) return InvalidArgument(at + "." + key + ": expected a string");
      to = it->get<std::string>();
      return Status();
    };
    Check c;
    std::string verdict, rule;
    for (Status s : {str("id", true, c.id), str("subject", false, c.subject), str("observed", false, c.observed),
                     str("expected", false, c.expected), str("verdict", true, verdict),
                     str("message", false, c.message), str("rule", false, rule), str("column", false, c.column)}) {
      if (!s.ok()) return s.error();
    }
    if (c.id.empty()) return InvalidArgument(at + ".id is empty");
    auto v = ParseVerdict(verdict);
    if (!v) return InvalidArgument(at + ".verdict: expected Pass, Fail or NotPresent (got \"" + verdict + "\")");
    c.verdict = *v;
    if (!rule.empty()) {
      auto r = ParsePoolRule(rule);
      if (!r)
        return InvalidArgument(at + ".rule: expected none, majority, median, upper or slow (got \"" + rule + "\")");
      c.pool = *r;
    }
    if (auto it = e.find("number"); it != e.end()) {
      if (!it->is_number()) return InvalidArgument(at + ".number: expected a number");
      c.number = it->get<double>();
    }
    out.push_back(std::move(c));
  }
  return out;
}

json NodeVerdictToJson(const NodeVerdict& v) {
  return {{"node", v.node},
          {"pool", v.pool},
          {"verdict", VerdictName(v.verdict)},
          {"passed", v.counts.passed},
          {"failed", v.counts.failed},
          {"notPresent", v.counts.not_present},
          {"checks", ChecksToJson(v.checks)}};
}

std::string FormatText(const NodeVerdict& v, bool failures_first) {
  std::vector<const Check*> order;
  for (const Check& c : v.checks) order.push_back(&c);
  if (failures_first) {
    std::stable_partition(order.begin(), order.end(), [](const Check* c) { return c->verdict == Verdict::kFail; });
  }
  size_t width = 0;
  for (const Check* c : order) width = std::max(width, CheckKey(*c).size());
  std::string out;
  for (const Check* c : order) {
    std::string key = CheckKey(*c);
    std::string line = std::string(VerdictName(c->verdict));
    line.resize(11, ' ');
    key.resize(width + 2, ' ');
    line += key + c->observed;
    if (c->verdict == Verdict::kFail && !c->expected.empty()) line += " (expected " + c->expected + ")";
    if (!c->message.empty() && c->verdict != Verdict::kPass) line += ": " + c->message;
    out += line + "\n";
  }
  out += "audit " + (v.node.empty() ? std::string() : v.node + " ") + VerdictName(v.verdict) + " (" +
         std::to_string(v.counts.failed) + " failed, " + std::to_string(v.counts.passed) + " passed, " +
         std::to_string(v.counts.not_present) + " not present)\n";
  return out;
}

}  // namespace lockstep::audit
