#include "lockstep/agent/app/agent.h"

#include <algorithm>
#include <limits>

#include "lockstep/agent/app/agent_plan.h"
#include "lockstep/agent/gpu/early_warning.h"
#include "lockstep/common/log.h"

namespace lockstep::agent {

bool DisciplinesHostClock(const AgentSettings& settings) {
  return settings.config.clock_sync.discipline_host_clock && settings.config.clock_sync.enabled &&
         !settings.simulated_clock;
}

KubeAgentOptions MakeKubeAgentOptions(const AgentSettings& settings, int bound_port,
                                      const std::string& node_public_key, const std::string& fabric_host_address) {
  const AgentConfig& config = settings.config;
  KubeAgentOptions ko;
  ko.node_name = config.node_name;
  ko.policy = config.policy;
  ko.policy_probe_port = config.probe.port;
  ko.peers_per_node = config.probe.peers_per_node;
  ko.seed = settings.seed;
  ko.node_address_fallback = settings.node_address_fallback;
  ko.advertise_address = settings.advertise_address;
  ko.bind_address = config.bind_address;
  ko.bound_port = bound_port;
  ko.node_public_key = node_public_key;
  ko.report_interval = settings.report_interval;
  ko.fabric_host_address = fabric_host_address;
  return ko;
}

Agent::Agent(AgentSettings settings, AgentAdapters adapters, Clock& clock, metrics::Registry& registry)
    : settings_(std::move(settings)),
      adapters_(std::move(adapters)),
      clock_(clock),
      registry_(registry),
      codec_(adapters_.keys->key()),
      discipline_active_(registry.Gauge("lockstep_clock_host_discipline_active",
                                        "1 while the agent disciplines the host clock (CAP_SYS_TIME)")) {}

Agent::~Agent() { Stop(); }

Status Agent::Build() {
  const AgentConfig& config = settings_.config;
  if (!settings_.signer) {
    auto signer = NodeSigner::Generate();
    if (!signer.ok()) return signer.error();
    settings_.signer = std::move(*signer);
  }
  auto known = ResolvePeers(config);
  if (!known.ok()) return known.error();
  clock_sync_options_ = MakeClockSyncOptions(config, *known, settings_.seed);
  clock_sync_options_.signer = &*settings_.signer;
  if (config.clock_sync.enabled) {
    clock_sync_ = std::make_unique<ClockSyncService>(*adapters_.transport, *adapters_.node_clock, clock_, codec_,
                                                     clock_sync_options_, registry_);
  }

  // Host clock discipline (opt-in).
  if (config.clock_sync.discipline_host_clock && clock_sync_ && settings_.simulated_clock) {
    log::Warn("disciplineHostClock is ignored with --virtual-clock (the local clock is simulated)");
  }
  const bool discipline = DisciplinesHostClock(settings_);
  discipline_active_.Set(discipline ? 1 : 0);
  if (discipline) {
    if (adapters_.host_clock == nullptr) return InvalidArgument("disciplineHostClock needs a host clock adapter");
    discipline_.emplace(*adapters_.host_clock, true);
    clock_sync_->OnWindow([this](const ClockEstimate&, const TimeReading&) { OnWindow(); });
  }

  // Fabric failover (its own thread, carrying the clock-sync sends).
  const bool kubernetes = adapters_.kube_api != nullptr;
  if (!config.fabric.rails.empty()) {
    if (!adapters_.fabric_socket || !adapters_.route_actuator) {
      return InvalidArgument("fabric.rails is set but no fabric socket or route actuator was given");
    }
    auto options =
        MakeFabricServiceOptions(config, adapters_.rails, adapters_.host_address, settings_.seed, kubernetes);
    if (!options.ok()) return options.error();
    options->topology = settings_.fabric_topology;
    FabricService::FabricNow fabric_now;
    if (const ClockSyncService* sync = clock_sync_.get()) {
      fabric_now = [sync]() -> std::optional<int64_t> {
        TimeReading r = sync->Read();
        if (r.state != ClockSyncState::kLocked) return std::nullopt;
        return r.now_ns;
      };
    }
    fabric_ = std::make_unique<FabricAgent>(std::move(adapters_.fabric_socket), std::move(adapters_.route_actuator),
                                            adapters_.keys->key(), clock_, std::move(fabric_now),
                                            std::move(*options), registry_);
    if (adapters_.traffic_source) fabric_->service().SetTrafficSource(std::move(adapters_.traffic_source));
  }
  shared_loop_ = fabric_ && clock_sync_;
  if (shared_loop_) prober_max_wait_ = clock_sync_options_.interval;

  // GPU health: the monitor on the GPU source (its loop: RunGpu).
  const api::GpuSpec& gpu_spec = config.gpu;
  const bool gpu_required = gpu_spec.mode == api::kGpuModeRequired;
  if (gpu_spec.mode != api::kGpuModeDisabled) {
    if (adapters_.gpu_source) {
      gpu_ = std::make_unique<gpu::GpuMonitor>(
          clock_, *adapters_.gpu_source, registry_,
          gpu::GpuMonitorOptions{.interval = std::chrono::seconds(gpu_spec.poll_interval_seconds),
                                 .policy = gpu::PolicyFromGpuSpec(gpu_spec.early_warning)});
      gpu_log_.emplace(gpu_required);
    } else if (gpu_required) {
      return InvalidArgument("gpu.mode is Required but no GPU source (NVML) was given");
    }
  }
  GpuReportSource gpu_report;
  if (gpu_) {
    gpu_report = [monitor = gpu_.get(), gpu_required]() -> std::optional<GpuReport> {
      return GpuReportOf(monitor->State(), gpu_required);
    };
  }

  // Kubernetes: peer discovery and FabricHealth reports.
  if (kubernetes) {
    FabricService* fabric_service = fabric_ ? &fabric_->service() : nullptr;
    std::string host_address = fabric_ ? FormatIpv4(fabric_->options().setup.host_address) : "";
    kube_ = std::make_unique<KubeAgent>(
        *adapters_.kube_api, clock_, clock_sync_.get(), fabric_service,
        MakeKubeAgentOptions(settings_, adapters_.transport->local().port, signer().public_key().base64(),
                             host_address),
        registry_, std::move(gpu_report));
  }

  // Ground truth is benchmark-only: its gauges exist only with a simulated clock.
  if (adapters_.truth) {
    true_offset_ = &registry_.Gauge("lockstep_virtual_clock_true_offset_ns",
                                    "Ground truth with --virtual-clock: local clock minus the shared base clock");
    true_drift_ = &registry_.Gauge("lockstep_virtual_clock_true_drift_ppb",
                                   "Ground truth with --virtual-clock: frequency error of the local clock");
  }
  return Status::Ok();
}

void Agent::OnWindow() {
  auto outcome = discipline_->OnWindow(clock_sync_->Read());
  if (outcome == HostClockDiscipline::Outcome::kFailed) {
    log::Error("host clock discipline disabled; still serving fabric time", {{"error", discipline_->error()}});
    discipline_active_.Set(0);
  } else if (outcome == HostClockDiscipline::Outcome::kRefused) {
    log::Warn("host clock step refused: the error bound does not justify it; waiting for a tighter reading");
  }
}

Status Agent::Start(Drive drive, const std::function<void()>& announce) {
  if (started_) return Status::Ok();
  started_ = true;
  ready_ = true;
  if (announce) announce();
  next_key_check_ = clock_.Monotonic();
  // The first GPU read before the first report, so that the report never
  // carries "not read yet".
  if (gpu_) (void)GpuTurn();
  if (kube_ && drive == Drive::kThreads) kube_->Start();
  Status adopted = Status::Ok();
  if (fabric_) {
    std::function<void()> rider;
    if (shared_loop_) rider = [sync = clock_sync_.get()] { sync->Exchange(); };
    adopted = drive == Drive::kThreads ? fabric_->Start(std::move(rider), prober_max_wait_)
                                       : fabric_->StartManual(std::move(rider));
    if (!adopted.ok()) {
      log::Warn("fabric failover: cannot list owned routes; retrying", {{"error", adopted.error().message}});
    }
    if (drive == Drive::kThreads && !fabric_->realtime()) {
      log::Warn("fabric prober runs at normal priority (no CAP_SYS_NICE): on busy cores probes may be late and "
                "paths seem to flap");
    }
  }
  if (drive == Drive::kThreads) loop_ = std::thread([this] { Run(); });
  if (gpu_ && drive == Drive::kThreads) gpu_loop_ = std::thread([this] { RunGpu(); });
  return adopted;
}

void Agent::Stop() {
  if (!started_) return;
  started_ = false;
  ready_ = false;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  if (gpu_loop_.joinable()) gpu_loop_.join();
  if (kube_) kube_->Stop();
  if (fabric_) {
    fabric_->Stop();
    log::Info("fabric failover stopped; pinned routes stay in place for the next start");
  }
}

void Agent::CheckKeys() {
  auto rotated = adapters_.keys->Reload(codec_);
  if (!rotated.ok()) {
    log::Warn("probe key file not reloaded; keeping the current key", {{"error", rotated.error().message}});
    return;
  }
  if (!*rotated) return;
  log::Info("probe key rotated; the previous key is still accepted", {});
  if (fabric_) fabric_->codec().Rotate(adapters_.keys->key());
}

MonoTime Agent::Turn(Nanos socket_wait) {
  const MonoTime now = clock_.Monotonic();
  if (now >= next_key_check_) {
    next_key_check_ = now + kKeyCheckEvery;
    CheckKeys();
  }
  if (shared_loop_) {
    // Woken for the window, the key check, or to notice a stop.
    clock_sync_->CloseWindowIfDue();
    return std::min({clock_sync_->NextWindow(), clock_.Monotonic() + kMaxTurn, next_key_check_});
  }
  if (clock_sync_) {
    clock_sync_->RunOnce(socket_wait);
  } else {
    idle_.clear();
    (void)adapters_.transport->Poll(socket_wait, idle_);  // nothing to do but wait
  }
  return clock_.Monotonic();
}

void Agent::ProberTurn() { fabric_->RunOnce(prober_max_wait_); }

MonoTime Agent::GpuTurn() {
  if (gpu_->Due()) {
    for (const GpuLogLine& line : gpu_log_->Next(gpu_->Poll())) {
      std::vector<log::Field> fields;
      for (const auto& [k, v] : line.fields) fields.emplace_back(k, v);
      const log::Level level = line.level == GpuLogLine::Level::kError  ? log::Level::kError
                               : line.level == GpuLogLine::Level::kWarn ? log::Level::kWarn
                                                                        : log::Level::kInfo;
      log::Write(level, line.message, fields);
    }
  }
  return gpu_->NextPoll();
}

void Agent::RunGpu() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const MonoTime next = GpuTurn();
    lock.lock();
    const Nanos wait = next - clock_.Monotonic();
    if (wait > Nanos(0)) cv_.wait_for(lock, wait, [this] { return stopping_; });
  }
}

