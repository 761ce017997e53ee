// FabricAgent: fabric failover as the agent runs it: the FabricService on its
// own thread (probes every path at the policy's interval, ~14 ms), owning its
// adapters. The thread also carries the clock-sync sends (a rider), so the
// node wakes once for both: on this VM a wake-up costs ~100 us of CPU, a
// probe packet ~2.6 us (docs/benchmarks.md, "Probe cost"). The binary
// builds the adapters (UDP socket, netlink actuator, rail discovery) and
// hands them over; the planning from agent.yaml is pure
// (MakeFabricServiceOptions) and unit tested.
//
// Thread-safety: Start()/Stop() (or StartManual()/RunOnce()) from the
// owner; StatusJson() and codec() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/agent/config.h"
#include "lockstep/agent/runtime/fabric_service.h"

namespace lockstep::agent {

// The service options for agent.yaml's fabric section, the rails as
// discovered and this host's address: FabricOptionsFromConfig for the
// numbers, FabricPeers for the peers. InvalidArgument when fabric.rails is
// set but no peer has a hostAddress (nothing to watch), or a peer's host
// address is wrong (see FabricPeers). With `discovered_peers` (Kubernetes
// mode) the peers come later from FabricService::SetPeers: none are
// required and the route adoption waits for them (await_peers).
Result<FabricServiceOptions> MakeFabricServiceOptions(const AgentConfig& config, std::vector<RailInfo> rails,
                                                      uint32_t host_address, uint64_t seed,
                                                      bool discovered_peers = false);

// The fabric socket's bind address. Probes and acks are addressed to the
// host address, so a specific --bind-address (clock sync's socket, e.g. a
// rail's address) would leave the prober deaf on every rail: it binds the
// host address instead. The wildcard 0.0.0.0 stays.
std::string FabricBindAddress(const std::string& bind_address, uint32_t host_address);

// One line for the start-up log about what failover covers, given the RDMA
// devices present ("no RDMA device present: ..." when there are none).
std::string FailoverCoverage(const std::vector<std::string>& rdma_devices);

class FabricAgent {
 public:
  // Takes the adapters; the codec signs with `key` (rotate it with codec()).
  FabricAgent(std::unique_ptr<FabricSocket> socket, std::unique_ptr<RouteActuator> actuator, const ProbeKey& key,
              const Clock& clock, FabricService::FabricNow fabric_now, FabricServiceOptions options,
              metrics::Registry& registry);
  ~FabricAgent();  // Stop()
  FabricAgent(const FabricAgent&) = delete;
  FabricAgent& operator=(const FabricAgent&) = delete;

  // Adopts the routes a previous run left, starts the thread. Returns the
  // adoption's error (the service runs anyway and retries the reconcile).
  // The thread wakes at least every `max_wait`. `rider`, if set, runs on it
  // after each wake-up: work that must not wake the node on its own (the
  // agent's clock-sync sends, ClockSyncService::Exchange). It runs at the
  // prober's priority and must not block.
  Status Start(std::function<void()> rider = {},
               std::chrono::nanoseconds max_wait = std::chrono::milliseconds(50));
  // Stops the thread. Routes stay as they are (working pins keep working;
  // the next start adopts them).
  void Stop();

  // Start() without the thread, for a caller that turns the prober itself
  // (tests on a fake clock): adopts the routes, keeps `rider`.
  Status StartManual(std::function<void()> rider = {});
  // One wake-up of the prober: the service's RunOnce, then the rider.
  // REQUIRES: StartManual() (the thread calls it after Start()).
  void RunOnce(std::chrono::nanoseconds max_wait);

  nlohmann::json StatusJson() const { return service_.StatusJson(); }
  FabricProbeCodec& codec() { return codec_; }
  int port() const { return socket_->port(); }
  const FabricServiceOptions& options() const { return options_; }
  // The service, for SetPeers/Health/TakeFlapAlerts (thread-safe ones only).
  FabricService& service() { return service_; }
  // Whether the prober thread got SCHED_FIFO (needs CAP_SYS_NICE); valid after Start().
  bool realtime() const { return realtime_; }
  static constexpr int kRealtimePriority = 10;

 private:
  std::unique_ptr<FabricSocket> socket_;
  std::unique_ptr<RouteActuator> actuator_;
  FabricServiceOptions options_;
  FabricProbeCodec codec_;
  FabricService service_;
  std::atomic<bool> stop_{false};
  bool realtime_ = false;  // set by Start() from what the thread reports
  std::function<void()> rider_;
  std::thread thread_;
};

}  // namespace lockstep::agent
