// API request verbs, for request counting (CurlKubeApi, FakeKubeApi).
#pragma once

#include <cstddef>

namespace lockstep::kube {

enum class Verb { kGet, kList, kWatch, kCreate, kUpdate, kPatch, kApply, kDelete };
inline constexpr size_t kNumVerbs = 8;

inline const char* VerbName(Verb v) {
  switch (v) {
    case Verb::kGet: return "get";
    case Verb::kList: return "list";
    case Verb::kWatch: return "watch";
    case Verb::kCreate: return "create";
    case Verb::kUpdate: return "update";
    case Verb::kPatch: return "patch";
    case Verb::kApply: return "apply";
    case Verb::kDelete: return "delete";
  }
  return "unknown";
}

}  // namespace lockstep::kube
