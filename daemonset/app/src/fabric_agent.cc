#include "lockstep/agent/app/fabric_agent.h"

#include <pthread.h>
#include <sched.h>

#include <future>

#include "lockstep/fabric/config.h"

namespace lockstep::agent {

Result<FabricServiceOptions> MakeFabricServiceOptions(const AgentConfig& config, std::vector<RailInfo> rails,
                                                      uint32_t host_address, uint64_t seed, bool discovered_peers) {
  auto fabric = fabric::FabricOptionsFromConfig(config);
  if (!fabric.ok()) return fabric.error();
  auto peers = FabricPeers(config, host_address);
  if (!peers.ok()) return peers.error();
  if (peers->empty() && !discovered_peers) {
    return InvalidArgument(
        "fabric.rails is set but no peer has a hostAddress: give each peer in peers[] the host address its "
        "applications use (e.g. hostAddress: 10.0.200.2), or remove fabric.rails to run clock sync only");
  }
  if (rails.empty()) return InvalidArgument("fabric.rails is empty: list this host's rail interfaces");
  FabricServiceOptions o;
  o.self_name = config.node_name;
  o.setup.host_address = host_address;
  o.setup.rails = std::move(rails);
  o.setup.peers = std::move(*peers);
  o.fabric = *fabric;
  o.latency = fabric::LatencySlaOptionsFromConfig(config);
  o.peer_port = config.fabric.port;
  o.paths_per_rail = config.fabric.paths_per_rail;
  o.seed = seed;
  o.await_peers = discovered_peers;
  return o;
}

std::string FabricBindAddress(const std::string& bind_address, uint32_t host_address) {
  return bind_address == "0.0.0.0" ? bind_address : FormatIpv4(host_address);
}

std::string FailoverCoverage(const std::vector<std::string>& rdma_devices) {
  if (rdma_devices.empty()) {
    return "no RDMA device present; fabric failover covers kernel-routed traffic (TCP/UDP to host addresses: gloo, "
           "NCCL's socket transport)";
  }
  std::string names;
  for (const auto& d : rdma_devices) names += (names.empty() ? "" : ",") + d;
  return "RDMA devices present (" + names +
         ") but not steered: fabric failover covers kernel-routed traffic only (TCP/UDP to host addresses); RDMA "
         "queue pairs keep their paths";
}

FabricAgent::FabricAgent(std::unique_ptr<FabricSocket> socket, std::unique_ptr<RouteActuator> actuator,
                         const ProbeKey& key, const Clock& clock, FabricService::FabricNow fabric_now,
                         FabricServiceOptions options, metrics::Registry& registry)
    : socket_(std::move(socket)),
      actuator_(std::move(actuator)),
      options_(options),
      codec_(key),
      service_(*socket_, *actuator_, clock, codec_, std::move(fabric_now), std::move(options), registry) {}

FabricAgent::~FabricAgent() { Stop(); }

Status FabricAgent::StartManual(std::function<void()> rider) {
  rider_ = std::move(rider);
  return service_.Start();
}

void FabricAgent::RunOnce(std::chrono::nanoseconds max_wait) {
  service_.RunOnce(max_wait);
  if (rider_) rider_();
}

Status FabricAgent::Start(std::function<void()> rider, std::chrono::nanoseconds max_wait) {
  Status s = StartManual(std::move(rider));
  // The thread reports whether it got its real-time priority; Start()
  // returns once it has (realtime() is valid from then on).
  std::promise<bool> realtime;
  std::future<bool> got_realtime = realtime.get_future();
  thread_ = std::thread([this, max_wait, realtime = std::move(realtime)]() mutable {
    // Probes and replies are due every few ms and a late one counts as lost:
    // on a node whose cores are busy with training, a normal-priority thread
    // can wait tens of ms for a CPU and the paths would seem to flap. With
    // CAP_SYS_NICE (or root) the prober runs SCHED_FIFO at a low real-time
    // priority; it sleeps between events (about 1% of a core), so it cannot
    // starve the node.
    pthread_setname_np(pthread_self(), "ls-fabric");  // per-thread CPU in /proc, top -H, perf
    sched_param param{};
    param.sched_priority = kRealtimePriority;
    realtime.set_value(pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0);
    while (!stop_.load()) RunOnce(max_wait);
  });
  realtime_ = got_realtime.get();
  return s;
}

void FabricAgent::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace lockstep::agent
