// `lockstep-agent run`: load the config, build the adapters, wire the
// clock-sync service, fabric failover (fabric_wiring.h), the HTTP servers
// and (in Kubernetes mode) peer discovery and FabricHealth reporting; run
// until SIGTERM/SIGINT.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>

#include "commands.h"
#include "fabric_wiring.h"
#include "lockstep/agent/agent_http.h"
#include "lockstep/agent/app/agent_plan.h"
#include "lockstep/agent/app/host_discipline.h"
#include "lockstep/agent/clock_sync_service.h"
#include "lockstep/agent/config.h"
#include "lockstep/agent/kube/kube_agent.h"
#include "lockstep/agent/net/host_clock.h"
#include "lockstep/agent/net/probe_key_file.h"
#include "lockstep/agent/net/system_node_clock.h"
#include "lockstep/agent/net/udp_timestamped_transport.h"
#include "lockstep/agent/virtual_clock.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/http_server.h"
#include "lockstep/common/log.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/curl_kube_api.h"
#include "lockstep/kube/kube_config.h"

namespace lockstep::agent {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read " + what + " \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int ConfigError(const std::string& msg) {
  std::fprintf(stderr, "lockstep-agent: %s\n", msg.c_str());
  return kExitUsage;
}

log::Level ParseLevel(const std::string& s) {
  if (s == "debug") return log::Level::kDebug;
  if (s == "warn") return log::Level::kWarn;
  if (s == "error") return log::Level::kError;
  return log::Level::kInfo;
}

// The Kubernetes config for the mode ChooseAgentMode picks; nullopt: standalone.
Result<std::optional<kube::KubeConfig>> KubeConfigFor(const CommandLine& cl, const AgentConfig& config) {
  auto mode = ChooseAgentMode(!cl.kubeconfig.empty() || !cl.server.empty(), !config.peers.empty(),
                              std::getenv("KUBERNETES_SERVICE_HOST") != nullptr);
  if (!mode.ok()) return mode.error();
  switch (*mode) {
    case AgentMode::kStandalone:
      return std::optional<kube::KubeConfig>();
    case AgentMode::kKubernetesExplicit: {
      auto c = kube::LoadDefaultConfig({.kubeconfig = cl.kubeconfig,
                                        .context = cl.kube_context,
                                        .server = cl.server,
                                        .token_file = cl.token_file,
                                        .ca_file = cl.certificate_authority});
      if (!c.ok()) return c.error();
      return std::optional<kube::KubeConfig>(std::move(*c));
    }
    case AgentMode::kKubernetesInCluster:
      break;
  }
  auto c = kube::LoadInClusterConfig();
  if (!c.ok()) {
    log::Warn("in a pod but without ServiceAccount credentials: running standalone, no peers",
              {{"error", c.error().message}});
    return std::optional<kube::KubeConfig>();
  }
  return std::optional<kube::KubeConfig>(std::move(*c));
}

}  // namespace

