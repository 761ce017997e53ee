#include "lockstep/agent/kube/kube_agent.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "lockstep/common/log.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::agent {

std::chrono::seconds StaleAfter(Nanos report_interval, Nanos heartbeat) {
  return std::chrono::ceil<std::chrono::seconds>(3 * std::max(report_interval, heartbeat));
}

FabricSnapshot FabricSnapshotOf(const FabricHealthView& view, const std::string& host_address) {
  FabricSnapshot f;
  f.host_address = host_address;
  for (const FabricRailHealth& r : view.rails) {
    f.rails.push_back({.name = r.name,
                       .paths = r.paths,
                       .usable = r.usable,
                       .down = r.down,
                       .failed_peers = r.failed_peers,
                       .flaps_last_hour = r.flaps_last_hour,
                       .alerting = r.alerting});
  }
  f.flaps_last_hour = view.flaps_last_hour;
  f.prober_stalled = view.prober_stalled;
  const FabricLatencyView& l = view.latency;
  f.latency = {.verdict = fabric::ToString(l.verdict),
               .with_sla = l.with_sla,
               .judged = l.judged,
               .breaches = l.breaches,
               .min_samples = l.min_samples,
               .worst_peer = l.worst_peer,
               .worst_rail = l.worst_rail,
               .worst_p99_ns = l.worst_p99.count(),
               .worst_sla_ns = l.worst_sla.count()};
  f.congestion = {
      .judged = view.congestion.judged, .links = view.congestion.links, .bad_paths = view.congestion.bad_paths};
  if (view.last_flap) f.last_flap_time = kube::FormatRfc3339(*view.last_flap);
  return f;
}

namespace {

// The Events' involved object: our FabricHealth as last read, or a minimal
// reference to FabricHealth/<node> before the first read.
kube::Json InvolvedHealth(const std::optional<kube::Json>& health, const std::string& node_name) {
  return health ? *health
                : kube::Json{{"apiVersion", "lockstep.dev/v1alpha1"},
                             {"kind", "FabricHealth"},
                             {"metadata", {{"name", node_name}}}};
}

}  // namespace

void RecordFlapAlert(kube::EventRecorder& events, const std::optional<kube::Json>& health, const std::string& node_name,
                     const FabricFlapAlert& alert) {
  const kube::Json involved = InvolvedHealth(health, node_name);
  events.Warning(involved, kFlapAlertReason,
                 "fabric rail " + alert.rail + " of node " + node_name + " flapped " +
                     std::to_string(alert.flaps_last_hour) + " times in the last hour, above the policy's " +
                     "flapAlertPerHour (" + std::to_string(alert.threshold) +
                     "): check its cable, transceiver and switch port (lockstep-agent fabric status shows its paths)");
}

void RecordLatencyBreach(kube::EventRecorder& events, const std::optional<kube::Json>& health,
                         const std::string& node_name, const FabricLatencyBreach& b) {
  const kube::Json involved = InvolvedHealth(health, node_name);
  auto us = [](Nanos d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f us", std::chrono::duration<double, std::micro>(d).count());
    return std::string(buf);
  };
  events.Warning(involved, kLatencyBreachReason,
                 "fabric path " + b.rail + " -> " + b.peer + " of node " + node_name + ": one-way delay p99 " +
                     us(b.owd_p99) + " (over " + std::to_string(b.samples) + " delays) is above its latency SLA of " +
                     us(b.sla) + " (FabricPolicy spec.latency); lockstep-agent fabric status shows its paths");
}

void RecordCongestion(kube::EventRecorder& events, const std::optional<kube::Json>& health,
                      const std::string& node_name, const CongestionFinding& f) {
  const kube::Json involved = InvolvedHealth(health, node_name);
  if (f.kind == CongestionFinding::Kind::kLinkCongested) {
    std::string links;
    for (const std::string& l : f.links) links += (links.empty() ? "" : ", ") + l;
    events.Warning(involved, kLinkCongestedReason,
                   "fabric link " + links + " congested, as seen from node " + node_name + ": the one-way delays of " +
                       std::to_string(f.rising) + " of the " + std::to_string(f.paths) +
                       " paths crossing it rose together (lockstep-agent fabric status, \"congestion\")");
    return;
  }
  auto us = [](Nanos d) { return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count()); };
  events.Warning(involved, kPathDelayRoseReason,
                 "fabric path " + f.path + " of node " + node_name + ": one-way delay p50 " + us(f.p50) +
                     " us against its baseline of " + us(f.base_p50) +
                     " us, rising alone (no congested link explains it: the path or the peer's end)");
}

