// Agent: the node agent as `lockstep-agent run` runs it, built by
// BuildAgent() on ports: the binary hands it real adapters (UDP sockets,
// netlink, adjtimex, the key file, CurlKubeApi, SystemClock), tests hand it
// fakes and a FakeClock. It owns the services and how they are driven:
//
//   clock sync    ClockSyncService on the probe transport (clockSync.enabled)
//   host clock    HostClockDiscipline after each window (disciplineHostClock)
//   fabric        FabricAgent, its prober thread (agent.yaml fabric.rails)
//   Kubernetes    KubeAgent: peer discovery, FabricHealth reports (kube_api)
//   keys          the probe key source, checked every second; a new key goes
//                 to both codecs (clock sync and fabric)
//   GPU health    GpuMonitor on the GPU source (NVML in the binary; agent.yaml
//                 gpu), on its own thread: status.gpu and GPUHealthy in the
//                 FabricHealth reports, lockstep_gpu_* metrics
//
// The loops. With fabric failover and clock sync, the prober's thread also
// sends and reads the clock-sync probes after each of its wake-ups (one
// wake-up for both; FabricAgent::Start) and the main loop closes the windows
// (the solve), so a slow solve never delays a probe. With clock sync alone
// the main loop runs the service (its sleep is the wait on the probe socket);
// with neither it only drains the socket. The GPU monitor polls on a thread
// of its own (an NVML call can take milliseconds per GPU, and a GPU that
// fell off the bus much longer: no probe waits for it). Every deadline is
// read from the injected Clock: Turn(), ProberTurn() and GpuTurn() are one
// turn of each loop, and tests drive them on a FakeClock without threads
// (Start(Drive::kManual)).
//
// Shutdown (Stop): not ready, the main loop and the GPU loop end, the
// Kubernetes side stops, then the prober; routes stay as they are (working pins keep working, the
// next start adopts them).
//
// Thread-safety: BuildAgent/Start/Stop from one owning thread; ready(),
// RefreshGauges() and TimeSource()'s functions from any thread (HTTP
// handlers); Turn()/ProberTurn()/GpuTurn() from the test that drives a manual
// agent (GpuTurn also runs once inside Start, on the caller's thread).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/agent/runtime/agent_http.h"
#include "lockstep/agent/app/fabric_agent.h"
#include "lockstep/agent/app/host_discipline.h"
#include "lockstep/agent/runtime/clock_sync_service.h"
#include "lockstep/agent/config.h"
#include "lockstep/agent/app/gpu_report.h"
#include "lockstep/agent/gpu/gpu_monitor.h"
#include "lockstep/agent/gpu/gpu_source.h"
#include "lockstep/agent/kube/kube_agent.h"
#include "lockstep/agent/node_signer.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/fabric/fabric_map.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::agent {

// Where the probe key comes from and how it rotates (the probeKeyFile, a
// mounted Secret, in the binary). Thread-compatible: the main loop owns it.
class ProbeKeySource {
 public:
  virtual ~ProbeKeySource() = default;
  // The key now (at start: the one the codecs begin with).
  virtual const ProbeKey& key() const = 0;
  // If the source holds a new valid key, rotates `codec` to it and returns
  // true (key() is then the new one); false if nothing changed. An error
  // leaves the current key in place.
  virtual Result<bool> Reload(PacketCodec& codec) = 0;
};

// What the agent runs with besides agent.yaml: the command line's part.
struct AgentSettings {
  AgentConfig config;  // REQUIRES: ValidateAgentConfig(config).ok()
  uint64_t seed = 1;   // peer selection, probe phases (--seed, else the node name's id)
  // This node's gossip signing key (nodeKeyFile); nullopt: a fresh one.
  std::optional<NodeSigner> signer{};
  // --virtual-clock: the local clock is simulated, so the host clock is never disciplined.
  bool simulated_clock = false;
  // Kubernetes mode (AgentAdapters::kube_api set).
  bool node_address_fallback = true;
  std::string advertise_address{};  // "" = derive
  Nanos report_interval = std::chrono::seconds(10);
  // --fabric-topology: the fabric's map for congestion localisation (empty:
  // each rail's uplink only).
  fabric::FabricMap fabric_topology{};
};

