#include "lockstep/agent/command_line.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>

namespace lockstep::agent {
namespace {

Error Bad(const std::string& msg) { return InvalidArgument(msg + " (see lockstep-agent --help)"); }

}  // namespace

std::string Usage() {
  return R"(lockstep-agent: the Lockstep node agent (clock sync and probe mesh).

Usage:
  lockstep-agent [run] --config PATH [flags]   run the agent
  lockstep-agent clock status [--addr HOST:PORT] [--json]
                                               query a running agent's clock
  lockstep-agent version | help

Run flags (override agent.yaml):
  --config PATH            agent.yaml (required)
  --node-name NAME         this node's name (Kubernetes: --node-name=$(NODE_NAME))
  --health-addr IP:PORT    /healthz, /readyz, /metrics (port 0: pick one)
  --time-api-addr IP:PORT  local time API: GET /time, GET /status
  --bind-address IP        probe socket address (default 0.0.0.0)
  --probe-port PORT        probe UDP port (0: pick one)
  --peers-file PATH        YAML list of {name, address[, port]}; replaces peers:
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

Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.
)";
}

Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  size_t i = 0;
  if (i < args.size() && !args[i].starts_with("-")) {
    const std::string& verb = args[i];
    if (verb == "run") {
      ++i;
    } else if (verb == "version") {
      cl.command = CommandLine::Command::kVersion;
      ++i;
    } else if (verb == "help") {
      cl.command = CommandLine::Command::kHelp;
      ++i;
    } else if (verb == "clock") {
      if (i + 1 >= args.size() || args[i + 1] != "status") return Bad("unknown command \"clock\"; did you mean \"clock status\"?");
      cl.command = CommandLine::Command::kClockStatus;
      i += 2;
    } else {
      return Bad("unknown command \"" + verb + "\"");
    }
  }
  const bool run = cl.command == CommandLine::Command::kRun;
  for (; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (size_t eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    if (flag == "--help" || flag == "-h") {
      cl.command = CommandLine::Command::kHelp;
      return cl;
    }
    if (flag == "--json" && cl.command == CommandLine::Command::kClockStatus) {
      cl.json = true;
      continue;
    }
    auto value = [&]() -> Result<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) return Bad(flag + " needs a value");
      return args[++i];
    };
    auto as_int = [&](const std::string& v, int64_t lo, int64_t hi) -> Result<int64_t> {
      char* end = nullptr;
      errno = 0;
      long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
        return Bad(flag + " must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi) +
                   " (got \"" + v + "\")");
      }
      return static_cast<int64_t>(x);
    };
    using Setter = std::function<Status(const std::string&)>;
    auto str = [](auto& field) -> Setter {
      return [&field](const std::string& v) { field = v; return Status::Ok(); };
    };
    std::map<std::string, Setter> setters;
    if (run) {
      setters = {
          {"--config", str(cl.config_path)},
          {"--node-name", str(cl.node_name)},
          {"--health-addr", str(cl.health_addr)},
          {"--time-api-addr", str(cl.time_api_addr)},
          {"--bind-address", str(cl.bind_address)},
          {"--peers-file", str(cl.peers_file)},
          {"--probe-key-file", str(cl.probe_key_file)},
          {"--virtual-clock", str(cl.virtual_clock)},
          {"--log-level", [&](const std::string& v) -> Status {
             if (v != "debug" && v != "info" && v != "warn" && v != "error") {
               return Bad("--log-level must be one of debug, info, warn, error (got \"" + v + "\")");
             }
             cl.log_level = v;
             return Status::Ok();
           }},
          {"--probe-port", [&](const std::string& v) -> Status {
             auto p = as_int(v, 0, 65535);
             if (!p.ok()) return p.error();
             cl.probe_port = static_cast<int>(*p);
             return Status::Ok();
           }},
          {"--kubeconfig", str(cl.kubeconfig)},
          {"--context", str(cl.kube_context)},
          {"--server", str(cl.server)},
          {"--token-file", str(cl.token_file)},
          {"--certificate-authority", str(cl.certificate_authority)},
          {"--advertise-address", str(cl.advertise_address)},
          {"--report-interval", [&](const std::string& v) -> Status {
             auto p = as_int(v, 1, 3600);
             if (!p.ok()) return p.error();
             cl.report_interval_seconds = static_cast<int>(*p);
             return Status::Ok();
           }},
          {"--node-address-fallback", [&](const std::string& v) -> Status {
             if (v != "true" && v != "false") {
               return Bad("--node-address-fallback must be true or false (got \"" + v + "\")");
             }
             cl.node_address_fallback = v == "true";
             return Status::Ok();
           }},
          {"--seed", [&](const std::string& v) -> Status {
             auto p = as_int(v, 0, INT64_MAX);
             if (!p.ok()) return p.error();
             cl.seed = static_cast<uint64_t>(*p);
             return Status::Ok();
           }},
      };
    } else if (cl.command == CommandLine::Command::kClockStatus) {
      setters = {{"--addr", str(cl.status_addr)}};
    }
    auto it = setters.find(flag);
    if (it == setters.end()) return Bad("unknown flag \"" + flag + "\"");
    auto v = value();
    if (!v.ok()) return v.error();
    if (Status s = it->second(*v); !s.ok()) return s.error();
  }
  if (run && cl.config_path.empty()) return Bad("--config PATH is required");
  if (run && !cl.server.empty() && cl.token_file.empty()) return Bad("--server needs --token-file");
  if (run && cl.advertise_address && !ParseHostPort(*cl.advertise_address + ":0", "").ok()) {
    return Bad("--advertise-address must be an IPv4 address (got \"" + *cl.advertise_address + "\")");
  }
  if (cl.command == CommandLine::Command::kClockStatus) {
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