KubeAgent::KubeAgent(kube::KubeApi& api, Clock& clock, ClockSyncService* service, FabricService* fabric,
                     KubeAgentOptions options, metrics::Registry& registry, GpuReportSource gpu)
    : clock_(clock),
      service_(service),
      fabric_(fabric),
      options_(std::move(options)),
      gpu_(std::move(gpu)),
      discovery_(std::make_unique<PeerDiscovery>(
          api, clock,
          PeerDiscoveryOptions{.directory = {.self = options_.node_name,
                                             .policy = options_.policy,
                                             .probe_port = options_.policy_probe_port,
                                             .node_address_fallback = options_.node_address_fallback,
                                             .stale_after = StaleAfter(options_.report_interval, options_.heartbeat)},
                               .peers_per_node = options_.peers_per_node,
                               .seed = options_.seed,
                               .informer_seed = options_.seed},
          [this](const PeerSet& set) {
            if (service_) service_->SetPeers(set.selected, set.known);
            if (fabric_) {
              FabricPeerSet f = FabricPeersOf(set);
              fabric_->SetPeers(std::move(f.probed), std::move(f.known));
            }
          },
          registry)),
      reporter_(
          api, clock, [this] { return Snapshot(); },
          ReporterOptions{.node_name = options_.node_name,
                          .interval = options_.report_interval,
                          .heartbeat = options_.heartbeat,
                          .seed = options_.seed},
          registry),
      events_(api, clock,
              kube::EventRecorderOptions{
                  .component = "lockstep-agent", .host = options_.node_name, .registry = &registry}) {
  if (!options_.advertise_address.empty()) {
    advertise_ = options_.advertise_address;
  } else if (options_.bind_address != "0.0.0.0") {
    advertise_ = options_.bind_address;
  }
}

KubeAgent::~KubeAgent() { Stop(); }

void KubeAgent::Start() {
  if (service_ || fabric_) discovery_->Start();
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
  if (fabric_) {
    r.fabric = FabricSnapshotOf(fabric_->Health(), options_.fabric_host_address);
  } else {
    // Clock sync only: one rail per bind address, not monitored (reported up).
    r.rails_total = 1;
    r.rails_up = 1;
  }
  if (gpu_) r.gpu = gpu_();
  if (!service_) {
    r.clock.enabled = false;
    return r;
  }
  ClockStatus s = service_->Status();
  r.clock.state = s.reading.state;
  r.clock.has_model = s.model.valid;
  r.clock.offset_ns = std::llround(s.reading.offset_ns);
  r.clock.drift_ppb = s.model.valid ? std::llround(s.model.drift * 1e9) : 0;
  if (s.reading.error_bound_ns != std::numeric_limits<int64_t>::max())
    r.clock.error_bound_ns = s.reading.error_bound_ns;
  r.clock.peers = s.estimate.peers;
  return r;
}

void KubeAgent::RaiseFlapAlerts() {
  if (!fabric_) return;
  for (const FabricFlapAlert& a : fabric_->TakeFlapAlerts()) {
    RecordFlapAlert(events_, reporter_.current(), options_.node_name, a);
  }
  for (const FabricLatencyBreach& b : fabric_->TakeLatencyBreaches()) {
    RecordLatencyBreach(events_, reporter_.current(), options_.node_name, b);
  }
  for (const CongestionFinding& f : fabric_->TakeCongestionFindings()) {
    RecordCongestion(events_, reporter_.current(), options_.node_name, f);
  }
}

void KubeAgent::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    if (service_ || fabric_) discovery_->Tick();
    (void)reporter_.Tick();
    RaiseFlapAlerts();
    lock.lock();
    cv_.wait_for(lock, options_.tick, [this] { return stop_; });
  }
}

}  // namespace lockstep::agent
