#include "lockstep/agent/kube/kube_agent.h"

#include <cmath>
#include <limits>

#include "lockstep/common/log.h"

namespace lockstep::agent {

std::chrono::seconds StaleAfter(Nanos report_interval, Nanos heartbeat) {
  return std::chrono::ceil<std::chrono::seconds>(3 * std::max(report_interval, heartbeat));
}

KubeAgent::KubeAgent(kube::KubeApi& api, Clock& clock, ClockSyncService* service, KubeAgentOptions options,
                     metrics::Registry& registry)
    : clock_(clock),
      service_(service),
      options_(std::move(options)),
      discovery_(std::make_unique<PeerDiscovery>(
          api, clock,
          PeerDiscoveryOptions{
              .directory = {.self = options_.node_name,
                            .policy = options_.policy,
                            .probe_port = options_.policy_probe_port,
                            .node_address_fallback = options_.node_address_fallback,
                            .stale_after = StaleAfter(options_.report_interval, options_.heartbeat)},
              .peers_per_node = options_.peers_per_node,
              .seed = options_.seed,
              .informer_seed = options_.seed},
          [this](const PeerSet& set) {
            if (service_) service_->SetPeers(set.selected, set.known);
          },
          registry)),
      reporter_(api, clock, [this] { return Snapshot(); },
                ReporterOptions{.node_name = options_.node_name,
                                .interval = options_.report_interval,
                                .heartbeat = options_.heartbeat,
                                .seed = options_.seed},
                registry) {
  if (!options_.advertise_address.empty()) {
    advertise_ = options_.advertise_address;
  } else if (options_.bind_address != "0.0.0.0") {
    advertise_ = options_.bind_address;
  }
}

KubeAgent::~KubeAgent() { Stop(); }

void KubeAgent::Start() {
  if (service_) discovery_->Start();
  thread_ = std::thread([this] { Run(); });
}

void KubeAgent::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  discovery_->Stop();
}

AgentReport KubeAgent::Snapshot() {
  AgentReport r;
  r.node_name = options_.node_name;
  if (!options_.node_public_key.empty()) r.node_public_key = options_.node_public_key;
  if (!advertise_) {
    advertise_ = discovery_->SelfNodeAddress();
    if (advertise_) log::Info("advertising the probe address of our Node", {{"address", *advertise_}});
  }
  if (advertise_) r.probe_addresses.push_back(*advertise_ + ":" + std::to_string(options_.bound_port));
  // One rail per bind address; link monitoring is future work, so all are up.
  r.rails_total = 1;
  r.rails_up = 1;
  if (!service_) {
    r.clock.enabled = false;
    return r;
  }
  ClockStatus s = service_->Status();
  r.clock.state = s.reading.state;
  r.clock.has_model = s.model.valid;
  r.clock.offset_ns = std::llround(s.reading.offset_ns);
  r.clock.drift_ppb = s.model.valid ? std::llround(s.model.drift * 1e9) : 0;
  if (s.reading.error_bound_ns != std::numeric_limits<int64_t>::max()) r.clock.error_bound_ns = s.reading.error_bound_ns;
  r.clock.peers = s.estimate.peers;
  return r;
}

void KubeAgent::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    if (service_) discovery_->Tick();
    (void)reporter_.Tick();
    lock.lock();
    cv_.wait_for(lock, options_.tick, [this] { return stop_; });
  }
}

}  // namespace lockstep::agent
