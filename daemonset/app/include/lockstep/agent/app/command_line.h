// Command line of lockstep-agent, parsed with CLI11 (which is why it lives in
// lockstep_agent_app, beside the other start-up decisions, and not in the pure
// core). Flags accept "--flag value" and "--flag=value". No I/O;
// thread-compatible.
//
//   lockstep-agent [run] --config PATH [overrides...]
//   lockstep-agent clock status [--addr HOST:PORT] [--json]
//   lockstep-agent fabric status [--addr HOST:PORT] [--json]
//   lockstep-agent version | help
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/agent/config.h"
#include "lockstep/api/defaults.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

struct CommandLine {
  enum class Command { kRun, kClockStatus, kFabricStatus, kVersion, kHelp };
  Command command = Command::kRun;

  // run
  std::string config_path;
  std::optional<std::string> node_name;
  std::optional<std::string> health_addr;
  std::optional<std::string> time_api_addr;
  // The NCCL plugin's local endpoint (a Unix socket); "" turns it off.
  std::string nccl_socket = "/run/lockstep/nccl.sock";
  std::optional<std::string> bind_address;
  std::optional<int> probe_port;
  std::optional<std::string> peers_file;
  std::optional<std::string> fabric_topology;  // JSON: leaves per node rail, spines per path (fabric_topology_file.h)
  std::optional<std::string> probe_key_file;
  std::optional<std::string> virtual_clock;  // offset_ns=..,drift_ppb=..,wander=..,seed=..
  std::optional<uint64_t> seed;              // peer selection seed
  std::string log_level = "info";

  // Kubernetes mode (ChooseAgentMode in lockstep/agent/app/agent_plan.h;
  // cmd/run_setup.cc loads the credentials): explicit credentials...
  std::string kubeconfig;
  std::string kube_context;
  std::string server;
  std::string token_file;
  std::string certificate_authority;
  // ...and its knobs.
  std::optional<std::string> advertise_address;  // IPv4 to publish in status.probeAddresses
  int report_interval_seconds = 10;
  bool node_address_fallback = true;

  // clock status
  std::string status_addr = std::string(api::kTimeApiHost) + ":" + std::to_string(api::kTimeApiPort);
  bool json = false;
};

// `args` excludes argv[0]. Errors are InvalidArgument with a usage hint.
Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// Applies the flag overrides that need no I/O (everything but peers_file and
// virtual_clock) to `config`.
Status ApplyOverrides(const CommandLine& cl, AgentConfig& config);

std::string Usage();

}  // namespace lockstep::agent
