// A lab's mutable state (state.json): link states, shapers, and whether the
// lab forwards in napi threads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"

namespace lockstep::netlab {

struct Shaper {
  std::string ns, ifname, qdisc;  // qdisc: "tbf" or "htb"
  int64_t rate_bps = 0;
  int64_t burst_bytes = 0;
  std::optional<std::string> latency;  // tbf only
};

struct LabState {
  std::map<std::string, std::string> links;  // link -> "down" or "silent"; absent = up
  std::map<std::string, Shaper> shapes;      // "LINK:up" / "LINK:down" -> shaper
  // Built with `up --napi-threads`: a link that comes back up gets new napi
  // kernel threads, which `link ... up` puts at SCHED_FIFO 1 again.
  bool napi_threads = false;
};

// "silent" keeps its routes: only "down" counts as down for routing.
bool LinkUp(const LabState& s, const std::string& link);

nlohmann::ordered_json ToJson(const LabState& s);
Result<LabState> StateFromJson(const nlohmann::json& j);

}  // namespace lockstep::netlab
