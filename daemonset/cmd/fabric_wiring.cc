#include "fabric_wiring.h"

#include "lockstep/agent/net/netlink_route_actuator.h"
#include "lockstep/agent/net/rail_discovery.h"
#include "lockstep/agent/net/rdma_devices.h"
#include "lockstep/agent/net/udp_fabric_socket.h"
#include "lockstep/common/log.h"

namespace lockstep::agent {

Result<std::unique_ptr<FabricAgent>> BuildFabricAgent(const AgentConfig& config, const ProbeKey& key,
                                                      const ClockSyncService* clock, metrics::Registry& registry,
                                                      uint64_t seed, bool kubernetes) {
  if (config.fabric.rails.empty()) return std::unique_ptr<FabricAgent>();
  uint32_t host_address = 0;
  if (!config.fabric.host_address.empty()) {
    auto a = ParseIpv4(config.fabric.host_address);
    if (!a.ok()) return InvalidArgument("fabric.hostAddress: " + a.error().message);
    host_address = *a;
  } else {
    auto a = InterfaceIpv4(config.fabric.host_interface);
    if (!a.ok()) return a.error();
    host_address = *a;
  }
  auto rails = DiscoverRails(config.fabric.rails);
  if (!rails.ok()) return rails.error();
  auto options = MakeFabricServiceOptions(config, *rails, host_address, seed, kubernetes);
  if (!options.ok()) return options.error();
  auto socket = UdpFabricSocket::Open(FabricBindAddress(config.bind_address, host_address), config.fabric.port, SystemClock::Instance());
  if (!socket.ok()) return socket.error();
  auto actuator = NetlinkRouteActuator::Open({});
  if (!actuator.ok()) return actuator.error();
  FabricService::FabricNow fabric_now;
  if (clock != nullptr) {
    fabric_now = [clock]() -> std::optional<int64_t> {
      TimeReading r = clock->Read();
      if (r.state != ClockSyncState::kLocked) return std::nullopt;
      return r.now_ns;
    };
  }
  return std::make_unique<FabricAgent>(std::move(*socket), std::move(*actuator), key, SystemClock::Instance(),
                                       std::move(fabric_now), std::move(*options), registry);
}

void LogFabricStart(const AgentConfig& config, const FabricAgent* agent) {
  log::Info(FailoverCoverage(RdmaDeviceNames()));
  if (agent == nullptr) {
    log::Info("fabric failover off: agent.yaml has no fabric.rails (clock sync only)");
    return;
  }
  const FabricServiceOptions& o = agent->options();
  std::string rails;
  for (const RailInfo& r : o.setup.rails) {
    rails += (rails.empty() ? "" : ", ") + r.name + " via " + FormatIpv4(r.gateway.gateway);
  }
  log::Info("fabric failover on",
            {{"host_address", FormatIpv4(o.setup.host_address)},
             {"rails", rails},
             {"peers", o.await_peers ? std::string("from FabricHealth discovery") : std::to_string(o.setup.peers.size())},
             {"probe_port", std::to_string(agent->port())},
             {"failover", config.failover.enabled ? "enabled" : "disabled (monitoring only)"}});
}

}  // namespace lockstep::agent
