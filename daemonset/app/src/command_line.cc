#include "lockstep/agent/app/command_line.h"

#include <CLI/CLI.hpp>

namespace lockstep::agent {
namespace {

Error Bad(const std::string& msg) { return InvalidArgument(msg + " (see lockstep-agent --help)"); }

}  // namespace

std::string Usage() {
  return R"(lockstep-agent: the Lockstep node agent (clock sync, fabric failover, GPU health).

Usage:
  lockstep-agent [run] --config PATH [flags]   run the agent
  lockstep-agent clock status [--addr HOST:PORT] [--json]
                                               query a running agent's clock
  lockstep-agent fabric status [--addr HOST:PORT] [--json]
                                               its rails, paths and pins
  lockstep-agent gpu-status [--library PATH] [--json]
                                               read this node's GPUs once
                                               through NVML (no agent needed;
                                               "no NVIDIA driver: ..." without)
  lockstep-agent audit [--root DIR] [--rail IF]... [--expect ID=VALUE]... [--json]
                                               run the fleet audit's checks on
                                               this node once (exit 1 on a failure)
  lockstep-agent install-nccl-plugin [--from FILE] --to DIR
                                               copy the NCCL network plugin
                                               (libnccl-net-lockstep.so) from
                                               the image into DIR, atomically
                                               (the DaemonSet's init container)
  lockstep-agent version | help

Run flags (override agent.yaml):
  --config PATH            agent.yaml (required)
  --node-name NAME         this node's name (Kubernetes: --node-name=$(NODE_NAME))
  --health-addr IP:PORT    /healthz, /readyz, /metrics (port 0: pick one)
  --time-api-addr IP:PORT  local time API: GET /time, GET /status
  --nccl-socket PATH       the NCCL plugin's endpoint (default /run/lockstep/nccl.sock; "": off)
  --bind-address IP        probe socket address (default 0.0.0.0)
  --probe-port PORT        probe UDP port (0: pick one)
  --peers-file PATH        YAML list of {name, address[, port]}; replaces peers:
  --fabric-topology PATH   JSON: the leaf of each node's rails and the spine of
                           known paths, so congestion is localised to links
  --probe-key-file PATH    shared HMAC key for probe packets
  --virtual-clock SPEC     run on a simulated clock (testbeds):
                           offset_ns=N,drift_ppb=N,wander=PPB_PER_SQRT_S,seed=N
  --seed N                 peer selection seed (default: hash of the node name)
  --log-level LEVEL        debug | info | warn | error

Kubernetes mode (peers from FabricHealths of the node's policy, status written
to the node's FabricHealth). On when --kubeconfig or --server is given, or in a
pod (KUBERNETES_SERVICE_HOST and a ServiceAccount token) without peers:.
  --kubeconfig PATH        kubeconfig file
  --context NAME           kubeconfig context
  --server URL --token-file PATH [--certificate-authority PATH]
                           API server and bearer token
  --advertise-address IP   probe address to publish (default: --bind-address
                           unless 0.0.0.0, else the Node's InternalIP)
  --report-interval S      seconds between FabricHealth reports (default 10)
  --node-address-fallback true|false
                           probe peers that publish no address at their Node's
                           InternalIP and the policy's probe port (default true)

GPU health (agent.yaml gpu:, mode Auto by default) reads NVML from the
NVIDIA driver; without one the agent says "no NVIDIA driver" once and carries on.
  LOCKSTEP_NVML_LIBRARY    environment: the NVML library to load (default
                           libnvidia-ml.so.1)

Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.
)";
}

namespace {

// The run flags, on the top-level app ("lockstep-agent --config ...") and on
// the explicit "run" subcommand.
void AddRunFlags(CLI::App& app, CommandLine& cl) {
  app.add_option("--config", cl.config_path);
  app.add_option("--node-name", cl.node_name);
  app.add_option("--health-addr", cl.health_addr);
  app.add_option("--time-api-addr", cl.time_api_addr);
  app.add_option("--nccl-socket", cl.nccl_socket);
  app.add_option("--bind-address", cl.bind_address);
  app.add_option("--probe-port", cl.probe_port)->check(CLI::Range(0, 65535));
  app.add_option("--peers-file", cl.peers_file);
  app.add_option("--fabric-topology", cl.fabric_topology);
  app.add_option("--probe-key-file", cl.probe_key_file);
  app.add_option("--virtual-clock", cl.virtual_clock);
  app.add_option("--seed", cl.seed);
  app.add_option("--log-level", cl.log_level)->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.add_option("--kubeconfig", cl.kubeconfig);
  app.add_option("--context", cl.kube_context);
  app.add_option("--server", cl.server);
  app.add_option("--token-file", cl.token_file);
  app.add_option("--certificate-authority", cl.certificate_authority);
  app.add_option("--advertise-address", cl.advertise_address);
  app.add_option("--report-interval", cl.report_interval_seconds)->check(CLI::Range(1, 3600));
  // Exactly "true" or "false" (CLI11's bool would also take yes/on/1).
  app.add_option_function<std::string>(
         "--node-address-fallback", [&cl](const std::string& v) { cl.node_address_fallback = v == "true"; })
      ->check(CLI::IsMember({"true", "false"}));
}

}  // namespace

Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "clock" && (args.size() < 2 || args[1] != "status")) {
    return Bad("unknown command \"clock\"; did you mean \"clock status\"?");
  }
  if (!args.empty() && args[0] == "fabric" && (args.size() < 2 || args[1] != "status")) {
    return Bad("unknown command \"fabric\"; did you mean \"fabric status\"?");
  }
  CommandLine cl;
  bool help = false;
  CLI::App app("lockstep-agent");
  app.set_help_flag();  // Usage() is the help text
  app.add_flag("-h,--help", help);
  AddRunFlags(app, cl);
  CLI::App* run = app.add_subcommand("run");
  AddRunFlags(*run, cl);
  run->add_flag("-h,--help", help);
  CLI::App* status = app.add_subcommand("clock")->add_subcommand("status");
  status->add_option("--addr", cl.status_addr);
  status->add_flag("--json", cl.json);
  status->add_flag("-h,--help", help);
  CLI::App* fabric_status = app.add_subcommand("fabric")->add_subcommand("status");
  fabric_status->add_option("--addr", cl.status_addr);
  fabric_status->add_flag("--json", cl.json);
  fabric_status->add_flag("-h,--help", help);
  CLI::App* version = app.add_subcommand("version");
  CLI::App* help_cmd = app.add_subcommand("help");
  app.require_subcommand(0, 1);
  try {
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 wants them reversed
  } catch (const CLI::Error& e) {
    return Bad(e.what());
  }
  if (help || *help_cmd) {
    cl.command = CommandLine::Command::kHelp;
    return cl;
  }
  if (*version) cl.command = CommandLine::Command::kVersion;
  if (*status) cl.command = CommandLine::Command::kClockStatus;
  if (*fabric_status) cl.command = CommandLine::Command::kFabricStatus;
  const bool is_run = cl.command == CommandLine::Command::kRun;
  if (is_run && cl.config_path.empty()) return Bad("--config PATH is required");
  if (is_run && !cl.server.empty() && cl.token_file.empty()) return Bad("--server needs --token-file");
  if (is_run && cl.advertise_address && !ParseHostPort(*cl.advertise_address + ":0", "").ok()) {
    return Bad("--advertise-address must be an IPv4 address (got \"" + *cl.advertise_address + "\")");
  }
  if (cl.command == CommandLine::Command::kClockStatus || cl.command == CommandLine::Command::kFabricStatus) {
    auto hp = ParseHostPort(cl.status_addr, "--addr");
    if (!hp.ok()) return Bad(hp.error().message);
  }
  return cl;
}

Status ApplyOverrides(const CommandLine& cl, AgentConfig& config) {
  if (cl.node_name) config.node_name = *cl.node_name;
  if (cl.health_addr) {
    auto hp = ParseHostPort(*cl.health_addr, "--health-addr");
    if (!hp.ok()) return hp.error();
    config.health_addr = *hp;
  }
  if (cl.time_api_addr) {
    auto hp = ParseHostPort(*cl.time_api_addr, "--time-api-addr");
    if (!hp.ok()) return hp.error();
    config.time_api_addr = *hp;
  }
  if (cl.bind_address) config.bind_address = *cl.bind_address;
  if (cl.probe_port) config.probe.port = *cl.probe_port;
  if (cl.probe_key_file) config.probe_key_file = *cl.probe_key_file;
  return Status::Ok();
}

}  // namespace lockstep::agent