// The ports. References must outlive the agent; the fabric ones it owns.
struct AgentAdapters {
  ProbeTransport* transport = nullptr;    // required: the clock-sync probe socket
  const NodeClock* node_clock = nullptr;  // required
  ProbeKeySource* keys = nullptr;         // required
  HostClock* host_clock = nullptr;        // required with disciplineHostClock
  // Fabric failover (required with fabric.rails): the probe socket, the
  // route actuator, the rails as discovered and this host's address.
  std::unique_ptr<FabricSocket> fabric_socket{};
  std::unique_ptr<RouteActuator> route_actuator{};
  std::vector<RailInfo> rails{};
  uint32_t host_address = 0;
  // Tiered probing's view of the node's TCP connections (probe.trafficAware;
  // the binary: SockDiagTraffic). Null: every peer counts as active.
  std::unique_ptr<TrafficSource> traffic_source{};
  kube::KubeApi* kube_api = nullptr;  // Kubernetes mode; null: standalone (static peers)
  // GPU health (the binary: NvmlGpuSource, which says "no NVIDIA driver"
  // where there is none). Null: no GPU monitor, unless gpu.mode is Required
  // (then a configuration error); ignored with gpu.mode Disabled.
  std::unique_ptr<gpu::GpuSource> gpu_source{};
  // Ground truth of a simulated clock (--virtual-clock; its gauges and the
  // time API's true offset exist only with it).
  std::function<std::optional<GroundTruth>()> truth{};
};

// Pure option builders (beside MakeClockSyncOptions and MakeFabricServiceOptions).
// Whether the host clock is disciplined: asked for, clock sync on, a real clock.
bool DisciplinesHostClock(const AgentSettings& settings);
// The Kubernetes side's options; `bound_port` is the probe socket's,
// `fabric_host_address` "" without fabric failover.
KubeAgentOptions MakeKubeAgentOptions(const AgentSettings& settings, int bound_port,
                                      const std::string& node_public_key, const std::string& fabric_host_address);

class Agent {
 public:
  // kThreads: the agent runs its loops on its own threads (the binary).
  // kManual: the caller turns them with Turn() and ProberTurn() (tests);
  // the Kubernetes side, which has its own thread, is not started.
  enum class Drive { kThreads, kManual };

  // How long a turn of the main loop waits at most (a stop is noticed at once).
  static constexpr Nanos kMaxTurn = std::chrono::milliseconds(200);
  // The probe socket wait of a turn without fabric failover (its sleep).
  static constexpr Nanos kSocketWait = std::chrono::milliseconds(100);
  // The key source is checked this often, not every turn: the clock-sync loop
  // turns ~150 times a second and a stat() each time cost more CPU than the
  // fabric prober's user space (a rotated Secret takes a minute to arrive).
  static constexpr Nanos kKeyCheckEvery = std::chrono::seconds(1);
  // The prober's longest sleep without clock sync.
  static constexpr Nanos kProberMaxWait = std::chrono::milliseconds(50);

