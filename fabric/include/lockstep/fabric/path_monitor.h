// PathMonitor: the fabric decision core for one host. It owns the probe
// schedule, one PathHealth per path, flap counters (per path and per rail)
// and the current route decisions, and turns values in (paths, probes sent,
// replies, now) into decisions out (state transitions, flap alerts, route
// actions). The agent drives it from one thread:
//
//   monitor.SetPaths(EnumeratePaths(rails, peers), now);
//   loop:
//     monitor.ExcuseStall(due, now);  // due: the NextWakeup slept until
//     on a reply: Apply(monitor.OnReply(path, reply));
//       (or, symmetric probing, on a peer's ack: Apply(monitor.OnAck(path, ack, received)))
//     Apply(monitor.Tick(now));
//     for (PathKey p : monitor.DueProbes(now)) { send; monitor.OnProbeSent(p, seq, now); }
//     for (PathKey p : monitor.TakeUrgent()) { send urgent; monitor.OnProbeSent(p, seq, now, true); }
//     sleep until monitor.NextWakeup() or an urgent datagram arrives
//
// where Apply hands actions to a RouteActuator, transitions to metrics and
// logs, alerts to an Event. Each event costs O(log paths) plus the planning
// of the one peer whose paths changed state. Not thread-safe
// (thread-compatible).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/fabric/flap_counter.h"
#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path_health.h"
#include "lockstep/fabric/probe_schedule.h"
#include "lockstep/fabric/route_plan.h"

namespace lockstep::fabric {

// Edge-triggered: once when a rail's flaps in the window rise above the
// threshold; again only after they fell back to it or below. A rail flaps
// when, after it delivered, every one of its paths is down: this host's link
// on the rail died. A path flap (one peer's path) is counted for the path only,
// so a peer's bad link does not raise alerts on every host that talks to it.
struct FlapAlert {
  int rail = 0;
  int flaps_in_window = 0;
  Time at{};
};

// A rail flap (see FlapAlert): this host's link on the rail died.
struct RailFlap {
  int rail = 0;
  Time at{};
};

// What one call decided. Apply actions in order.
struct Decisions {
  std::vector<Transition> transitions;
  std::vector<RailFlap> flaps;
  std::vector<FlapAlert> alerts;
  std::vector<RouteAction> actions;
  bool empty() const { return transitions.empty() && flaps.empty() && alerts.empty() && actions.empty(); }
};

// One path for metrics and `fabric status`.
struct PathView {
  PathKey path;
  PathState state = PathState::kUnknown;
  PathStats stats;
  int hold_down_level = 0;
  std::optional<Time> readmit_at;  // recovering and clean
  int flaps_in_window = 0;
};

// One local rail for FabricHealth (rails up/total, per-rail conditions).
// A rail is down when it has paths and every one with a verdict is failed
// (down or recovering) and at least one is: one peer's broken link fails
// only that peer's path, a broken local link fails them all.
struct RailView {
  int rail = 0;
  int paths = 0, usable = 0, failed = 0;  // usable: up or suspect
  bool down = false;
  int flaps_in_window = 0;  // rail flaps (see FlapAlert) in the flap window
  bool alerting = false;  // above flap_alert_per_hour (until it slides back)
};

class PathMonitor {
 public:
  // REQUIRES: Validate(options).ok(). `seed` seeds the probe jitter.
  PathMonitor(const FabricOptions& options, uint64_t seed);

  // The paths to watch. New paths start unknown and get probed; paths not
  // listed are dropped (with their counters), and a peer without paths is
  // unpinned by the returned actions.
  Decisions SetPaths(const std::vector<PathKey>& paths, Time now);

  // A route this host already has (found when the agent starts): the peer
  // counts as pinned to `path`, so the plan keeps or removes it like its own.
  void AdoptPin(const std::string& peer, const PathKey& path);

  // Paths whose probe is due at or before now (each is rescheduled).
  std::vector<PathKey> DueProbes(Time now);
  // `seq` must be unique among the path's recent probes (a global counter works);
  // the reply carrying it is matched to this probe.
  void OnProbeSent(const PathKey& path, uint64_t seq, Time sent, bool urgent = false);
  // Paths that missed a probe and want an urgent one now (PathHealth::
  // TakeUrgent), in the order they asked; each is returned once per miss.
  std::vector<PathKey> TakeUrgent();
  // A reply for a path not watched is ignored (empty decisions).
  Decisions OnReply(const PathKey& path, const Reply& reply);
  // The peer's acknowledgement for `path` (symmetric probing: ack_window.h),
  // received at `received`; ignored for a path not watched.
  Decisions OnAck(const PathKey& path, const AckField& ack, Time received);
  bool Watches(const PathKey& path) const { return paths_.contains(path); }
  Decisions Tick(Time now);

  // The caller meant to run at `due` (the NextWakeup it slept until) and
  // runs at `now`. Late by more than urgent_timeout, the host was stalled
  // (starved of CPU, a non-preemptible kernel busy elsewhere, a paused VM):
  // its prober could neither send nor read, and when the whole machine
  // stalled neither could its peers, so the silence says nothing about the
  // paths. Every probe whose timeout fell in [due, now] then gets its whole
  // timeout again from now, and this returns true. Call it before handing
  // in what arrived meanwhile (acks received in time still count as such).
  // A real failure during a stall is detected up to one timeout later.
  bool ExcuseStall(Time due, Time now);

  // When to call Tick or DueProbes next (the earliest probe, timeout,
  // re-admission or decay); nullopt when no path is watched.
  std::optional<Time> NextWakeup() const;

  // Views.
  PathState State(const PathKey& path) const;  // kUnknown when not watched
  std::vector<PathView> Paths(Time now) const;  // key order
  // The current decisions (pinned peers only): what the actuator should hold.
  // Actions are the diffs; an agent that failed to apply one can reconcile
  // its routes against this, level-based.
  const std::map<std::string, PathKey>& Pins() const { return pins_; }
  std::optional<PathKey> Pin(const std::string& peer) const;
  std::vector<RailView> Rails(Time now) const;  // rail order
  int RailFlaps(int rail, Time now) const;  // in the flap window
  int FlapsInWindow(Time now) const;        // all rails
  std::optional<Time> LastFlap() const { return last_flap_; }
  const FabricOptions& options() const { return options_; }

 private:
  void Absorb(std::vector<Transition> transitions, Decisions& out);
  void Replan(Decisions& out, Time now);
  void NoteUrgent(const PathKey& key, PathHealth& health);  // after anything that can miss

  FabricOptions options_;
  ProbeSchedule schedule_;
  std::map<PathKey, PathHealth> paths_;
  std::map<std::string, std::set<PathKey>> peer_paths_;
  std::map<PathKey, FlapCounter> path_flaps_;
  std::map<int, FlapCounter> rail_flaps_;
  std::map<int, bool> rail_dead_;   // every path with a verdict down, as of the last transition
  std::set<int> rail_delivered_;     // rails that had a usable path (a first down is no flap)
  std::map<std::string, PathKey> pins_;
  std::optional<Time> last_flap_;
  std::set<std::string> dirty_peers_;  // to plan again
  std::vector<PathKey> urgent_;        // TakeUrgent
};

}  // namespace lockstep::fabric
