#include "lockstep/audit/check.h"

namespace lockstep::audit {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "Pass";
    case Verdict::kFail:
      return "Fail";
    case Verdict::kNotPresent:
      return "NotPresent";
  }
  return "Fail";
}

std::optional<Verdict> ParseVerdict(const std::string& name) {
  for (Verdict v : {Verdict::kPass, Verdict::kFail, Verdict::kNotPresent}) {
    if (name == VerdictName(v)) return v;
  }
  return std::nullopt;
}

const char* PoolRuleName(PoolRule r) {
  switch (r) {
    case PoolRule::kNone:
      return "none";
    case PoolRule::kMajority:
      return "majority";
    case PoolRule::kMedian:
      return "median";
    case PoolRule::kUpper:
      return "upper";
    case PoolRule::kSlow:
      return "slow";
  }
  return "none";
}

std::optional<PoolRule> ParsePoolRule(const std::string& name) {
  for (PoolRule r : {PoolRule::kNone, PoolRule::kMajority, PoolRule::kMedian, PoolRule::kUpper, PoolRule::kSlow}) {
    if (name == PoolRuleName(r)) return r;
  }
  return std::nullopt;
}

std::string CheckKey(const Check& c) { return c.subject.empty() ? c.id : c.id + "[" + c.subject + "]"; }

std::string Category(const std::string& id) { return id.substr(0, id.find('.')); }

Counts CountVerdicts(const std::vector<Check>& checks) {
  Counts n;
  for (const Check& c : checks) {
    switch (c.verdict) {
      case Verdict::kPass:
        ++n.passed;
        break;
      case Verdict::kFail:
        ++n.failed;
        break;
      case Verdict::kNotPresent:
        ++n.not_present;
        break;
    }
  }
  return n;
}

Verdict OverallVerdict(const std::vector<Check>& checks) {
  for (const Check& c : checks) {
    if (c.verdict == Verdict::kFail) return Verdict::kFail;
  }
  return Verdict::kPass;
}

}  // namespace lockstep::audit
