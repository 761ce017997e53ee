// KubeAgent: the node agent's Kubernetes side, on one background thread.
//
//  - PeerDiscovery: FabricHealths of our policy -> the clock-sync peer set
//    (ClockSyncService::SetPeers).
//  - FabricHealthReporter: the ClockSyncService's state -> our FabricHealth
//    status, including our probe endpoint (status.probeAddresses).
//  - With fabric failover (agent.yaml fabric.rails): the FabricService gets
//    its peers from the same discovery (FabricPeersOf: the clock-sync
//    selection, peers with a status.hostAddress), the report carries its
//    rails, flaps and last flap (FabricSnapshotOf), we publish our host
//    address (status.hostAddress), and each flap alert the service raises
//    becomes one Warning Event (reason FabricFlapAlert) on our FabricHealth;
//    so does each new latency SLA breach the service hands over (reason
//    FabricLatencySLABreach), and the LatencyWithinSLA condition follows
//    the service's latency view.
//  - With a GPU report source (agent.yaml gpu.mode not Disabled): status.gpu
//    and the GPUHealthy condition from it, at every report.
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
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "lockstep/agent/runtime/clock_sync_service.h"
#include "lockstep/agent/runtime/fabric_service.h"
#include "lockstep/agent/kube/fabric_health_reporter.h"
#include "lockstep/agent/kube/peer_discovery.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/event_recorder.h"
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
  std::string fabric_host_address;  // status.hostAddress (with a FabricService)
};

inline constexpr char kFlapAlertReason[] = "FabricFlapAlert";
inline constexpr char kLatencyBreachReason[] = "FabricLatencySLABreach";
inline constexpr char kLinkCongestedReason[] = "FabricLinkCongested";
inline constexpr char kPathDelayRoseReason[] = "FabricPathDelayRose";

// The report's fabric part from the service's view; `host_address` is ours.
FabricSnapshot FabricSnapshotOf(const FabricHealthView& view, const std::string& host_address);

// The Warning Event for a flap alert: reason kFlapAlertReason, involved
// object our FabricHealth (`health` as last read; a minimal reference to
// FabricHealth/<node> before the first read).
void RecordFlapAlert(kube::EventRecorder& events, const std::optional<kube::Json>& health,
                     const std::string& node_name, const FabricFlapAlert& alert);

// The Warning Event for a path's new latency SLA breach (at most one per
// path per 10 minutes: the service decides): reason kLatencyBreachReason,
// on our FabricHealth as RecordFlapAlert.
void RecordLatencyBreach(kube::EventRecorder& events, const std::optional<kube::Json>& health,
                         const std::string& node_name, const FabricLatencyBreach& breach);

// The Warning Event for a link newly flagged congested (kLinkCongestedReason)
// or a path whose delay newly rose alone (kPathDelayRoseReason), on our
// FabricHealth as RecordFlapAlert. One per finding: the publisher raises a
// finding when a link or path enters the state, not while it stays.
void RecordCongestion(kube::EventRecorder& events, const std::optional<kube::Json>& health,
                      const std::string& node_name, const CongestionFinding& finding);

// The GPU part of a report, read from the kube thread (thread-safe); empty
// function: no GPU monitor.
using GpuReportSource = std::function<std::optional<GpuReport>()>;

class KubeAgent {
 public:
  // `service` is null when clock sync is disabled, `fabric` without
  // fabric.rails. REQUIRES: api, clock, service, fabric, registry and what
  // `gpu` reads outlive the agent.
  KubeAgent(kube::KubeApi& api, Clock& clock, ClockSyncService* service, FabricService* fabric,
            KubeAgentOptions options, metrics::Registry& registry, GpuReportSource gpu = {});
  ~KubeAgent();  // Stop()s
  KubeAgent(const KubeAgent&) = delete;
  KubeAgent& operator=(const KubeAgent&) = delete;

  void Start();
  void Stop();

  // A report of the service's state now. Thread: the kube thread (or tests).
  AgentReport Snapshot();

 private:
  void Run();
  void RaiseFlapAlerts();

  Clock& clock_;
  ClockSyncService* service_;
  FabricService* fabric_;
  const KubeAgentOptions options_;
  GpuReportSource gpu_;
  std::unique_ptr<PeerDiscovery> discovery_;
  FabricHealthReporter reporter_;
  kube::EventRecorder events_;
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