  ~Agent();  // Stop()s
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Marks the agent ready (its services are built; the binary's HTTP
  // servers are up), runs `announce` (the binary's start-up log lines: they
  // come before anything the agent's threads log, and a client that reads
  // them finds /readyz ready), then starts the Kubernetes side, the prober
  // (adopting the routes a previous run left) and, with kThreads, the loops'
  // threads. Returns the route adoption's error (logged; the agent runs
  // anyway and the fabric service retries the reconcile).
  Status Start(Drive drive = Drive::kThreads, const std::function<void()>& announce = {});
  // The shutdown order (see above). Idempotent.
  void Stop();

  // One turn of the main loop at the clock's now: the key check when due,
  // then the window close (shared loop), or the clock-sync service's turn
  // waiting up to `socket_wait` on the probe socket. Returns when the next
  // turn is due (now when this one waited on the socket).
  MonoTime Turn(Nanos socket_wait = Nanos(0));
  // One wake-up of the prober (fabric probes, then the clock-sync sends
  // riding on it). REQUIRES: fabric failover.
  void ProberTurn();
  // One turn of the GPU loop: polls the monitor when due (and logs what
  // changed); returns when the next poll is due. REQUIRES: gpu_monitor() != null.
  MonoTime GpuTurn();
  // The prober's longest sleep (the clock-sync interval on the shared loop).
  Nanos prober_max_wait() const { return prober_max_wait_; }

  bool ready() const { return ready_.load(); }
  // Gauges read at scrape time (clock state, ground truth).
  void RefreshGauges();
  // What the time API serves: fabric time (or a FREERUN stand-in without
  // clock sync), ground truth, fabric status.
  TimeApiSource TimeSource() const;

  ClockSyncService* clock_sync() { return clock_sync_.get(); }  // null: clock sync disabled
  FabricAgent* fabric() { return fabric_.get(); }               // null: no fabric.rails
  KubeAgent* kube() { return kube_.get(); }                     // null: standalone
  gpu::GpuMonitor* gpu_monitor() { return gpu_.get(); }         // null: no GPU source or gpu.mode Disabled
  const ClockSyncOptions& clock_sync_options() const { return clock_sync_options_; }
  const NodeSigner& signer() const { return *settings_.signer; }
  const PacketCodec& codec() const { return codec_; }
  // null unless the host clock is disciplined.
  const HostClockDiscipline* host_discipline() const { return discipline_ ? &*discipline_ : nullptr; }

 private:
  friend Result<std::unique_ptr<Agent>> BuildAgent(AgentSettings, AgentAdapters, Clock&, metrics::Registry&);
  Agent(AgentSettings settings, AgentAdapters adapters, Clock& clock, metrics::Registry& registry);
  Status Build();  // the services; errors are configuration errors
  void OnWindow();
  void CheckKeys();
  void Run();     // the main loop's thread
  void RunGpu();  // the GPU loop's thread

  AgentSettings settings_;
  AgentAdapters adapters_;
  Clock& clock_;
  metrics::Registry& registry_;
  PacketCodec codec_;
  ClockSyncOptions clock_sync_options_;
  std::unique_ptr<ClockSyncService> clock_sync_;
  std::optional<HostClockDiscipline> discipline_;  // main loop only (window callback)
  metrics::Family& discipline_active_;
  metrics::Family* true_offset_ = nullptr;  // with ground truth only
  metrics::Family* true_drift_ = nullptr;
  std::unique_ptr<FabricAgent> fabric_;
  std::unique_ptr<gpu::GpuMonitor> gpu_;  // after adapters_: reads its gpu_source
  std::optional<GpuLog> gpu_log_;          // the GPU loop only
  std::unique_ptr<KubeAgent> kube_;
  bool shared_loop_ = false;  // fabric failover and clock sync: the prober carries the sends
  Nanos prober_max_wait_ = kProberMaxWait;
  MonoTime next_key_check_{};
  TransportEvents idle_;  // drained without clock sync

  std::atomic<bool> ready_{false};
  bool started_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::thread loop_;
  std::thread gpu_loop_;
};

// Builds the agent: the services from `settings` on `adapters`, the metrics
// in `registry`. REQUIRES: clock and registry outlive the agent. Errors are
// configuration errors (a fabric section without peers, a missing adapter,
// a signing key that cannot be made) and say what to change.
Result<std::unique_ptr<Agent>> BuildAgent(AgentSettings settings, AgentAdapters adapters, Clock& clock,
                                          metrics::Registry& registry);

}  // namespace lockstep::agent
