#include "run_setup.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lockstep/agent/app/agent_plan.h"
#include "lockstep/agent/net/probe_key_file.h"
#include "lockstep/agent/runtime/fabric_topology_file.h"
#include "lockstep/common/log.h"

namespace lockstep::agent {
namespace {

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read " + what + " \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

void SetUpLogging(const std::string& level) {
  log::SetComponent("agent");
  log::SetLevel(level == "debug"   ? log::Level::kDebug
                : level == "warn"  ? log::Level::kWarn
                : level == "error" ? log::Level::kError
                                   : log::Level::kInfo);
}

Result<RunSetup> LoadRunSetup(const CommandLine& cl) {
  RunSetup setup;
  auto text = ReadFile(cl.config_path, "config file");
  if (!text.ok()) return text.error();
  auto parsed = ParseAgentConfig(*text, cl.config_path);
  if (!parsed.ok()) return parsed.error();
  AgentConfig& config = setup.settings.config;
  config = std::move(*parsed);
  if (Status s = ApplyOverrides(cl, config); !s.ok()) return s.error();
  if (cl.peers_file) {
    auto peers_text = ReadFile(*cl.peers_file, "peers file");
    if (!peers_text.ok()) return peers_text.error();
    auto peers = ParsePeers(*peers_text, *cl.peers_file);
    if (!peers.ok()) return peers.error();
    config.peers = std::move(*peers);
  }
  if (Status s = ValidateAgentConfig(config); !s.ok()) return s.error();
  if (cl.fabric_topology) {
    auto topo_text = ReadFile(*cl.fabric_topology, "fabric topology file");
    if (!topo_text.ok()) return topo_text.error();
    auto topo = ParseFabricTopologyText(*topo_text, *cl.fabric_topology);
    if (!topo.ok()) return topo.error();
    setup.settings.fabric_topology = std::move(*topo);
  }
  if (cl.virtual_clock) {
    auto v = ParseVirtualClockSpec(*cl.virtual_clock);
    if (!v.ok()) return v.error();
    setup.virtual_clock = *v;
  }
  auto key_bytes = ReadFile(config.probe_key_file, "probeKeyFile");
  if (!key_bytes.ok()) {
    return InvalidArgument(key_bytes.error().message + " (the shared probe key; in Kubernetes a Secret)");
  }
  auto key = ParseProbeKeyFile(*key_bytes, config.probe_key_file);
  if (!key.ok()) return key.error();
  setup.probe_key = std::move(*key);
  // This node's signing key for its own gossip records (status.nodePublicKey).
  if (!config.node_key_file.empty()) {
    auto seed = ReadFile(config.node_key_file, "nodeKeyFile");
    if (!seed.ok()) return seed.error();
    auto signer = NodeSigner::FromSeed(std::span(reinterpret_cast<const uint8_t*>(seed->data()), seed->size()));
    if (!signer.ok()) return InvalidArgument("nodeKeyFile " + config.node_key_file + ": " + signer.error().message);
    setup.settings.signer = std::move(*signer);
  }
  if (auto known = ResolvePeers(config); !known.ok()) return known.error();
  auto kube = KubeConfigFor(cl, config);
  if (!kube.ok()) return kube.error();
  setup.kube = std::move(*kube);
  setup.settings.seed = cl.seed ? *cl.seed : NodeIdFromName(config.node_name);
  setup.settings.simulated_clock = setup.virtual_clock.has_value();
  setup.settings.node_address_fallback = cl.node_address_fallback;
  setup.settings.advertise_address = cl.advertise_address.value_or("");
  setup.settings.report_interval = std::chrono::seconds(cl.report_interval_seconds);
  return setup;
}

}  // namespace lockstep::agent
