// PathMonitor: the fabric decision core for one host. It owns the probe
// schedule, one PathHealth per path, flap counters (per path and per rail)
// and the current route decisions, and turns values in (paths, probes sent,
// replies, now) into decisions out (state transitions, flap alerts, route
// actions). The agent drives it from one thread:
//
//   monitor.SetPaths(EnumeratePaths(rails, peers), now);
//   (map each monitor.Key(id), id < monitor.size(), to what the caller needs)
//   loop:
//     monitor.ExcuseStall(due, now);  // due: the NextWakeup slept until
//     on a reply: Apply(monitor.OnReply(id, reply));
//       (or, symmetric probing, on a peer's ack: Apply(monitor.OnAck(id, ack, received)))
//     Apply(monitor.Tick(now));
//     if (monitor.TakeProbeTick(now, ids)) for each PathId p in ids: { send; monitor.OnProbeSent(p, seq, now); }
//       (tiered: probe_tiers.h; TakeProbeTick(now) alone: every path at every tick)
//     for (PathId p : monitor.TakeUrgent()) { send urgent; monitor.OnProbeSent(p, seq, now, true); }
//     sleep until monitor.NextWakeup() or an urgent datagram arrives
//
// where Apply hands actions to a RouteActuator, transitions to metrics and
// logs, alerts to an Event. Paths are named by PathKey (peer names) at the
// edges and by PathId, their index in the monitor, on the hot path: a probe
// sent or an ack costs a vector index, no map look-up or string comparison.
// A wake-up scans the paths once; a state change adds the planning of the
// one peer whose paths changed. Not thread-safe (thread-compatible).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/fabric/failover_choice.h"
#include "lockstep/fabric/flap_counter.h"
#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path_health.h"
#include "lockstep/fabric/probe_schedule.h"
#include "lockstep/fabric/probe_tiers.h"

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
  bool alerting = false;    // above flap_alert_per_hour (until it slides back)
};

// What ExcuseStall made of a wake-up.
enum class Stall {
  kNone,     // on time (late by urgent_timeout or less)
  kExcused,  // stalled: the timeouts in the stall were restarted
  kJudged,   // stalled, but the excuse budget was spent: judged as it is
};
const char* ToString(Stall s);

// The stalls so far (ExcuseStall), for metrics and FabricHealth.
struct StallView {
  uint64_t stalls = 0;  // excused + judged, since the start
  uint64_t judged = 0;  // stalls beyond the budget
  std::optional<Time> last_judged;
  // A stall was judged within the last stall_window: the prober is late
  // so often that failures are judged through its stalls (false downs
  // possible when its peers stalled too).
  bool persistent = false;
};

// A watched path's index in a PathMonitor: 0 .. size() - 1, in key order,
// valid until the next SetPaths (which renumbers them).
using PathId = uint32_t;

class PathMonitor {
 public:
  // REQUIRES: Validate(options).ok(). `seed` seeds the probe jitter.
  PathMonitor(const FabricOptions& options, uint64_t seed);

  // The paths to watch. New paths start unknown and get probed; paths not
  // listed are dropped (with their counters), and a peer without paths is
  // unpinned by the returned actions. Renumbers the PathIds.
  Decisions SetPaths(const std::vector<PathKey>& paths, Time now);

  // The watched paths: ids 0 .. size() - 1, key order.
  size_t size() const { return paths_.size(); }
  // REQUIRES: id < size().
  const PathKey& Key(PathId id) const { return paths_[id].key; }
  // A watched path's id; nullopt when not watched. O(log paths).
  std::optional<PathId> Find(const PathKey& path) const;

  // A route this host already has (found when the agent starts): the peer
  // counts as pinned to `path`, so the plan keeps or removes it like its own.
  void AdoptPin(const std::string& peer, const PathKey& path);

