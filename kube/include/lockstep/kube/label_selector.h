// LabelSelector: the string form used in ?labelSelector= ("app=x,tier!=db,
// env in (a,b),!legacy"), parsed once and matched against object labels.
// Pure value type; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lockstep/common/result.h"
#include "lockstep/kube/kube_api.h"

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

  // `labels` is metadata.labels (an object of strings, or null). An empty
  // selector matches everything.
  bool Matches(const Json& labels) const;
  // Convenience: matches obj.metadata.labels.
  bool MatchesObject(const Json& obj) const;
  bool empty() const { return reqs_.empty(); }
  const std::vector<Requirement>& requirements() const { return reqs_; }

 private:
  std::vector<Requirement> reqs_;
};

}  // namespace lockstep::kube
