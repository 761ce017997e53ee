// What `lockstep-agent run` reads before it opens anything: agent.yaml with
// the flags applied, the peers file, the probe key, the node signing key,
// --virtual-clock and the Kubernetes credentials. Every error here is a
// configuration error (exit code 2) whose message says what to fix.
#pragma once

#include <optional>

#include "lockstep/agent/app/agent.h"
#include "lockstep/agent/app/command_line.h"
#include "lockstep/agent/net/virtual_clock.h"
#include "lockstep/kube/kube_config.h"

namespace lockstep::agent {

struct RunSetup {
  AgentSettings settings;
  std::optional<ProbeKey> probe_key;             // always set on success
  std::optional<VirtualClockParams> virtual_clock;  // --virtual-clock
  std::optional<kube::KubeConfig> kube;           // nullopt: standalone
};

Result<RunSetup> LoadRunSetup(const CommandLine& cl);

// The log component ("agent") and --log-level (debug, info, warn, error).
void SetUpLogging(const std::string& level);

}  // namespace lockstep::agent
