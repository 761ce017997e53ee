#include "agent_adapters.h"

#include <pthread.h>

#include "lockstep/agent/net/netlink_route_actuator.h"
#include "lockstep/agent/net/rail_discovery.h"
#include "lockstep/agent/net/rdma_devices.h"
#include "lockstep/agent/net/sock_diag_traffic.h"
#include "lockstep/agent/net/udp_fabric_socket.h"
#include "lockstep/common/log.h"
#include "lockstep/kube/curl_kube_api.h"

namespace lockstep::agent {

NodeClocks::NodeClocks(const std::optional<VirtualClockParams>& virtual_clock)
    : system_(/*shared_anchor=*/virtual_clock.has_value()) {
  if (virtual_clock) virtual_.emplace(system_, *virtual_clock);
}

const NodeClock& NodeClocks::node_clock() const {
  return virtual_ ? static_cast<const NodeClock&>(*virtual_) : system_;
}

std::function<std::optional<GroundTruth>()> NodeClocks::truth() const {
  if (!virtual_) return {};
  return [this]() -> std::optional<GroundTruth> {
    int64_t base = system_.NowNs(), local = virtual_->Transform(base);
    return GroundTruth{local, local - base, virtual_->TrueDriftPpb(base)};
  };
}

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

Result<std::unique_ptr<kube::KubeApi>> OpenKubeApi(const kube::KubeConfig& config, const std::string& version,
                                                   metrics::Registry& registry) {
  auto api = kube::CurlKubeApi::FromConfig(config, SystemClock::Instance(),
                                           {.request_timeout = std::chrono::seconds(15),
                                            .user_agent = "lockstep-agent/" + version,
                                            .registry = &registry});
  if (!api.ok()) return api.error();
  return std::unique_ptr<kube::KubeApi>(std::move(*api));
}

Status OpenFabricAdapters(const AgentSettings& settings, bool kubernetes, AgentAdapters& adapters) {
  const AgentConfig& config = settings.config;
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
  // Checked before any socket opens: a configuration error is reported as one.
  auto options = MakeFabricServiceOptions(config, *rails, host_address, settings.seed, kubernetes);
  if (!options.ok()) return options.error();
  auto socket = UdpFabricSocket::Open(FabricBindAddress(config.bind_address, host_address), config.fabric.port,
                                      SystemClock::Instance(), config.fabric.paths_per_rail);
  if (!socket.ok()) return socket.error();
  auto actuator = NetlinkRouteActuator::Open({});
  if (!actuator.ok()) return actuator.error();
  adapters.fabric_socket = std::move(*socket);
  adapters.route_actuator = std::move(*actuator);
  if (config.probe.traffic_aware) {
    // Tiered probing without it probes every peer's pinned path fast: a warning, not an error.
    if (auto traffic = SockDiagTraffic::Open(); traffic.ok()) {
      adapters.traffic_source = std::move(*traffic);
    } else {
      log::Warn("fabric: no sock_diag (TCP connections unknown); probing every peer's pinned path fast",
                {{"error", traffic.error().message}});
    }
  }
  adapters.rails = std::move(*rails);
  adapters.host_address = host_address;
  return Status::Ok();
}

void LogAgentStart(const CommandLine& cl, const AgentConfig& config, Agent& agent, const std::string& probe_addr,
                   int health_port, int time_api_port, const std::string& kube_server) {
  std::string peers;
  for (const auto& p : agent.clock_sync_options().selected) peers += (peers.empty() ? "" : ",") + p.name;
  log::Info("lockstep-agent started",
            {{"node", config.node_name},
             {"policy", config.policy},
             {"probe_addr", probe_addr},
             {"health_addr", config.health_addr.host + ":" + std::to_string(health_port)},
             {"time_api_addr", config.time_api_addr.host + ":" + std::to_string(time_api_port)},
             {"clock_sync", config.clock_sync.enabled ? "enabled" : "disabled"},
             {"mode", agent.kube() ? "kubernetes (" + kube_server + ")" : "standalone"},
             {"virtual_clock", cl.virtual_clock ? *cl.virtual_clock : "off"},
             {"gpu", agent.gpu_monitor() ? config.gpu.mode : "off"},
             {"peers", peers},
             {"node_public_key", agent.signer().public_key().base64()}});
  LogFabricStart(config, agent.fabric());
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

ProbeKeyFileSource::ProbeKeyFileSource(ProbeKey key, const std::string& path) : key_(std::move(key)) {
  if (auto file = ProbeKeyFile::Open(path); file.ok()) file_.emplace(std::move(*file));
}

}  // namespace lockstep::agent
