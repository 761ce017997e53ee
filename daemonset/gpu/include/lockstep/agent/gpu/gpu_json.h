// JSON views of GPU readings and verdicts, for `lockstep-agent gpu-status`
// and the agent's HTTP status. Pure; thread-safe.
//
//   {"driverVersion": "550.54.15", "gpus": [{"index": 0, "uuid": "GPU-...",
//     "temperatureC": 45, "slowdownC": 88, ..., "notAvailable": ["nvlink"]}]}
#pragma once

#include <nlohmann/json.hpp>

#include "lockstep/agent/gpu/gpu_health.h"
#include "lockstep/agent/gpu/gpu_sample.h"

namespace lockstep::agent::gpu {

nlohmann::json ToJson(const GpuSample& g);
nlohmann::json ToJson(const GpuSnapshot& s);
nlohmann::json ToJson(const XidEvent& x);
// {"state": "Warning", "reasons": [...], "condition": {...}} (and
// "unavailableReason" when Unavailable).
nlohmann::json ToJson(const NodeGpuVerdict& v);

}  // namespace lockstep::agent::gpu
