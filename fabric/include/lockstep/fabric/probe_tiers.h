// ProbeTiers: which paths a probe tick probes (tiered probing). Values in
// (each path's state, whether it carries traffic, its miss and late-ack
// totals, now), decisions out (the paths to probe at this tick). No clock,
// no sockets. Thread-compatible.
//
// Probing every path at every tick costs a packet per path per interval at
// each end: at 16 peers x 8 rails (128 paths) 9,143 packets/s sent and as
// many received, ~10% of a core on the lab VM (docs/benchmarks.md, "Probe
// cost"). Traffic uses few of them: every peer's kernel-routed traffic is
// pinned to one path (its home path, or the one it failed over to), and only
// the peers the node talks to matter. So:
//
//   fast  every tick (probe_interval, jittered): a path that carries traffic
//         (the pinned path of an active peer; every path of an active peer
//         left to ECMP), a path without a verdict (unknown) or short of one
//         (suspect), and a path promoted by a loss or a late ack while it
//         delivered (up or suspect at this plan and the last) for
//         promote_for after it. Detection as
//         before: WorstCaseDetection (43.8 ms at the defaults).
//   idle  the rest, in a rotation: each tick probes its share of them
//         (idle paths / idle_interval a second, a credit per tick; round robin) and
//         any idle path that would otherwise go longer than idle_interval
//         without a probe, so every path is probed at least every
//         idle_interval while ticks come on time. An idle path that loses a
//         probe asks for urgent confirmation at once (PathHealth), as a fast
//         one does, and is promoted to fast at the next tick. Detection:
//         WorstCaseDetectionIdle, idle_interval + T_idle + (N-1) x U.
//
// Ticks: every probe_interval while any path is fast (or a peer's fast
// probes arrive: kFastTickHold); with none, every idle_tick (PathMonitor,
// options.h): the rotation then rides those few ticks, and the due rule
// and the credit count with the idle tick's longest gap. The peer
// acknowledges every probe at its next tick (ack_window.h), so an idle
// probe, which the peer may ack at its own idle tick, is judged with
// IdleAckTimeout (it carries the slow flag on the wire). idle_tick 0 keeps
// the ticks at probe_interval (idle probes then judged with reply_timeout).
// idle_interval 0 turns tiering off: every path is fast (the design before
// 2026-11-29).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

// A path's tier at the last plan, and why it was fast.
enum class Tier : uint8_t {
  kFast,      // tiering off
  kTraffic,   // carries traffic
  kVerdict,   // unknown or suspect
  kPromoted,  // a loss or a late ack within promote_for
  kIdle,      // rotation
};
const char* ToString(Tier tier);  // "fast", "traffic", "verdict", "promoted", "idle"
inline bool IsFast(Tier t) { return t != Tier::kIdle; }

// What a plan needs of one path.
struct TierFacts {
  PathState state = PathState::kUnknown;
  bool carries_traffic = false;
  uint64_t misses = 0;        // totals since the path was added (PathHealth):
  uint64_t late_replies = 0;  // a rise while it delivered promotes it
};

class ProbeTiers {
 public:
  // Reads probe_interval, jitter, idle_interval and promote_for.
  // REQUIRES: Validate(options).ok().
  explicit ProbeTiers(const FabricOptions& options);

  // The paths were renumbered (PathMonitor::SetPaths): `keep[new id]` is the
  // old id whose history the path keeps, or -1 for a new path (never probed:
  // probed at the next tick whatever its tier).
  void Renumber(const std::vector<int64_t>& keep);

  // One tick at `now`: appends to `out` the ids to probe (fast ones in id
  // order, then the idle ones picked) and notes them probed at `now`.
  // facts.size() is the path count. `hold_fast`: the next tick is a fast
  // one whatever the tiers (a peer's fast probes are being acked); else it
  // is an idle one when no path is fast and idle ticks are on (next_slow()).
  // REQUIRES: now does not go back.
  void Plan(Time now, const std::vector<TierFacts>& facts, std::vector<uint32_t>& out, bool hold_fast = true);
  // Whether the tick after the last plan is an idle one (idle_tick away).
  bool next_slow() const { return next_slow_; }

  // As of the last plan (kFast for a path not planned yet).
  Tier tier(uint32_t id) const { return id < paths_.size() ? paths_[id].tier : Tier::kFast; }
  size_t fast() const { return fast_; }
  size_t idle() const { return paths_.size() - fast_; }
  bool enabled() const { return idle_interval_.count() > 0; }

 private:
  struct Path {
    bool probed = false;
    Time last_probed{};
    Time promoted_until{};
    uint64_t misses = 0, late = 0;  // as of the last plan
    bool delivering = false;        // up or suspect at the last plan
    Tier tier = Tier::kFast;
  };

  Nanos fast_gap_;     // the longest fast tick gap, probe_interval(1 + j)
  Nanos longest_gap_;  // the longest tick gap: idle_tick(1 + j) with idle ticks, else fast_gap_
  Nanos idle_interval_;
  Nanos promote_for_;
  std::vector<Path> paths_;
  std::vector<uint32_t> idle_;  // scratch: this plan's idle ids
  size_t cursor_ = 0;           // the rotation: the next id to consider
  double credit_ = 0;           // idle probes owed (idle paths / idle_interval a second)
  std::optional<Time> last_plan_;
  size_t fast_ = 0;
  bool idle_ticks_ = false;
  bool next_slow_ = false;
};

}  // namespace lockstep::fabric
