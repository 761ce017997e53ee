// The real adapters for `lockstep-agent run` (the composition root,
// lockstep/agent/app/agent.h, takes them as ports): the node clock (real or
// --virtual-clock), fabric failover's socket and netlink actuator with the
// rails and host address discovered from the kernel, the probe key file as
// the key source; and the start-up log lines.
#pragma once

#include <signal.h>

#include <optional>
#include <string>

#include "lockstep/agent/app/agent.h"
#include "lockstep/agent/app/command_line.h"
#include "lockstep/agent/net/probe_key_file.h"
#include "lockstep/agent/net/system_node_clock.h"
#include "lockstep/agent/net/virtual_clock.h"
#include "lockstep/kube/kube_config.h"

namespace lockstep::agent {

// The node's local clock: the system's, or a simulated one over it
// (--virtual-clock) whose ground truth the agent serves. Under
// --virtual-clock every agent process on the machine shares one base clock,
// so their ground truths compare (see system_node_clock.h).
class NodeClocks {
 public:
  explicit NodeClocks(const std::optional<VirtualClockParams>& virtual_clock);
  const NodeClock& node_clock() const;
  // Empty without --virtual-clock. REQUIRES: this outlives the function.
  std::function<std::optional<GroundTruth>()> truth() const;

 private:
  SystemNodeClock system_;
  std::optional<VirtualClock> virtual_;
};

// For agent.yaml's fabric.rails: discovers the host address and the rails,
// checks the fabric options (MakeFabricServiceOptions), opens the probe
// socket and the netlink actuator into `adapters`. Errors are configuration
// or environment problems the caller reports and exits on.
Status OpenFabricAdapters(const AgentSettings& settings, bool kubernetes, AgentAdapters& adapters);

// SIGTERM and SIGINT blocked in this thread and every thread it starts
// later (they inherit the mask): the caller takes them with sigwait().
sigset_t BlockStopSignals();

// The Kubernetes API client (curl) for `config`, its metrics in `registry`.
Result<std::unique_ptr<kube::KubeApi>> OpenKubeApi(const kube::KubeConfig& config, const std::string& version,
                                                   metrics::Registry& registry);

// The "lockstep-agent started" line: what runs, where it listens. The
// agent binary test reads the ports from it (it must be the first line).
void LogAgentStart(const CommandLine& cl, const AgentConfig& config, Agent& agent, const std::string& probe_addr,
                   int health_port, int time_api_port, const std::string& kube_server);

// Logs what failover covers (RDMA devices present or not) and, with an
// agent, its rails, host address and peers; without, that it is off.
void LogFabricStart(const AgentConfig& config, const FabricAgent* agent);

// The probe key file (a mounted Secret) as the agent's key source: `key` is
// the one read at start; without a file to watch (it vanished since) it
// stays.
class ProbeKeyFileSource final : public ProbeKeySource {
 public:
  ProbeKeyFileSource(ProbeKey key, const std::string& path);
  const ProbeKey& key() const override { return file_ ? file_->key() : key_; }
  Result<bool> Reload(PacketCodec& codec) override { return file_ ? file_->Reload(codec) : Result<bool>(false); }

 private:
  ProbeKey key_;
  std::optional<ProbeKeyFile> file_;
};

}  // namespace lockstep::agent
