// KubeAgent: the node agent's Kubernetes side, on one background thread.
//
//  - PeerDiscovery: FabricHealths of our policy -> the clock-sync peer set
//    (ClockSyncService::SetPeers).
//  - FabricHealthReporter: the ClockSyncService's state -> our FabricHealth
//    status, including our probe endpoint (status.probeAddresses).
//
// The advertised probe address is --advertise-address, else the bind address
// when it is a specific one, else our Node's InternalIP (looked up; not
// published until known). API trouble never stops clock sync: the peer set
// stays as it was and reports are retried.
//
// Thread-safety: construct, Start() and Stop() from one owning thread.
#pragma once

#include "lockstep/api/defaults.h"
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "lockstep/agent/clock_sync_service.h"
#include "lockstep/agent/kube/fabric_health_reporter.h"
#include "lockstep/agent/kube/peer_discovery.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::agent {

struct KubeAgentOptions {
  std::string node_name;
  std::string policy = "default";
  int policy_probe_port = api::kProbePort;  // probe.port from the policy (Node-address fallback)
  int peers_per_node = 16;
  uint64_t seed = 1;             // peer selection
  bool node_address_fallback = true;
  std::string advertise_address;  // "" = derive (see above)
  std::string bind_address = "0.0.0.0";
  int bound_port = 0;  // the probe socket's port
  std::string node_public_key;  // published as status.nodePublicKey
  Nanos report_interval = std::chrono::seconds(10);
  Nanos heartbeat = std::chrono::seconds(30);
  Nanos tick = std::chrono::milliseconds(250);
};

class KubeAgent {
 public:
  // `service` is null when clock sync is disabled. REQUIRES: api, clock,
  // service and registry outlive the agent.
  KubeAgent(kube::KubeApi& api, Clock& clock, ClockSyncService* service, KubeAgentOptions options,
            metrics::Registry& registry);
  ~KubeAgent();  // Stop()s
  KubeAgent(const KubeAgent&) = delete;
  KubeAgent& operator=(const KubeAgent&) = delete;

  void Start();
  void Stop();

  // A report of the service's state now. Thread: the kube thread (or tests).
  AgentReport Snapshot();

 private:
  void Run();

  Clock& clock_;
  ClockSyncService* service_;
  const KubeAgentOptions options_;
  std::unique_ptr<PeerDiscovery> discovery_;
  FabricHealthReporter reporter_;
  std::optional<std::string> advertise_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

// The stale_after for peers given the report interval: three times the
// longest gap between two reports of a live agent.
std::chrono::seconds StaleAfter(Nanos report_interval, Nanos heartbeat);

}  // namespace lockstep::agent
