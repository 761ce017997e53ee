// HTTP surface of the agent, on the common HttpServer:
//   health server (healthAddr):  GET /healthz, /readyz, /metrics
//   time API (timeApiAddr):      GET /time   -> {"earliest_ns","latest_ns","now_ns","state","error_bound_ns"}
//                                GET /status -> everything `clock status` prints
//                                GET /fabric -> rails, paths and pins (`fabric status`)
//                                GET /nccl   -> the NCCL plugins' connections per job (NcclEndpoint::Jobs)
// Handlers run on the server's thread; everything they read is thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/agent/runtime/clock_sync_service.h"
#include "lockstep/common/http_server.h"
#include "lockstep/common/metrics.h"

namespace lockstep::agent {

// Ground truth from a VirtualClock: at local reading local_ns, the local
// clock was true_offset_ns ahead of the shared base clock.
struct GroundTruth {
  int64_t local_ns = 0;
  int64_t true_offset_ns = 0;
  double true_drift_ppb = 0;
};

struct TimeApiSource {
  std::string node_name;
  // Fabric time now and the status; from the ClockSyncService, or a local
  // FREERUN stand-in when clock sync is disabled.
  std::function<ClockStatus(std::optional<int64_t> local_ns)> status;
  std::function<std::optional<GroundTruth>()> truth;  // empty unless --virtual-clock
  // Fabric failover status (FabricService::StatusJson); empty when fabric
  // failover is not configured (GET /fabric then answers 404).
  std::function<nlohmann::json()> fabric;
  // The NCCL plugin endpoint's per-job view; empty when it is off (GET /nccl then answers 404).
  std::function<nlohmann::json()> nccl{};
};

std::string TimeJson(const TimeReading& r);
nlohmann::json StatusJson(const std::string& node, const ClockStatus& s, const std::optional<GroundTruth>& truth);

// `before_metrics` runs before each /metrics render (to refresh gauges).
void RegisterHealthRoutes(HttpServer& server, metrics::Registry& registry, std::function<bool()> ready,
                          std::function<void()> before_metrics = {});
void RegisterTimeRoutes(HttpServer& server, TimeApiSource source);

}  // namespace lockstep::agent