  // Whether a probe tick is due at or before now: every watched path is
  // probed at each tick (probe_schedule.h). If so, the schedule moves on.
  bool TakeProbeTick(Time now) { return !paths_.empty() && schedule_.TakeTick(now); }
  // The same with tiered probing (probe_tiers.h): when a tick is due, fills
  // `probe` (cleared first) with the paths to probe at it: the fast ones
  // (traffic, no verdict, promoted by a loss or late ack) and the idle
  // rotation's share. A path carries traffic when its peer is active
  // (SetActivePeers) and it is the peer's pin, or the peer has no pin.
  bool TakeProbeTick(Time now, std::vector<PathId>& probe);
  // The peers whose traffic the node carries (e.g. TCP connections that
  // moved bytes recently); nullopt (the default): every peer. Only these
  // peers' pinned paths are probed fast without another reason.
  void SetActivePeers(std::optional<std::set<std::string>> peers) { active_ = std::move(peers); }
  // Rails whose paths are all fast whatever their traffic (every rail with
  // `all`): the rails under a latency SLA, which is judged on min_samples
  // delays per stats window that the idle rotation would not give.
  void SetAlwaysFastRails(bool all, std::set<int> rails) {
    all_rails_fast_ = all;
    fast_rails_ = std::move(rails);
  }
  // Idle ticks (options.h, idle_tick): a peer's fast probe (one without
  // the slow flag) was read at `now`: tick fast until `until` (now +
  // kFastTickHold) so its acks leave within one fast gap.
  void HoldFastTicks(Time now, Time until);
  // Whether path `id`'s next regular probe is an idle one (carries the slow
  // flag: the peer may ack it at its idle tick). False without idle ticks.
  bool SlowProbe(PathId id) const;
  // Whether the schedule is on idle ticks (the last gap taken was one).
  bool OnIdleTicks() const { return schedule_.slow(); }
  // A path's tier as of the last tiered tick.
  Tier PathTier(PathId id) const { return tiers_.tier(id); }
  const ProbeTiers& tiers() const { return tiers_; }
  // `seq` must be unique among the path's recent probes (a global counter works);
  // the reply carrying it is matched to this probe. REQUIRES: id < size().
  void OnProbeSent(PathId id, uint64_t seq, Time sent, bool urgent = false);
  // Paths that missed a probe and want an urgent one now (PathHealth::
  // TakeUrgent), in the order they asked; each is returned once per miss.
  std::vector<PathId> TakeUrgent();
  // A reply for path `id`. REQUIRES: id < size().
  Decisions OnReply(PathId id, const Reply& reply);
  // The peer's acknowledgement for path `id` (symmetric probing:
  // ack_window.h), received at `received`. REQUIRES: id < size().
  Decisions OnAck(PathId id, const AckField& ack, Time received);
  bool Watches(const PathKey& path) const { return Find(path).has_value(); }
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
  // The excuse has a budget: options.stall_excuses per sliding
  // options.stall_window. A stall beyond it is judged (nothing restarted,
  // kJudged): a prober that is always late would otherwise never declare a
  // path down (WorstCaseDetectionStalled bounds detection then).
  // REQUIRES: now does not go back.
  Stall ExcuseStall(Time due, Time now);
  StallView Stalls(Time now) const;

  // When to call Tick or TakeProbeTick next (the earliest probe, timeout,
  // re-admission or decay); nullopt when no path is watched.
  std::optional<Time> NextWakeup() const;

  // Views.
  PathState State(const PathKey& path) const;   // kUnknown when not watched
  std::vector<PathView> Paths(Time now) const;  // key order
  // The current decisions (pinned peers only): what the actuator should hold.
  // Actions are the diffs; an agent that failed to apply one can reconcile
  // its routes against this, level-based.
  const std::map<std::string, PathKey>& Pins() const { return pins_; }
  std::optional<PathKey> Pin(const std::string& peer) const;
  std::vector<RailView> Rails(Time now) const;  // rail order
  int RailFlaps(int rail, Time now) const;      // in the flap window
  int FlapsInWindow(Time now) const;            // all rails
  std::optional<Time> LastFlap() const { return last_flap_; }
  const FabricOptions& options() const { return options_; }

 private:
  // One watched path.
  struct Watched {
    PathKey key;
    PathHealth health;
    FlapCounter flaps;  // path flaps (transitions into down that flap)
    // The current run of fast probes (OnProbeSent): since when.
    bool fast_run = false;
    Time fast_since{};
  };

  void Absorb(std::vector<Transition> transitions, Decisions& out);
  void Replan(Decisions& out, Time now);
  void NoteUrgent(PathId id);  // after anything that can miss

  FabricOptions options_;
  ProbeSchedule schedule_;
  ProbeTiers tiers_;
  Nanos idle_reply_timeout_;                     // IdleAckTimeout(options_)
  Time fast_hold_until_{};                       // HoldFastTicks
  bool tiered_ = false;                          // the tiered TakeProbeTick is in use (idle ticks possible)
  std::vector<TierFacts> facts_;                 // TakeProbeTick's scratch
  std::optional<std::set<std::string>> active_;  // nullopt: every peer
  bool all_rails_fast_ = false;
  std::set<int> fast_rails_;
  std::vector<Watched> paths_;                             // by PathId: key order
  std::map<std::string, std::vector<PathId>> peer_paths_;  // rebuilt by SetPaths
  std::map<int, FlapCounter> rail_flaps_;
  std::map<int, bool> rail_dead_;  // every path with a verdict down, as of the last transition
  std::set<int> rail_delivered_;   // rails that had a usable path (a first down is no flap)
  std::map<std::string, PathKey> pins_;
  std::optional<Time> last_flap_;
  std::set<std::string> dirty_peers_;  // to plan again
  std::vector<PathId> urgent_;         // TakeUrgent
  // The latest stall_excuses excuses (a ring: no allocation per stall).
  std::vector<Time> excused_;
  size_t excused_next_ = 0;  // the oldest once full
  StallView stalls_;
};

}  // namespace lockstep::fabric
