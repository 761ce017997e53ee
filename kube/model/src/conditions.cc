#include "lockstep/kube/conditions.h"

namespace lockstep::kube {

Json SetCondition(const Json& conditions, const Condition& c, std::optional<int64_t> observed_generation,
                  std::string_view now_rfc3339) {
  Json out = conditions.is_array() ? conditions : Json::array();
  Json* slot = nullptr;
  for (Json& existing : out) {
    if (existing.is_object() && existing.value("type", "") == c.type) {
      slot = &existing;
      break;
    }
  }
  if (slot == nullptr) slot = &out.emplace_back(Json::object());
  Json& n = *slot;
  const bool same_status = n.value("status", "") == c.status && n.contains("lastTransitionTime");
  n["type"] = c.type;
  n["status"] = c.status;
  n["reason"] = c.reason;
  n["message"] = c.message;
  if (observed_generation) n["observedGeneration"] = *observed_generation;
  if (!same_status) n["lastTransitionTime"] = std::string(now_rfc3339);
  return out;
}

const Json* FindCondition(const Json& status, std::string_view type) {
  if (!status.is_object()) return nullptr;
  auto list = status.find("conditions");
  if (list == status.end() || !list->is_array()) return nullptr;
  for (const Json& c : *list) {
    if (c.is_object() && c.value("type", "") == type) return &c;
  }
  return nullptr;
}

}  // namespace lockstep::kube
