#include "lockstep/fabric/path_monitor.h"

#include <algorithm>
#include <utility>

namespace lockstep::fabric {

PathMonitor::PathMonitor(const FabricOptions& options, uint64_t seed)
    : options_(options), schedule_(options.probe_interval, options.jitter, seed) {}

Decisions PathMonitor::SetPaths(const std::vector<PathKey>& paths, Time now) {
  std::set<PathKey> wanted(paths.begin(), paths.end());
  for (auto it = paths_.begin(); it != paths_.end();) {
    if (wanted.contains(it->first)) {
      ++it;
      continue;
    }
    const PathKey key = it->first;
    path_flaps_.erase(key);
    if (auto pp = peer_paths_.find(key.peer); pp != peer_paths_.end() && pp->second.erase(key) && pp->second.empty()) {
      peer_paths_.erase(pp);
    }
    it = paths_.erase(it);
    std::erase(urgent_, key);
    dirty_peers_.insert(key.peer);
  }
  for (const PathKey& p : wanted) {
    if (paths_.contains(p)) continue;
    paths_.emplace(p, PathHealth(p, options_));
    peer_paths_[p.peer].insert(p);
    path_flaps_.emplace(p, FlapCounter(options_.flap_window, options_.flap_alert_per_hour));
    rail_flaps_.try_emplace(p.rail, options_.flap_window, options_.flap_alert_per_hour);
    dirty_peers_.insert(p.peer);
  }
  // Every path is probed at the schedule's ticks; new ones join the next.
  if (paths_.empty()) {
    schedule_.Stop();
  } else {
    schedule_.Start(now);
  }
  Decisions out;
  Replan(out, now);
  return out;
}

void PathMonitor::AdoptPin(const std::string& peer, const PathKey& path) {
  pins_[peer] = path;
  dirty_peers_.insert(peer);
}

std::vector<PathKey> PathMonitor::DueProbes(Time now) {
  std::vector<PathKey> out;
  if (!schedule_.TakeTick(now)) return out;
  out.reserve(paths_.size());
  for (const auto& [key, health] : paths_) out.push_back(key);
  return out;
}

void PathMonitor::OnProbeSent(const PathKey& path, uint64_t seq, Time sent, bool urgent) {
  auto it = paths_.find(path);
  if (it == paths_.end()) return;
  it->second.OnProbeSent(seq, sent, urgent);
}

std::vector<PathKey> PathMonitor::TakeUrgent() { return std::exchange(urgent_, {}); }

void PathMonitor::NoteUrgent(const PathKey& key, PathHealth& health) {
  if (health.TakeUrgent()) urgent_.push_back(key);
}

Decisions PathMonitor::OnReply(const PathKey& path, const Reply& reply) {
  Decisions out;
  auto it = paths_.find(path);
  if (it == paths_.end()) return out;
  Absorb(it->second.OnReply(reply), out);
  NoteUrgent(path, it->second);
  Replan(out, reply.received);
  return out;
}

Decisions PathMonitor::OnAck(const PathKey& path, const AckField& ack, Time received) {
  Decisions out;
  auto it = paths_.find(path);
  if (it == paths_.end()) return out;
  Absorb(it->second.OnAck(ack, received), out);
  NoteUrgent(path, it->second);
  Replan(out, received);
  return out;
}

Decisions PathMonitor::Tick(Time now) {
  Decisions out;
  std::vector<Transition> all;
  // Only the paths with something due, found by a scan once per wake-up (a
  // handful to a few hundred paths): cheaper than an index kept in step on
  // every probe sent and every ack (which was ~7% of the prober's time).
  for (auto& [key, health] : paths_) {
    for (auto due = health.NextDeadline(); due && *due <= now; due = health.NextDeadline()) {
      for (Transition& t : health.Tick(now)) all.push_back(std::move(t));
      NoteUrgent(key, health);
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Transition& a, const Transition& b) { return a.at < b.at; });
  Absorb(std::move(all), out);
  Replan(out, now);
  return out;
}

void PathMonitor::Absorb(std::vector<Transition> transitions, Decisions& out) {
  std::map<int, Time> touched;  // rail -> its latest transition
  for (Transition& t : transitions) {
    dirty_peers_.insert(t.path.peer);
    if (t.flap) path_flaps_.at(t.path).Record(t.at);
    Time& at = touched[t.path.rail];
    at = std::max(at, t.at);
    out.transitions.push_back(std::move(t));
  }
  // A rail flaps when it goes dead after it delivered: every one of its paths
  // with a verdict is down, as when this host's link on the rail dies (a
  // recovering path answers probes, so a link that comes back and dies again
  // during the hold-down flaps again). One peer's broken link fails only that
  // peer's path: the peer's rail flaps, ours does not.
  for (const auto& [rail, at] : touched) {
    int alive = 0, down = 0;
    for (auto it = paths_.lower_bound(PathKey{rail, "", 0}); it != paths_.end() && it->first.rail == rail; ++it) {
      const PathState st = it->second.state();
      alive += Usable(st) || st == PathState::kRecovering ? 1 : 0;
      down += st == PathState::kDown ? 1 : 0;
    }
    const bool dead = down > 0 && alive == 0;
    if (alive > 0) rail_delivered_.insert(rail);
    bool& was_dead = rail_dead_[rail];
    if (dead && !was_dead && rail_delivered_.contains(rail)) {
      last_flap_ = at;
      out.flaps.push_back({rail, at});
      FlapCounter& counter =
          rail_flaps_.try_emplace(rail, options_.flap_window, options_.flap_alert_per_hour).first->second;
      if (counter.Record(at)) out.alerts.push_back({rail, counter.Count(at), at});
    }
    was_dead = dead;
  }
}

void PathMonitor::Replan(Decisions& out, Time now) {
  if (dirty_peers_.empty()) return;
  // Plan only the peers whose paths changed; the others keep their pins.
  std::map<std::string, std::vector<PathChoice>> peers;
  std::map<std::string, PathKey> current;
  for (const std::string& peer : dirty_peers_) {
    if (auto pp = peer_paths_.find(peer); pp != peer_paths_.end()) {
      for (const PathKey& key : pp->second) {
        const PathHealth& h = paths_.at(key);
        peers[peer].push_back({key, h.state(), h.RankingDelay(now)});
      }
    }
    if (auto pin = pins_.find(peer); pin != pins_.end()) current.emplace(peer, pin->second);
  }
  dirty_peers_.clear();
  RoutePlan plan = PlanRoutes(peers, current, options_.failover_enabled, options_.pin_home, options_.self);
  for (const auto& [peer, pin] : current) pins_.erase(peer);
  for (auto& [peer, pin] : plan.pins) pins_[peer] = std::move(pin);
  for (RouteAction& a : plan.actions) out.actions.push_back(std::move(a));
}

std::optional<Time> PathMonitor::NextWakeup() const {
  std::optional<Time> best = schedule_.NextTick();
  for (const auto& [key, health] : paths_) {
    if (auto due = health.NextDeadline(); due && (!best || *due < *best)) best = due;
  }
  return best;
}

PathState PathMonitor::State(const PathKey& path) const {
  auto it = paths_.find(path);
  return it == paths_.end() ? PathState::kUnknown : it->second.state();
}

std::vector<PathView> PathMonitor::Paths(Time now) const {
  std::vector<PathView> out;
  for (const auto& [key, health] : paths_) {
    out.push_back({key, health.state(), health.Stats(now), health.hold_down_level(), health.ReadmitAt(),
                   path_flaps_.at(key).Count(now)});
  }
  return out;
}

std::optional<PathKey> PathMonitor::Pin(const std::string& peer) const {
  auto it = pins_.find(peer);
  if (it == pins_.end()) return std::nullopt;
  return it->second;
}

std::vector<RailView> PathMonitor::Rails(Time now) const {
  std::map<int, RailView> rails;
  for (const auto& [key, health] : paths_) {
    RailView& r = rails[key.rail];
    r.rail = key.rail;
    ++r.paths;
    r.usable += Usable(health.state()) ? 1 : 0;
    r.failed += Failed(health.state()) ? 1 : 0;
  }
  std::vector<RailView> out;
  for (auto& [rail, r] : rails) {
    r.down = r.failed > 0 && r.usable == 0;
    if (auto it = rail_flaps_.find(rail); it != rail_flaps_.end()) {
      r.flaps_in_window = it->second.Count(now);
      r.alerting = r.flaps_in_window > options_.flap_alert_per_hour;
    }
    out.push_back(r);
  }
  return out;
}

int PathMonitor::RailFlaps(int rail, Time now) const {
  auto it = rail_flaps_.find(rail);
  return it == rail_flaps_.end() ? 0 : it->second.Count(now);
}

int PathMonitor::FlapsInWindow(Time now) const {
  int n = 0;
  for (const auto& [rail, counter] : rail_flaps_) n += counter.Count(now);
  return n;
}

}  // namespace lockstep::fabric
