#include "lockstep/agent/app/nccl_source.h"

#include <memory>

namespace lockstep::agent {

NcclEndpoint::StateSource NcclStateSource(Agent& agent, const NodeClock& node_clock, std::function<int64_t()> raw_now) {
  auto time = std::make_shared<TimeApiSource>(agent.TimeSource());
  std::vector<uint32_t> rails;
  if (const FabricAgent* f = agent.fabric()) {
    for (const RailInfo& r : f->options().setup.rails) rails.push_back(r.address);
  }
  return [time, rails, &node_clock, raw_now = std::move(raw_now)] {
    const int64_t local = node_clock.NowNs();
    const int64_t raw = raw_now();
    const ClockStatus s = time->status(local);
    const bool locked = s.reading.state == ClockSyncState::kLocked;
    return NcclStateFromFabric(time->fabric ? time->fabric() : nlohmann::json(), rails, locked,
                               locked ? s.reading.now_ns - raw : 0, locked ? s.reading.error_bound_ns : 0);
  };
}

}  // namespace lockstep::agent
