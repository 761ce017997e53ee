#include "lockstep/agent/net/time_client.h"

#include <nlohmann/json.hpp>

#include "lockstep/agent/net/http_get.h"

namespace lockstep::agent {

Result<FabricTimeReading> GetFabricTime(const std::string& host, int port) {
  auto reply = HttpGet(host, port, "/time");
  if (!reply.ok()) return reply.error();
  if (reply->status != 200) return Unavailable("time API answered HTTP " + std::to_string(reply->status));
  try {
    auto j = nlohmann::json::parse(reply->body);
    return FabricTimeReading{j.at("earliest_ns").get<int64_t>(), j.at("latest_ns").get<int64_t>(),
                             j.at("now_ns").get<int64_t>(), j.at("error_bound_ns").get<int64_t>(),
                             j.at("state").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("time API answered unexpected JSON: ") + e.what());
  }
}

}  // namespace lockstep::agent
