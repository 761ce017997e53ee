#include "lockstep/operator/conditions.h"

namespace lockstep::op {

using Json = nlohmann::json;

Json SetCondition(const Json& conditions, const Condition& c, long long observed_generation,
                  const std::string& now_rfc3339) {
  Json out = conditions.is_array() ? conditions : Json::array();
  Json next = {{"type", c.type},
               {"status", c.status},
               {"reason", c.reason},
               {"message", c.message},
               {"observedGeneration", observed_generation},
               {"lastTransitionTime", now_rfc3339}};
  for (Json& existing : out) {
    if (existing.value("type", "") != c.type) continue;
    if (existing.value("status", "") == c.status && existing.contains("lastTransitionTime")) {
      next["lastTransitionTime"] = existing["lastTransitionTime"];
    }
    existing = next;
    return out;
  }
  out.push_back(next);
  return out;
}

const Json* FindCondition(const Json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) return nullptr;
  for (const Json& c : status["conditions"]) {
    if (c.value("type", "") == type) return &c;
  }
  return nullptr;
}

}  // namespace lockstep::op
