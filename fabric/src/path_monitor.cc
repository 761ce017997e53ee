#include "lockstep/fabric/path_monitor.h"

#include <algorithm>
#include <set>

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
    schedule_.Remove(it->first);
    path_flaps_.erase(it->first);
    it = paths_.erase(it);
    dirty_ = true;
  }
  for (const PathKey& p : wanted) {
    if (paths_.contains(p)) continue;
    paths_.emplace(p, PathHealth(p, options_));
    path_flaps_.emplace(p, FlapCounter(options_.flap_window, options_.flap_alert_per_hour));
    rail_flaps_.try_emplace(p.rail, options_.flap_window, options_.flap_alert_per_hour);
    schedule_.Add(p, now);
    dirty_ = true;
  }
  Decisions out;
  Replan(out, now);
  return out;
}

void PathMonitor::AdoptPin(const std::string& peer, const PathKey& path) {
  pins_[peer] = path;
  dirty_ = true;
}

std::vector<PathKey> PathMonitor::DueProbes(Time now) { return schedule_.TakeDue(now); }

void PathMonitor::OnProbeSent(const PathKey& path, uint64_t seq, Time sent) {
  auto it = paths_.find(path);
  if (it != paths_.end()) it->second.OnProbeSent(seq, sent);
}

Decisions PathMonitor::OnReply(const PathKey& path, const Reply& reply) {
  Decisions out;
  auto it = paths_.find(path);
  if (it == paths_.end()) return out;
  Absorb(it->second.OnReply(reply), out);
  Replan(out, reply.received);
  return out;
}

Decisions PathMonitor::Tick(Time now) {
  Decisions out;
  std::vector<Transition> all;
  for (auto& [key, health] : paths_) {
    for (Transition& t : health.Tick(now)) all.push_back(std::move(t));
  }
  std::stable_sort(all.begin(), all.end(), [](const Transition& a, const Transition& b) { return a.at < b.at; });
  Absorb(std::move(all), out);
  for (auto& [key, counter] : path_flaps_) counter.Advance(now);
  for (auto& [rail, counter] : rail_flaps_) counter.Advance(now);
  Replan(out, now);
  return out;
}

void PathMonitor::Absorb(std::vector<Transition> transitions, Decisions& out) {
  for (Transition& t : transitions) {
    dirty_ = true;
    if (t.flap) {
      last_flap_ = t.at;
      path_flaps_.at(t.path).Record(t.at);
      // One failure of a rail link takes down every path through it within a
      // detection time: count it once for the rail.
      auto last = rail_last_path_flap_.find(t.path.rail);
      const bool same_event = last != rail_last_path_flap_.end() && t.at - last->second <= WorstCaseDetection(options_);
      rail_last_path_flap_[t.path.rail] = t.at;
      FlapCounter& rail = rail_flaps_.try_emplace(t.path.rail, options_.flap_window, options_.flap_alert_per_hour)
                              .first->second;
      if (!same_event && rail.Record(t.at)) out.alerts.push_back({t.path.rail, rail.Count(t.at), t.at});
    }
    out.transitions.push_back(std::move(t));
  }
}

void PathMonitor::Replan(Decisions& out, Time now) {
  if (!dirty_) return;
  dirty_ = false;
  std::map<std::string, std::vector<PathChoice>> peers;
  for (const auto& [key, health] : paths_) {
    peers[key.peer].push_back({key, health.state(), health.RankingDelay(now)});
  }
  RoutePlan plan = PlanRoutes(peers, pins_, options_.failover_enabled);
  pins_ = std::move(plan.pins);
  for (RouteAction& a : plan.actions) out.actions.push_back(std::move(a));
}

std::optional<Time> PathMonitor::NextWakeup() const {
  std::optional<Time> best = schedule_.NextDue();
  for (const auto& [key, health] : paths_) {
    auto t = health.NextDeadline();
    if (t && (!best || *t < *best)) best = t;
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
