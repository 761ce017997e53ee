#include "lockstep/fabric/path_monitor.h"

#include <algorithm>
#include <utility>

namespace lockstep::fabric {

PathMonitor::PathMonitor(const FabricOptions& options, uint64_t seed)
    : options_(options),
      schedule_(options.probe_interval, options.jitter, seed, IdleTicks(options) ? options.idle_tick : Nanos(0)),
      tiers_(options),
      idle_reply_timeout_(IdleAckTimeout(options)) {}

Decisions PathMonitor::SetPaths(const std::vector<PathKey>& paths, Time now) {
  std::set<PathKey> wanted(paths.begin(), paths.end());
  // Urgent requests outlive the renumbering (by key).
  std::vector<PathKey> urgent;
  for (PathId id : urgent_) {
    if (wanted.contains(paths_[id].key)) urgent.push_back(paths_[id].key);
  }
  // Kept paths keep their state; the new vector is in key order, as is `wanted`.
  std::vector<Watched> old = std::exchange(paths_, {});
  paths_.reserve(wanted.size());
  std::vector<int64_t> keep;  // new id -> old id (tiers' history), -1: new
  bool added = false;
  keep.reserve(wanted.size());
  auto kept = old.begin();
  for (const PathKey& p : wanted) {
    while (kept != old.end() && kept->key < p) {
      dirty_peers_.insert(kept->key.peer);  // dropped
      ++kept;
    }
    if (kept != old.end() && kept->key == p) {
      keep.push_back(kept - old.begin());
      paths_.push_back(std::move(*kept++));
      continue;
    }
    keep.push_back(-1);
    added = true;
    paths_.push_back({p, PathHealth(p, options_), FlapCounter(options_.flap_window, options_.flap_alert_per_hour)});
    rail_flaps_.try_emplace(p.rail, options_.flap_window, options_.flap_alert_per_hour);
    dirty_peers_.insert(p.peer);
  }
  for (; kept != old.end(); ++kept) dirty_peers_.insert(kept->key.peer);
  tiers_.Renumber(keep);
  peer_paths_.clear();
  for (PathId id = 0; id < paths_.size(); ++id) peer_paths_[paths_[id].key.peer].push_back(id);
  urgent_.clear();
  for (const PathKey& key : urgent) urgent_.push_back(*Find(key));
  // Every path is probed at the schedule's ticks; new ones join the next.
  if (paths_.empty()) {
    schedule_.Stop();
  } else {
    schedule_.Start(now);
    if (added) schedule_.Hurry(now);  // off idle ticks: a new path has no verdict
  }
  Decisions out;
  Replan(out, now);
  return out;
}

std::optional<PathId> PathMonitor::Find(const PathKey& path) const {
  auto it = std::lower_bound(paths_.begin(), paths_.end(), path,
                             [](const Watched& w, const PathKey& k) { return w.key < k; });
  if (it == paths_.end() || it->key != path) return std::nullopt;
  return static_cast<PathId>(it - paths_.begin());
}

bool PathMonitor::TakeProbeTick(Time now, std::vector<PathId>& probe) {
  probe.clear();
  tiered_ = true;
  if (paths_.empty() || !schedule_.Due(now)) return false;
  facts_.resize(paths_.size());
  for (PathId id = 0; id < paths_.size(); ++id) {
    const Watched& w = paths_[id];
    const PathStats& totals = w.health.totals();
    TierFacts& f = facts_[id];
    f.state = w.health.state();
    f.misses = totals.misses;
    f.late_replies = totals.late_replies;
    f.carries_traffic = false;
    if (!active_ || active_->contains(w.key.peer)) {
      auto pin = pins_.find(w.key.peer);
      f.carries_traffic = pin == pins_.end() || pin->second == w.key;
    }
    if (all_rails_fast_ || fast_rails_.contains(w.key.rail)) f.carries_traffic = true;
  }
  // Idle ticks while nothing here is fast and no peer's fast probe is
  // being acked (HoldFastTicks).
  tiers_.Plan(now, facts_, probe, now < fast_hold_until_);
  schedule_.Advance(now, tiers_.next_slow());
  return true;
}

void PathMonitor::HoldFastTicks(Time now, Time until) {
  fast_hold_until_ = std::max(fast_hold_until_, until);
  if (schedule_.slow()) schedule_.Hurry(now);
}

bool PathMonitor::SlowProbe(PathId id) const { return IdleTicks(options_) && tiers_.tier(id) == Tier::kIdle; }

void PathMonitor::AdoptPin(const std::string& peer, const PathKey& path) {
  pins_[peer] = path;
  dirty_peers_.insert(peer);
}

void PathMonitor::OnProbeSent(PathId id, uint64_t seq, Time sent, bool urgent) {
  Watched& w = paths_[id];
  bool slow = false;
  if (!urgent && tiered_ && IdleTicks(options_)) {
    if (SlowProbe(id) || w.health.state() == PathState::kDown) {
      // An idle probe; or a down path's, whose peer, reading nothing from
      // us for kFastTickHold, may have gone back to idle ticks (the run
      // starts again with the first ack: recovering).
      slow = true;
      w.fast_run = false;
    } else {
      // A run of fast probes: the peer may be on idle ticks until it has read
      // one (it then ticks fast for kFastTickHold after each), so the run's
      // first IdleAckTimeout is judged as idle probes are.
      if (!w.fast_run) {
        w.fast_run = true;
        w.fast_since = sent;
      }
      slow = sent - w.fast_since < idle_reply_timeout_;
    }
  }
  w.health.OnProbeSent(seq, sent, urgent, slow);
}

std::vector<PathId> PathMonitor::TakeUrgent() { return std::exchange(urgent_, {}); }

void PathMonitor::NoteUrgent(PathId id) {
  if (paths_[id].health.TakeUrgent()) urgent_.push_back(id);
}

Decisions PathMonitor::OnReply(PathId id, const Reply& reply) {
  Decisions out;
  Absorb(paths_[id].health.OnReply(reply), out);
  NoteUrgent(id);
  Replan(out, reply.received);
  if (!out.transitions.empty()) schedule_.Hurry(reply.received);
  return out;
}

Decisions PathMonitor::OnAck(PathId id, const AckField& ack, Time received) {
  Decisions out;
  Absorb(paths_[id].health.OnAck(ack, received), out);
  NoteUrgent(id);
  Replan(out, received);
  if (!out.transitions.empty()) schedule_.Hurry(received);
  return out;
}

Decisions PathMonitor::Tick(Time now) {
  Decisions out;
  std::vector<Transition> all;
  // Only the paths with something due, found by a scan once per wake-up (a
  // handful to a few hundred paths): cheaper than an index kept in step on
  // every probe sent and every ack (which was ~7% of the prober's time).
  for (PathId id = 0; id < paths_.size(); ++id) {
    PathHealth& health = paths_[id].health;
    for (auto due = health.NextDeadline(); due && *due <= now; due = health.NextDeadline()) {
      for (Transition& t : health.Tick(now)) all.push_back(std::move(t));
      NoteUrgent(id);
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Transition& a, const Transition& b) { return a.at < b.at; });
  Absorb(std::move(all), out);
  Replan(out, now);
  // A path changed state (a miss made it suspect, ...): it may be fast now.
  if (!out.transitions.empty()) schedule_.Hurry(now);
  return out;
}

const char* ToString(Stall s) {
  switch (s) {
    case Stall::kNone:
      return "none";
    case Stall::kExcused:
      return "excused";
    case Stall::kJudged:
      return "judged";
  }
  return "unknown";
}

Stall PathMonitor::ExcuseStall(Time due, Time now) {
  if (now - due <= options_.urgent_timeout) return Stall::kNone;
  ++stalls_.stalls;
  const auto budget = static_cast<size_t>(options_.stall_excuses);
  // Within budget: fewer than stall_excuses excuses in (now - stall_window, now].
  bool excuse = false;
  if (excused_.size() < budget) {
    excused_.push_back(now);  // grows to the budget once
    excuse = true;
  } else if (budget > 0 && excused_[excused_next_] <= now - options_.stall_window) {
    excused_[excused_next_] = now;
    excused_next_ = (excused_next_ + 1) % budget;
    excuse = true;
  }
  if (!excuse) {
    ++stalls_.judged;
    stalls_.last_judged = now;
    return Stall::kJudged;
  }
  for (Watched& w : paths_) w.health.Excuse(due, now);
  return Stall::kExcused;
}

StallView PathMonitor::Stalls(Time now) const {
  StallView v = stalls_;
  v.persistent = v.last_judged && now - *v.last_judged < options_.stall_window;
  return v;
}

void PathMonitor::Absorb(std::vector<Transition> transitions, Decisions& out) {
  std::map<int, Time> touched;  // rail -> its latest transition
  for (Transition& t : transitions) {
    dirty_peers_.insert(t.path.peer);
    if (t.flap) (void)paths_[*Find(t.path)].flaps.Record(t.at);
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
    for (const Watched& w : paths_) {
      if (w.key.rail != rail) continue;
      const PathState st = w.health.state();
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
    auto pin = pins_.find(peer);
    if (pin != pins_.end()) current.emplace(peer, pin->second);
    auto pp = peer_paths_.find(peer);
    if (pp == peer_paths_.end()) continue;
    // Delays rank alternatives only when a path failed and the pin does not
    // deliver (ChoosePin): only then the windows' percentiles (a copy and a
    // selection over up to 10 s of samples a path; in a flap storm at 128
    // paths, thousands of times a second on the prober's thread).
    // The pin is a rail (failover_choice.h): it delivers while all its paths do.
    bool failed = false, pin_seen = false, pin_delivers = true;
    for (PathId id : pp->second) {
      const Watched& w = paths_[id];
      failed = failed || Failed(w.health.state());
      if (pin != pins_.end() && w.key.rail == pin->second.rail) {
        pin_seen = true;
        pin_delivers = pin_delivers && Usable(w.health.state());
      }
    }
    pin_delivers = pin_delivers && pin_seen;
    const bool rank = failed && !pin_delivers;
    std::vector<PathChoice>& choices = peers[peer];
    for (PathId id : pp->second) {
      const Watched& w = paths_[id];
      choices.push_back({w.key, w.health.state(), rank ? w.health.RankingDelay(now) : std::nullopt});
    }
  }
  dirty_peers_.clear();
  RoutePlan plan = PlanRoutes(peers, current, options_.failover_enabled, options_.pin_home, options_.self);
  for (const auto& [peer, pin] : current) pins_.erase(peer);
  for (auto& [peer, pin] : plan.pins) pins_[peer] = std::move(pin);
  for (RouteAction& a : plan.actions) out.actions.push_back(std::move(a));
}

std::optional<Time> PathMonitor::NextWakeup() const {
  std::optional<Time> best = schedule_.NextTick();
  for (const Watched& w : paths_) {
    if (auto due = w.health.NextDeadline(); due && (!best || *due < *best)) best = due;
  }
  return best;
}

PathState PathMonitor::State(const PathKey& path) const {
  auto id = Find(path);
  return id ? paths_[*id].health.state() : PathState::kUnknown;
}

std::vector<PathView> PathMonitor::Paths(Time now) const {
  std::vector<PathView> out;
  out.reserve(paths_.size());
  for (const Watched& w : paths_) {
    out.push_back({w.key, w.health.state(), w.health.Stats(now), w.health.hold_down_level(), w.health.ReadmitAt(),
                   w.flaps.Count(now)});
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
  for (const Watched& w : paths_) {
    RailView& r = rails[w.key.rail];
    r.rail = w.key.rail;
    ++r.paths;
    r.usable += Usable(w.health.state()) ? 1 : 0;
    r.failed += Failed(w.health.state()) ? 1 : 0;
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