void Agent::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const MonoTime next = Turn(kSocketWait);
    lock.lock();
    const Nanos wait = next - clock_.Monotonic();
    if (wait > Nanos(0)) cv_.wait_for(lock, wait, [this] { return stopping_; });
  }
}

void Agent::RefreshGauges() {
  if (clock_sync_) clock_sync_->RefreshGauges();
  if (adapters_.truth) {
    if (auto t = adapters_.truth()) {
      true_offset_->Set(static_cast<double>(t->true_offset_ns));
      true_drift_->Set(t->true_drift_ppb);
    }
  }
}

TimeApiSource Agent::TimeSource() const {
  TimeApiSource source;
  source.node_name = settings_.config.node_name;
  source.truth = adapters_.truth;
  if (const ClockSyncService* sync = clock_sync_.get()) {
    source.status = [sync](std::optional<int64_t> local) { return sync->Status(local); };
  } else {
    source.status = [node_clock = adapters_.node_clock](std::optional<int64_t> local) {
      ClockStatus s;  // clock sync disabled: FREERUN on the local clock
      s.reading.local_ns = s.reading.now_ns = local ? *local : node_clock->NowNs();
      s.reading.error_bound_ns = s.reading.latest_ns = std::numeric_limits<int64_t>::max();
      s.reading.earliest_ns = std::numeric_limits<int64_t>::min();
      return s;
    };
  }
  if (fabric_) source.fabric = [f = fabric_.get()] { return f->StatusJson(); };
  return source;
}

Result<std::unique_ptr<Agent>> BuildAgent(AgentSettings settings, AgentAdapters adapters, Clock& clock,
                                          metrics::Registry& registry) {
  if (adapters.transport == nullptr || adapters.node_clock == nullptr || adapters.keys == nullptr) {
    return InvalidArgument("BuildAgent: the probe transport, the node clock and the key source are required");
  }
  std::unique_ptr<Agent> agent(new Agent(std::move(settings), std::move(adapters), clock, registry));
  if (Status s = agent->Build(); !s.ok()) return s.error();
  return agent;
}

}  // namespace lockstep::agent