int RunAgent(const CommandLine& cl) {
  // --- configuration (any problem here is exit code 2) ---
  auto text = ReadFile(cl.config_path, "config file");
  if (!text.ok()) return ConfigError(text.error().message);
  auto parsed = ParseAgentConfig(*text, cl.config_path);
  if (!parsed.ok()) return ConfigError(parsed.error().message);
  AgentConfig config = std::move(*parsed);
  if (Status s = ApplyOverrides(cl, config); !s.ok()) return ConfigError(s.error().message);
  if (cl.peers_file) {
    auto peers_text = ReadFile(*cl.peers_file, "peers file");
    if (!peers_text.ok()) return ConfigError(peers_text.error().message);
    auto peers = ParsePeers(*peers_text, *cl.peers_file);
    if (!peers.ok()) return ConfigError(peers.error().message);
    config.peers = std::move(*peers);
  }
  if (Status s = ValidateAgentConfig(config); !s.ok()) return ConfigError(s.error().message);
  std::optional<VirtualClockParams> vparams;
  if (cl.virtual_clock) {
    auto v = ParseVirtualClockSpec(*cl.virtual_clock);
    if (!v.ok()) return ConfigError(v.error().message);
    vparams = *v;
  }
  auto key_bytes = ReadFile(config.probe_key_file, "probeKeyFile");
  if (!key_bytes.ok()) return ConfigError(key_bytes.error().message + " (the shared probe key; in Kubernetes a Secret)");
  std::string key_text = *key_bytes;
  while (!key_text.empty() && (key_text.back() == '\n' || key_text.back() == '\r')) key_text.pop_back();
  auto key = ProbeKey::FromBytes(key_text);
  if (!key.ok()) return ConfigError(config.probe_key_file + ": " + key.error().message);
  auto known = ResolvePeers(config);
  if (!known.ok()) return ConfigError(known.error().message);

  log::SetComponent("agent");
  log::SetLevel(ParseLevel(cl.log_level));
  auto kube_config = KubeConfigFor(cl, config);
  if (!kube_config.ok()) return ConfigError(kube_config.error().message);

  // --- adapters ---
  // Under --virtual-clock every agent process on the machine shares one base
  // clock, so their ground truths compare (see system_node_clock.h).
  SystemNodeClock system_clock(/*shared_anchor=*/vparams.has_value());
  std::unique_ptr<VirtualClock> virtual_clock;
  if (vparams) virtual_clock = std::make_unique<VirtualClock>(system_clock, *vparams);
  const NodeClock& node_clock = virtual_clock ? static_cast<const NodeClock&>(*virtual_clock) : system_clock;
  metrics::Registry registry;
  registry.Gauge("lockstep_agent_info", "Agent build and identity", {"node", "policy", "version"})
      .Set({config.node_name, config.policy, kAgentVersion}, 1);

  auto transport = UdpTimestampedTransport::Open(config.bind_address, config.probe.port, node_clock);
  if (!transport.ok()) {
    log::Error("cannot open the probe socket", {{"error", transport.error().message}});
    return kExitFailure;
  }
  PacketCodec codec(*key);
  // This node's signing key for its own gossip records (status.nodePublicKey).
  Result<NodeSigner> signer = NodeSigner::Generate();
  if (!config.node_key_file.empty()) {
    auto seed = ReadFile(config.node_key_file, "nodeKeyFile");
    if (!seed.ok()) return ConfigError(seed.error().message);
    signer = NodeSigner::FromSeed(std::span(reinterpret_cast<const uint8_t*>(seed->data()), seed->size()));
  }
  if (!signer.ok()) return ConfigError("nodeKeyFile " + config.node_key_file + ": " + signer.error().message);
  uint64_t seed = cl.seed ? *cl.seed : NodeIdFromName(config.node_name);
  ClockSyncOptions opts = MakeClockSyncOptions(config, *known, seed);
  opts.signer = &*signer;
  std::unique_ptr<ClockSyncService> service;
  if (config.clock_sync.enabled) {
    service = std::make_unique<ClockSyncService>(**transport, node_clock, SystemClock::Instance(), codec, opts,
                                                 registry);
  }

  // --- host clock discipline (opt-in) ---
  bool discipline = config.clock_sync.discipline_host_clock && service != nullptr;
  if (discipline && virtual_clock) {
    log::Warn("disciplineHostClock is ignored with --virtual-clock (the local clock is simulated)");
    discipline = false;
  }
  auto& discipline_active = registry.Gauge("lockstep_clock_host_discipline_active",
                                           "1 while the agent disciplines the host clock (CAP_SYS_TIME)");
  discipline_active.Set(discipline ? 1 : 0);
  AdjtimexHostClock host_clock;
  HostClockDiscipline host_discipline(host_clock, discipline);
  if (discipline) {
    service->OnWindow([&](const ClockEstimate&, const TimeReading&) {
      auto outcome = host_discipline.OnWindow(service->Read());
      if (outcome == HostClockDiscipline::Outcome::kFailed) {
        log::Error("host clock discipline disabled; still serving fabric time",
                   {{"error", host_discipline.error()}});
        discipline_active.Set(0);
      } else if (outcome == HostClockDiscipline::Outcome::kRefused) {
        log::Warn("host clock step refused: the error bound does not justify it; waiting for a tighter reading");
      }
    });
  }

  // --- fabric failover (agent.yaml fabric.rails; its own thread) ---
  auto fabric = BuildFabricAgent(config, *key, service.get(), registry, seed, kube_config->has_value());
  if (!fabric.ok()) return ConfigError(fabric.error().message);

  // --- Kubernetes: peer discovery and FabricHealth reports ---
  std::unique_ptr<kube::CurlKubeApi> kube_api;
  std::unique_ptr<KubeAgent> kube_agent;
  if (*kube_config) {
    auto api = kube::CurlKubeApi::FromConfig(**kube_config, SystemClock::Instance(),
                                             {.request_timeout = std::chrono::seconds(15),
                                              .user_agent = std::string("lockstep-agent/") + kAgentVersion,
                                              .registry = &registry});
    if (!api.ok()) return ConfigError(api.error().message);
    kube_api = std::move(*api);
    KubeAgentOptions ko;
    ko.node_name = config.node_name;
    ko.policy = config.policy;
    ko.policy_probe_port = config.probe.port;
    ko.peers_per_node = config.probe.peers_per_node;
    ko.seed = seed;
    ko.node_address_fallback = cl.node_address_fallback;
    ko.advertise_address = cl.advertise_address.value_or("");
    ko.bind_address = config.bind_address;
    ko.bound_port = (*transport)->local().port;
    ko.node_public_key = signer->public_key().base64();
    ko.report_interval = std::chrono::seconds(cl.report_interval_seconds);
    FabricService* fabric_service = nullptr;
    if (*fabric) {
      fabric_service = &(*fabric)->service();
      ko.fabric_host_address = FormatIpv4((*fabric)->options().setup.host_address);
    }
    kube_agent = std::make_unique<KubeAgent>(*kube_api, SystemClock::Instance(), service.get(), fabric_service, ko,
                                             registry);
  }

  // --- HTTP ---
  std::atomic<bool> ready{false};
  // Ground truth is benchmark-only: its gauges exist only with --virtual-clock.
  metrics::Family* true_offset = nullptr;
  metrics::Family* true_drift = nullptr;
  std::function<std::optional<GroundTruth>()> truth;
  if (virtual_clock) {
    true_offset = &registry.Gauge("lockstep_virtual_clock_true_offset_ns",
                                  "Ground truth with --virtual-clock: local clock minus the shared base clock");
    true_drift = &registry.Gauge("lockstep_virtual_clock_true_drift_ppb",
                                 "Ground truth with --virtual-clock: frequency error of the local clock");
    truth = [&]() -> std::optional<GroundTruth> {
      int64_t b = system_clock.NowNs();
      int64_t local = virtual_clock->Transform(b);
      return GroundTruth{local, local - b, virtual_clock->TrueDriftPpb(b)};
    };
  }
  HttpServer health;
  RegisterHealthRoutes(health, registry, [&] { return ready.load(); }, [&] {
    if (service) service->RefreshGauges();
    if (truth) {
      auto t = truth();
      true_offset->Set(static_cast<double>(t->true_offset_ns));
      true_drift->Set(t->true_drift_ppb);
    }
  });
  if (Status s = health.Start(config.health_addr.host, config.health_addr.port); !s.ok()) {
    log::Error("cannot start the health server", {{"error", s.error().message}});
    return kExitFailure;
  }
  HttpServer time_api;
  TimeApiSource source;
  source.node_name = config.node_name;
  source.truth = truth;
  source.status = [&](std::optional<int64_t> local) {
    if (service) return service->Status(local);
    ClockStatus s;  // clock sync disabled: FREERUN on the local clock
    s.reading.local_ns = s.reading.now_ns = local ? *local : node_clock.NowNs();
    s.reading.error_bound_ns = s.reading.latest_ns = std::numeric_limits<int64_t>::max();
    s.reading.earliest_ns = std::numeric_limits<int64_t>::min();
    return s;
  };
  if (*fabric) source.fabric = [f = fabric->get()] { return f->StatusJson(); };
  RegisterTimeRoutes(time_api, std::move(source));
  if (Status s = time_api.Start(config.time_api_addr.host, config.time_api_addr.port); !s.ok()) {
    log::Error("cannot start the time API", {{"error", s.error().message}});
    return kExitFailure;
  }

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);

  std::string selected_names;
  for (const auto& p : opts.selected) selected_names += (selected_names.empty() ? "" : ",") + p.name;
  log::Info("lockstep-agent started",
            {{"node", config.node_name},
             {"policy", config.policy},
             {"probe_addr", (*transport)->local().ToString()},
             {"health_addr", config.health_addr.host + ":" + std::to_string(health.port())},
             {"time_api_addr", config.time_api_addr.host + ":" + std::to_string(time_api.port())},
             {"clock_sync", config.clock_sync.enabled ? "enabled" : "disabled"},
             {"mode", kube_agent ? "kubernetes (" + (*kube_config)->server + ")" : "standalone"},
             {"virtual_clock", virtual_clock ? *cl.virtual_clock : "off"},
             {"peers", selected_names},
             {"node_public_key", signer->public_key().base64()}});
  LogFabricStart(config, fabric->get());
  if (kube_agent) kube_agent->Start();
  // With fabric failover the prober's thread also sends and reads the
  // clock-sync probes after each of its wake-ups (one wake-up for both; see
  // FabricAgent::Start) and this thread closes the windows (the solve).
  const bool shared_loop = *fabric && service;
  if (*fabric) {
    Status s = shared_loop ? (*fabric)->Start([&svc = *service] { svc.Exchange(); }, opts.interval)
                           : (*fabric)->Start();
    if (!s.ok()) {
      log::Warn("fabric failover: cannot list owned routes; retrying", {{"error", s.error().message}});
    }
    if (!(*fabric)->realtime()) {
      log::Warn("fabric prober runs at normal priority (no CAP_SYS_NICE): on busy cores probes may be late and "
                "paths seem to flap");
    }
  }
  ready = true;
  TransportEvents idle;
  // Key rotation: a rewritten probeKeyFile (a rotated Secret) becomes the
  // signing key; the previous one is still accepted (PacketCodec::Rotate).
  // Checked once a second, not per loop iteration: the clock-sync loop
  // turns ~150 times a second, and a stat() each time cost more CPU than
  // the whole fabric prober's user space (a rotated Secret takes a minute
  // to reach the pod anyway).
  auto key_file = ProbeKeyFile::Open(config.probe_key_file);
  auto next_key_check = std::chrono::steady_clock::now();
  while (!g_stop) {
    if (key_file.ok() && std::chrono::steady_clock::now() >= next_key_check) {
      next_key_check = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      auto r = key_file->Reload(codec);
      if (!r.ok()) log::Warn("probe key file not reloaded; keeping the current key", {{"error", r.error().message}});
      if (r.ok() && *r) {
        log::Info("probe key rotated; the previous key is still accepted", {});
        if (*fabric) (*fabric)->codec().Rotate(key_file->key());
      }
    }
    if (shared_loop) {
      // Woken for the window, the key check, or to notice a stop signal.
      auto now = std::chrono::steady_clock::now();
      auto until = std::min(service->NextWindow(), now + std::chrono::milliseconds(200));
      if (key_file.ok()) until = std::min(until, next_key_check);
      std::this_thread::sleep_until(until);
      service->CloseWindowIfDue();
    } else if (service) {
      service->RunOnce(std::chrono::milliseconds(100));
    } else {
      idle.clear();
      (void)(*transport)->Poll(std::chrono::milliseconds(100), idle);  // nothing to do but wait
    }
  }
  ready = false;
  log::Info("lockstep-agent stopping", {{"reason", "signal"}});
  if (kube_agent) kube_agent->Stop();
  if (*fabric) {
    (*fabric)->Stop();
    log::Info("fabric failover stopped; pinned routes stay in place for the next start");
  }
  time_api.Stop();
  health.Stop();
  return kExitOk;
}

}  // namespace lockstep::agent
