#include "json_reader.h"
#include "lockstep/api/condition.h"

namespace lockstep::api {

Json ToJson(const Condition& c) {
  Json j = {{"type", c.type},
            {"status", c.status},
            {"lastTransitionTime", c.last_transition_time},
            {"reason", c.reason},
            {"message", c.message}};
  if (c.observed_generation) j["observedGeneration"] = *c.observed_generation;
  return j;
}

Json ToJson(const std::vector<Condition>& conditions) {
  Json out = Json::array();
  for (const Condition& c : conditions) out.push_back(ToJson(c));
  return out;
}

void ReadConditions(JsonReader& r, const Json& status, const std::string& path, std::vector<Condition>& out) {
  const Json& list = r.Array(status, "conditions", path);
  for (size_t i = 0; i < list.size() && r.ok(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return r.Fail(p + " must be an object");
    Condition c;
    r.String(list[i], "type", p + ".type", c.type, false, 316);
    r.Enum(list[i], "status", p + ".status", {"True", "False", "Unknown"}, c.status);
    r.OptInt(list[i], "observedGeneration", p + ".observedGeneration", 0, INT64_MAX, c.observed_generation);
    r.String(list[i], "lastTransitionTime", p + ".lastTransitionTime", c.last_transition_time);
    r.String(list[i], "reason", p + ".reason", c.reason, true, 1024);
    r.String(list[i], "message", p + ".message", c.message, true, 32768);
    out.push_back(std::move(c));
  }
}

Result<std::vector<Condition>> ConditionsFromJson(const Json& list, const std::string& context,
                                                  const std::string& path) {
  JsonReader r(context);
  std::vector<Condition> out;
  ReadConditions(r, Json{{"conditions", list}}, path, out);
  if (!r.ok()) return InvalidArgument(r.error());
  return out;
}

}  // namespace lockstep::api
