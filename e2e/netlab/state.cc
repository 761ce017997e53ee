#include "netlab/state.h"

namespace lockstep::netlab {

bool LinkUp(const LabState& s, const std::string& link) {
  const auto it = s.links.find(link);
  return it == s.links.end() || it->second != "down";
}

nlohmann::ordered_json ToJson(const LabState& s) {
  nlohmann::ordered_json j = {{"links", nlohmann::ordered_json::object()},
                              {"shapes", nlohmann::ordered_json::object()}};
  for (const auto& [name, st] : s.links) j["links"][name] = st;
  for (const auto& [key, sh] : s.shapes) {
    j["shapes"][key] = {{"ns", sh.ns},
                        {"if", sh.ifname},
                        {"qdisc", sh.qdisc},
                        {"rate_bps", sh.rate_bps},
                        {"burst_bytes", sh.burst_bytes},
                        {"latency", sh.latency ? nlohmann::ordered_json(*sh.latency) : nullptr}};
  }
  if (s.napi_threads) j["napi_threads"] = true;  // absent: false (state.json of older labs)
  return j;
}

Result<LabState> StateFromJson(const nlohmann::json& j) {
  try {
    LabState s;
    const nlohmann::json links = j.value("links", nlohmann::json::object());
    const nlohmann::json shapes = j.value("shapes", nlohmann::json::object());
    for (const auto& [name, st] : links.items()) s.links[name] = st.get<std::string>();
    s.napi_threads = j.value("napi_threads", false);
    for (const auto& [key, sh] : shapes.items()) {
      const auto& lat = sh.at("latency");
      s.shapes[key] = {sh.at("ns").get<std::string>(),         sh.at("if").get<std::string>(),
                       sh.at("qdisc").get<std::string>(),      sh.at("rate_bps").get<int64_t>(),
                       sh.at("burst_bytes").get<int64_t>(),
                       lat.is_null() ? std::nullopt : std::optional<std::string>(lat.get<std::string>())};
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("bad state.json: ") + e.what());
  }
}

}  // namespace lockstep::netlab
