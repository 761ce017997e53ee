// `lockstep-agent run`: loads the setup (run_setup.h), builds the real
// adapters (agent_adapters.h), hands them to BuildAgent (the composition
// root, lockstep/agent/app/agent.h), serves HTTP and waits for SIGTERM or
// SIGINT.
#include <signal.h>

#include <cstdio>

#include "agent_adapters.h"
#include "commands.h"
#include "lockstep/agent/app/nccl_source.h"
#include "lockstep/agent/gpu/nvml_gpu_source.h"
#include "node_audits.h"
#include "lockstep/agent/net/host_clock.h"
#include "lockstep/agent/net/udp_timestamped_transport.h"
#include "lockstep/agent/net/unix_line_server.h"
#include "lockstep/common/http_server.h"
#include "lockstep/common/log.h"
#include "run_setup.h"

namespace lockstep::agent {
namespace {

int ConfigError(const std::string& msg) {
  std::fprintf(stderr, "lockstep-agent: %s\n", msg.c_str());
  return kExitUsage;
}

int Failure(const std::string& what, const Error& e) {
  log::Error(what, {{"error", e.message}});
  return kExitFailure;
}

}  // namespace

int RunAgent(const CommandLine& cl) {
  const sigset_t signals = BlockStopSignals();  // before any thread starts: taken by sigwait() at the end
  SetUpLogging(cl.log_level);
  auto setup = LoadRunSetup(cl);
  if (!setup.ok()) return ConfigError(setup.error().message);
  const AgentConfig config = setup->settings.config;

  NodeClocks clocks(setup->virtual_clock);
  metrics::Registry registry;
  registry.Gauge("lockstep_agent_info", "Agent build and identity", {"node", "policy", "version"})
      .Set({config.node_name, config.policy, kAgentVersion}, 1);
  auto transport = UdpTimestampedTransport::Open(config.bind_address, config.probe.port, clocks.node_clock());
  if (!transport.ok()) return Failure("cannot open the probe socket", transport.error());
  ProbeKeyFileSource keys(*setup->probe_key, config.probe_key_file);
  AdjtimexHostClock host_clock;
  AgentAdapters adapters{.transport = transport->get(), .node_clock = &clocks.node_clock(), .keys = &keys,
                         .host_clock = &host_clock, .truth = clocks.truth()};
  if (!config.fabric.rails.empty()) {
    if (Status s = OpenFabricAdapters(setup->settings, setup->kube.has_value(), adapters); !s.ok()) {
      return ConfigError(s.error().message);
    }
  }
  // GPU health: NVML loaded now ($LOCKSTEP_NVML_LIBRARY, else
  // libnvidia-ml.so.1); without a driver the source says why and the agent
  // logs it once at its first read and carries on.
  if (config.gpu.mode != api::kGpuModeDisabled) {
    adapters.gpu_source = std::make_unique<gpu::NvmlGpuSource>(gpu::NvmlOptionsFromEnv());
  }
  std::unique_ptr<kube::KubeApi> kube_api;
  if (setup->kube) {
    auto api = OpenKubeApi(*setup->kube, kAgentVersion, registry);
    if (!api.ok()) return ConfigError(api.error().message);
    kube_api = std::move(*api);
    adapters.kube_api = kube_api.get();
  }
  auto built = BuildAgent(std::move(setup->settings), std::move(adapters), SystemClock::Instance(), registry);
  if (!built.ok()) return ConfigError(built.error().message);
  Agent& agent = **built;

  HttpServer health, time_api;
  RegisterHealthRoutes(health, registry, [&] { return agent.ready(); }, [&] { agent.RefreshGauges(); });
  if (Status s = health.Start(config.health_addr.host, config.health_addr.port); !s.ok()) {
    return Failure("cannot start the health server", s.error());
  }
  // The NCCL plugin's local endpoint: path verdicts and fabric time out,
  // connection reports in. Not fatal: the agent's other work goes on without it.
  std::unique_ptr<NcclEndpoint> nccl;
  std::unique_ptr<UnixLineServer> nccl_server;
  if (!cl.nccl_socket.empty()) {
    nccl = std::make_unique<NcclEndpoint>(NcclStateSource(agent, clocks.node_clock(), SystemNodeClock::RawNs),
                                          registry, NcclEndpointOptions{}, &SystemClock::Instance());
    nccl_server = std::make_unique<UnixLineServer>(cl.nccl_socket, *nccl);
    if (Status s = nccl_server->Start(); !s.ok()) {
      log::Warn("NCCL plugin endpoint not started; plugins on this node run without path health and fabric time",
                {{"error", s.error().message}});
      nccl_server.reset();
      nccl.reset();
    }
  }
  TimeApiSource time_source = agent.TimeSource();
  if (nccl) time_source.nccl = [e = nccl.get()] { return e->Jobs(); };
  RegisterTimeRoutes(time_api, time_source);
  if (Status s = time_api.Start(config.time_api_addr.host, config.time_api_addr.port); !s.ok()) {
    return Failure("cannot start the time API", s.error());
  }
  // A failed route adoption is logged; the fabric service retries it.
  (void)agent.Start(Agent::Drive::kThreads, [&] {
    LogAgentStart(cl, config, agent, (*transport)->local().ToString(), health.port(), time_api.port(),
                  setup->kube ? setup->kube->server : "");
  });
  // Fleet audits (Kubernetes mode): this node's NodeAudits, run on their own thread.
  std::unique_ptr<audit::NodeAuditRunner> audits;
  if (kube_api) {
    std::function<nlohmann::json()> fabric_status;
    if (FabricAgent* f = agent.fabric()) fabric_status = [f] { return f->StatusJson(); };
    audits = StartNodeAudits(*kube_api, config, registry, std::move(fabric_status),
                             setup->kube ? setup->kube->server : "");
  }
  int signal = 0;
  sigwait(&signals, &signal);
  log::Info("lockstep-agent stopping", {{"reason", "signal"}});
  if (nccl_server) nccl_server->Stop();
  if (audits) audits->Stop();
  agent.Stop();
  time_api.Stop();
  health.Stop();
  return kExitOk;
}

}  // namespace lockstep::agent
