// LabelSelector: the one label-selector engine. Built from the string form used
// in ?labelSelector= ("app=x,tier!=db,env in (a,b),!legacy") or from a
// metav1.LabelSelector object ({matchLabels, matchExpressions}), matched
// against object labels, and rendered as the node affinity a DaemonSet needs.
// Pure value type; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lockstep/common/result.h"
#include "lockstep/kube/gvr.h"

namespace lockstep::kube {

class LabelSelector {
 public:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kNotExists };
  struct Requirement {
    std::string key{};
    Op op{};
    std::vector<std::string> values{};
  };

  // Accepts "", "k=v", "k==v", "k!=v", "k in (a,b)", "k notin (a,b)", "k", "!k",
  // comma-separated. kInvalidArgument with the offending text otherwise.
  static Result<LabelSelector> Parse(std::string_view text);
  // Accepts a metav1.LabelSelector object or null (the empty selector). As the
  // API server does, rejects In/NotIn without values, Exists/DoesNotExist with
  // values, unknown operators, invalid keys and non-string values, with the
  // offending field in the message (relative to the selector, e.g.
  // "matchExpressions[0].operator").
  static Result<LabelSelector> FromJson(const Json& selector);

  // `labels` is metadata.labels (an object of strings, or null). An empty
  // selector matches everything.
  bool Matches(const Json& labels) const;
  // Convenience: matches obj.metadata.labels.
  bool MatchesObject(const Json& obj) const;
  bool empty() const { return reqs_.empty(); }
  // The pod spec `affinity` that requires nodes matching this selector (one
  // nodeSelectorTerm), or null when the selector is empty.
  Json ToNodeAffinity() const;
  const std::vector<Requirement>& requirements() const { return reqs_; }

 private:
  std::vector<Requirement> reqs_;
};

// FromJson(selector) then Matches(labels): for one-off checks.
Result<bool> SelectorMatches(const Json& selector, const Json& labels);

}  // namespace lockstep::kube
