// GetFabricTime: a client of the agent's local time API (GET /time on
// timeApiAddr, 127.0.0.1:9611 by default), for programs on the same node that
// want fabric time with an error bound. Thread-safe; one HTTP request a call
// (about 100 us on loopback: fine for timestamps, not for a hot loop).
#pragma once

#include "lockstep/api/defaults.h"
#include <cstdint>
#include <string>

#include "lockstep/common/result.h"

namespace lockstep::agent {

struct FabricTimeReading {
  int64_t earliest_ns = 0;
  int64_t latest_ns = 0;
  int64_t now_ns = 0;
  int64_t error_bound_ns = 0;
  std::string state;  // "LOCKED", "HOLDOVER" or "FREERUN" (then the bounds are unbounded)
};

Result<FabricTimeReading> GetFabricTime(const std::string& host = api::kTimeApiHost, int port = api::kTimeApiPort);

}  // namespace lockstep::agent
