#include "lockstep/agent/runtime/fabric_publisher.h"

#include <algorithm>
#include <utility>

#include "lockstep/common/log.h"

namespace lockstep::agent {
namespace {

using fabric::PathState;

constexpr PathState kStates[] = {PathState::kUnknown, PathState::kUp, PathState::kSuspect, PathState::kDown,
                                 PathState::kRecovering};
constexpr auto kChangePublishGap = std::chrono::milliseconds(20);  // bounds publishing in a flap storm
constexpr auto kChangePublishGapPerPath = std::chrono::milliseconds(1);
// Transition lines other than into down: at most this many a second, the
// rest summed up in one line (a storm at 128 paths made ~1,000 a second,
// each a write on the prober's thread).
constexpr int kTransitionLogs = 32;
constexpr auto kTransitionLogWindow = std::chrono::seconds(1);
constexpr auto kStallLogEvery = std::chrono::seconds(10);

double Seconds(std::optional<Nanos> d) { return d ? std::chrono::duration<double>(*d).count() : -1.0; }
nlohmann::json NsOrNull(std::optional<Nanos> d) {
  return d ? nlohmann::json(static_cast<int64_t>(d->count())) : nlohmann::json(nullptr);
}

}  // namespace

FabricPublisher::FabricPublisher(const std::string& self_name, const FabricSetup& setup,
                                 const fabric::FabricOptions& fabric, std::chrono::nanoseconds publish_every,
                                 const Clock& clock, metrics::Registry& registry, fabric::LatencySlaOptions latency,
                                 fabric::FabricMap topology, fabric::CongestionOptions congestion)
    : self_name_(self_name),
      setup_(setup),
      fabric_(fabric),
      publish_every_(publish_every),
      clock_(clock),
      latency_(std::move(latency)),
      state_(registry.Gauge("lockstep_fabric_path_state",
                            "1 for the state each path (local rail -> peer) is in, 0 for the others",
                            {"peer", "rail", "state"})),
      loss_(registry.Gauge("lockstep_fabric_path_loss_ratio", "Probe loss of the path over the stats window",
                           {"peer", "rail"})),
      owd_(registry.Gauge("lockstep_fabric_path_one_way_delay_seconds",
                          "One-way delay of the path from fabric time (only while clock sync is LOCKED)",
                          {"peer", "rail", "quantile"})),
      rtt_(registry.Gauge("lockstep_fabric_path_rtt_seconds", "Probe round trip of the path",
                          {"peer", "rail", "quantile"})),
      sent_(registry.Counter("lockstep_fabric_probes_sent_total", "Path probes sent", {"peer", "rail"})),
      replies_(registry.Counter(
          "lockstep_fabric_probe_replies_total",
          "Path probes the peer acknowledged in time (symmetric probing: acks ride on its probes)", {"peer", "rail"})),
      misses_(registry.Counter("lockstep_fabric_probe_misses_total", "Path probes without an ack in time",
                               {"peer", "rail"})),
      peer_rail_(registry.Gauge("lockstep_fabric_peer_rail",
                                "The rail this host's traffic to the peer is pinned to; -1: static ECMP (no pin)",
                                {"peer"})),
      flaps_window_(registry.Gauge("lockstep_fabric_flaps_last_hour",
                                   "Rail flaps (every path of the rail failed) in the last hour", {"rail"})),
      flaps_total_(registry.Counter("lockstep_fabric_flaps_total",
                                    "Rail flaps: every path of the rail failed after it delivered", {"rail"})),
      alerts_(registry.Counter("lockstep_fabric_flap_alerts_total",
                               "Flap alerts: the rail's flaps in the last hour rose above flapAlertPerHour", {"rail"})),
      rail_down_(registry.Gauge("lockstep_fabric_rail_down", "1 while every path of the rail has failed", {"rail"})),
      answered_(registry.Counter("lockstep_fabric_probes_answered_total",
                                 "Ack-only packets sent: to peers that probe a path we do not (our probes carry the "
                                 "other acks; probes sent + these = fabric packets sent)",
                                 {"peer"})),
      stalls_(registry.Counter("lockstep_fabric_prober_stalls_total",
                               "Wake-ups of the prober later than the urgent timeout past their due time (a stalled "
                               "node: within the excuse budget, probe timeouts that fell in the stall were restarted, "
                               "not counted as misses)")),
      stalls_judged_(registry.Counter("lockstep_fabric_prober_stalls_judged_total",
                                      "Prober stalls beyond the excuse budget (stallExcuses per stall window): "
                                      "judged, their probe timeouts counted as misses")),
      prober_stalled_(registry.Gauge("lockstep_fabric_prober_stalled",
                                     "1 while a stall was judged within the last stall window: the prober is late "
                                     "so often that stalls are no longer excused (FabricHealth ProberStalled)")),
      owd_sla_(registry.Gauge("lockstep_fabric_path_owd_sla_seconds",
                              "The latency SLA in force on the path: the one-way delay p99 it should stay at or "
                              "below (FabricPolicy spec.latency); only paths with an SLA",
                              {"peer", "rail"})),
      latency_breach_(registry.Gauge("lockstep_fabric_path_latency_breach",
                                     "1 while the path's one-way delay p99 breaks its latency SLA (entered above "
                                     "the SLA, cleared below 90% of it; judged only while clock sync is LOCKED and "
                                     "with minSamples delays), else 0",
                                     {"peer", "rail"})),
      congestion_(self_name, setup, std::move(topology), congestion, registry) {
  stalls_.Inc({}, 0);
  stalls_judged_.Inc({}, 0);
  prober_stalled_.Set(0);
  for (const RailInfo& r : setup_.rails) {
    flaps_total_.Inc({r.name}, 0);
    alerts_.Inc({r.name}, 0);
  }
}

std::string FabricPublisher::RailName(int rail) const {
  return rail >= 0 && rail < static_cast<int>(setup_.rails.size()) ? setup_.rails[rail].name : std::to_string(rail);
}

void FabricPublisher::OnDecisions(const fabric::Decisions& d) {
  if (!d.empty()) changed_ = true;  // published at once (see Due)
  for (const fabric::Transition& t : d.transitions) {
    if (t.at >= transition_log_window_ + kTransitionLogWindow) {
      if (transitions_unlogged_ > 0) {
        log::Info("fabric path transitions not logged one by one (more than 32 a second; every one into down is)",
                  {{"transitions", std::to_string(transitions_unlogged_)}});
      }
      transition_log_window_ = t.at;
      transition_logs_ = 0;
      transitions_unlogged_ = 0;
    }
    // Every path that goes down is logged (operators and the benchmarks
    // count them); the rest of a storm's transitions are summed up.
    if (t.to != PathState::kDown && transition_logs_ >= kTransitionLogs) {
      ++transitions_unlogged_;
      continue;
    }
    if (t.to != PathState::kDown) ++transition_logs_;
    log::Write(t.to == PathState::kDown ? log::Level::kWarn : log::Level::kInfo, "fabric path state changed",
               {{"path", fabric::ToString(t.path)},
                {"rail", RailName(t.path.rail)},
                {"from", fabric::ToString(t.from)},
                {"to", fabric::ToString(t.to)},
                {"flap", t.flap ? "true" : "false"}});
  }
  for (const fabric::RailFlap& f : d.flaps) {
    const std::string rail = RailName(f.rail);
    flaps_total_.Inc({rail});
    last_flap_wall_ = clock_.Wall();
    log::Warn("fabric rail flapped: every path of the rail failed", {{"rail", rail}});
  }
  for (const fabric::FlapAlert& a : d.alerts) {
    const std::string rail = RailName(a.rail);
    alerts_.Inc({rail});
    {
      std::lock_guard lock(mu_);
      if (alerts_raised_.size() < 1024)
        alerts_raised_.push_back({rail, a.flaps_in_window, fabric_.flap_alert_per_hour});
    }
    log::Warn("fabric flap alert: a rail flaps more than flapAlertPerHour",
              {{"rail", rail},
               {"flaps_last_hour", std::to_string(a.flaps_in_window)},
               {"threshold", std::to_string(fabric_.flap_alert_per_hour)}});
  }
}

void FabricPublisher::NoteStall(MonoTime now, std::chrono::nanoseconds stalled, fabric::Stall verdict) {
  stalls_.Inc();
  if (verdict == fabric::Stall::kJudged) {
    stalls_judged_.Inc();
    ++judged_unlogged_;
    if (!stalled_published_) changed_ = true;  // the ProberStalled condition: published at once
  }
  worst_stall_ = std::max(worst_stall_, stalled);
  ++stalls_unlogged_;
  if (now < next_stall_log_) return;
  log::Warn(judged_unlogged_ > 0
                ? "fabric prober stalls persistently: beyond the excuse budget its stalls are judged, so paths can "
                  "be declared down by the stalls themselves (check CPU steal and load, the agent's CPU limit and "
                  "SCHED_FIFO)"
                : "fabric prober stalled: woke late, so probe timeouts in the stall were restarted (is the node "
                  "overloaded?)",
            {{"stalls", std::to_string(stalls_unlogged_)},
             {"judged", std::to_string(judged_unlogged_)},
             {"longest_ms", std::to_string(std::chrono::duration<double, std::milli>(worst_stall_).count())}});
  next_stall_log_ = now + kStallLogEvery;
  worst_stall_ = {};
  stalls_unlogged_ = 0;
  judged_unlogged_ = 0;
}

std::vector<std::string> FabricPublisher::ForgetPeersExcept(const std::vector<std::string>& names) {
  std::vector<std::string> gone;
  for (auto it = published_totals_.begin(); it != published_totals_.end();) {
    if (std::find(names.begin(), names.end(), it->first.peer) != names.end()) {
      ++it;
      continue;
    }
    const fabric::PathKey& k = it->first;
    const std::string rail = RailName(k.rail);
    for (PathState st : kStates) state_.Remove({k.peer, rail, fabric::ToString(st)});
    loss_.Remove({k.peer, rail});
    for (const char* q : {"0.5", "0.99"}) {
      owd_.Remove({k.peer, rail, q});
      rtt_.Remove({k.peer, rail, q});
    }
    sent_.Remove({k.peer, rail});
    owd_sla_.Remove({k.peer, rail});
    latency_breach_.Remove({k.peer, rail});
    replies_.Remove({k.peer, rail});
    misses_.Remove({k.peer, rail});
    if (std::find(gone.begin(), gone.end(), k.peer) == gone.end()) gone.push_back(k.peer);
    it = published_totals_.erase(it);
  }
  std::sort(gone.begin(), gone.end());
  for (const std::string& peer : gone) peer_rail_.Remove({peer});
  return gone;
}

std::chrono::nanoseconds FabricPublisher::ChangeGap() const {
  return std::max<std::chrono::nanoseconds>(kChangePublishGap,
                                            kChangePublishGapPerPath * static_cast<int64_t>(paths_));
}

bool FabricPublisher::Due(MonoTime now) const {
  return now >= next_publish_ || (changed_ && now >= last_publish_ + ChangeGap());
}

void FabricPublisher::Publish(MonoTime now, const fabric::PathMonitor& monitor, bool clock_locked) {
  next_publish_ = now + publish_every_;
  last_publish_ = now;
  changed_ = false;
  for (auto& [peer, n] : answered_pending_) {
    if (n > 0) answered_.Inc({peer}, static_cast<double>(n));
    n = 0;
  }
  const auto& rails = setup_.rails;
  nlohmann::json paths = nlohmann::json::array();
  std::map<int, std::vector<std::string>> failed_peers;
  const std::vector<fabric::PathView> views = monitor.Paths(now);
  std::vector<fabric::LatencySample> delays;
  delays.reserve(views.size());
  for (const fabric::PathView& v : views) delays.push_back({v.path, v.stats.owd_p99, v.stats.owd_samples});
  const fabric::LatencyDecisions latency = latency_.Judge(now, clock_locked, delays);
  nlohmann::json congestion = congestion_.Observe(views);
  FabricCongestionView congestion_view = CongestionViewOf(congestion);
  for (size_t i = 0; i < views.size(); ++i) {
    const fabric::PathView& v = views[i];
    const fabric::PathLatency& sla = latency.paths[i];
    const std::string rail = RailName(v.path.rail);
    if (sla.sla) owd_sla_.Set({v.path.peer, rail}, std::chrono::duration<double>(*sla.sla).count());
    latency_breach_.Set({v.path.peer, rail}, sla.breach() ? 1 : 0);
    if (v.state == PathState::kDown || v.state == PathState::kRecovering) {
      failed_peers[v.path.rail].push_back(v.path.peer);
    }
    Published& published = published_totals_[v.path];
    if (published.state != v.state) {  // 5 series a path: set again only on a change (128 paths: 640 a publish)
      for (PathState s : kStates) state_.Set({v.path.peer, rail, fabric::ToString(s)}, s == v.state ? 1 : 0);
      published.state = v.state;
    }
    loss_.Set({v.path.peer, rail}, v.stats.loss);
    owd_.Set({v.path.peer, rail, "0.5"}, Seconds(v.stats.owd_p50));
    owd_.Set({v.path.peer, rail, "0.99"}, Seconds(v.stats.owd_p99));
    rtt_.Set({v.path.peer, rail, "0.5"}, Seconds(v.stats.rtt_p50));
    rtt_.Set({v.path.peer, rail, "0.99"}, Seconds(v.stats.rtt_p99));
    fabric::PathStats& last = published.totals;
    sent_.Inc({v.path.peer, rail}, static_cast<double>(v.stats.probes_sent - last.probes_sent));
    replies_.Inc({v.path.peer, rail}, static_cast<double>(v.stats.replies - last.replies));
    misses_.Inc({v.path.peer, rail}, static_cast<double>(v.stats.misses - last.misses));
    last = v.stats;
    nlohmann::json readmit = nullptr;
    if (v.readmit_at) readmit = std::chrono::duration_cast<std::chrono::milliseconds>(*v.readmit_at - now).count();
    paths.push_back({{"peer", v.path.peer},
                     {"rail", v.path.rail},
                     {"interface", rail},
                     {"path", v.path.index},
                     {"state", fabric::ToString(v.state)},
                     {"loss", v.stats.loss},
                     {"owd_p50_ns", NsOrNull(v.stats.owd_p50)},
                     {"owd_p99_ns", NsOrNull(v.stats.owd_p99)},
                     {"rtt_p50_ns", NsOrNull(v.stats.rtt_p50)},
                     {"rtt_p99_ns", NsOrNull(v.stats.rtt_p99)},
                     {"owd_samples", v.stats.owd_samples},
                     {"rtt_samples", v.stats.rtt_samples},
                     {"window_samples", v.stats.window_samples},
                     {"probes_sent", v.stats.probes_sent},
                     {"replies", v.stats.replies},
                     {"misses", v.stats.misses},
                     {"hold_down_level", v.hold_down_level},
                     {"readmit_in_ms", readmit},
                     {"flaps_last_hour", v.flaps_in_window},
                     {"owd_sla_ns", NsOrNull(sla.sla)},
                     {"latency", fabric::ToString(sla.verdict)}});
  }
  nlohmann::json peers = nlohmann::json::array();
  for (const FabricPeer& p : setup_.peers) {
    auto pin = monitor.Pin(p.name);
    peer_rail_.Set({p.name}, pin ? pin->rail : -1);
    nlohmann::json route = nullptr;
    if (pin) {
      if (auto r = PinRoute(setup_, *pin)) route = r->ToString();
    }
    peers.push_back({{"peer", p.name},
                     {"host_address", FormatIpv4(p.host_address)},
                     {"via", pin ? RailName(pin->rail) : "ecmp"},
                     {"route", route}});
  }
  nlohmann::json rail_views = nlohmann::json::array();
  FabricHealthView health;
  for (size_t r = 0; r < rails.size(); ++r) health.rails.push_back({.name = rails[r].name});
  health.flaps_last_hour = monitor.FlapsInWindow(now);
  health.last_flap = last_flap_wall_;
  health.peers = static_cast<int>(setup_.peers.size());
  const fabric::StallView stalls = monitor.Stalls(now);
  health.prober_stalled = stalls.persistent;
  health.stalls = stalls.stalls;
  health.stalls_judged = stalls.judged;
  stalled_published_ = stalls.persistent;
  prober_stalled_.Set(stalls.persistent ? 1 : 0);
  for (const fabric::RailView& r : monitor.Rails(now)) {
    const std::string name = RailName(r.rail);
    if (r.rail >= 0 && r.rail < static_cast<int>(health.rails.size())) {
      FabricRailHealth& h = health.rails[r.rail];
      h.paths = r.paths;
      h.usable = r.usable;
      h.failed = r.failed;
      h.down = r.down;
      h.flaps_last_hour = r.flaps_in_window;
      h.alerting = r.alerting;
      h.failed_peers = failed_peers[r.rail];
      std::sort(h.failed_peers.begin(), h.failed_peers.end());
    }
    flaps_window_.Set({name}, r.flaps_in_window);
    rail_down_.Set({name}, r.down ? 1 : 0);
    rail_views.push_back(
        {{"rail", r.rail},
         {"interface", name},
         {"gateway", r.rail >= 0 && r.rail < static_cast<int>(rails.size()) ? FormatIpv4(rails[r.rail].gateway.gateway)
                                                                            : std::string()},
         {"paths", r.paths},
         {"usable", r.usable},
         {"failed", r.failed},
         {"down", r.down},
         {"flaps_last_hour", r.flaps_in_window},
         {"alerting", r.alerting}});
  }
  health.congestion = std::move(congestion_view);
  const fabric::LatencySummary& sum = latency.summary;
  health.latency = {.verdict = sum.verdict,
                    .with_sla = sum.with_sla,
                    .judged = sum.judged,
                    .breaches = sum.breaches,
                    .min_samples = latency_.options().min_samples};
  if (sum.worst) {
    health.latency.worst_peer = sum.worst->path.peer;
    health.latency.worst_rail = RailName(sum.worst->path.rail);
    health.latency.worst_p99 = sum.worst->owd_p99.value_or(Nanos(0));
    health.latency.worst_sla = sum.worst->sla.value_or(Nanos(0));
  }
  std::vector<FabricLatencyBreach> breaches;
  for (const fabric::LatencyBreach& b : latency.breaches) {
    const std::string rail = RailName(b.path.rail);
    log::Warn("fabric path above its latency SLA",
              {{"peer", b.path.peer},
               {"rail", rail},
               {"owd_p99_us", std::to_string(std::chrono::duration<double, std::micro>(b.owd_p99).count())},
               {"sla_us", std::to_string(std::chrono::duration<double, std::micro>(b.sla).count())},
               {"samples", std::to_string(b.samples)},
               {"event", b.notify ? "true" : "false"}});
    if (b.notify) breaches.push_back({b.path.peer, rail, b.owd_p99, b.sla, b.samples});
  }
  nlohmann::json last_flap = nullptr;
  if (auto lf = monitor.LastFlap()) last_flap = std::chrono::duration<double>(now - *lf).count();
  nlohmann::json status = {
      {"node", self_name_},
      {"host_address", FormatIpv4(setup_.host_address)},
      {"failover", fabric_.failover_enabled},
      {"probe_interval_ms", std::chrono::duration<double, std::milli>(fabric_.probe_interval).count()},
      {"miss_threshold", fabric_.miss_threshold},
      {"flaps_last_hour", monitor.FlapsInWindow(now)},
      {"last_flap_seconds_ago", last_flap},
      {"prober_stalls", stalls.stalls},
      {"prober_stalls_judged", stalls.judged},
      {"prober_stalled", stalls.persistent},
      {"latency",
       {{"verdict", fabric::ToString(sum.verdict)},
        {"paths_with_sla", sum.with_sla},
        {"judged", sum.judged},
        {"breaches", sum.breaches},
        {"min_samples", latency_.options().min_samples}}},
      {"rails", rail_views},
      {"congestion", std::move(congestion)},
      {"paths", paths},
      {"peers", peers}};
  std::lock_guard lock(mu_);
  status_ = std::move(status);
  health_ = std::move(health);
  for (FabricLatencyBreach& b : breaches) {
    if (latency_breaches_.size() < 1024) latency_breaches_.push_back(std::move(b));
  }
}

FabricHealthView FabricPublisher::Health() const {
  std::lock_guard lock(mu_);
  return health_;
}

std::vector<FabricFlapAlert> FabricPublisher::TakeFlapAlerts() {
  std::lock_guard lock(mu_);
  return std::exchange(alerts_raised_, {});
}

std::vector<FabricLatencyBreach> FabricPublisher::TakeLatencyBreaches() {
  std::lock_guard lock(mu_);
  return std::exchange(latency_breaches_, {});
}

nlohmann::json FabricPublisher::StatusJson() const {
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace lockstep::agent
