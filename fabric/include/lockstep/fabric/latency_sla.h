// LatencySla: judges each path's one-way delay p99 against its latency SLA
// (FabricPolicy spec.latency). Values in (the paths' delay p99 and sample
// counts as of `now`, whether the node's clock is LOCKED), verdicts out.
// Thread-compatible; no clocks of its own.
//
// Per path, each Judge():
//   - no SLA on its rail                       -> kNoSla
//   - the node's clock not LOCKED              -> kClockNotLocked (not judged)
//   - fewer than min_samples delays in window  -> kNotEnoughSamples (not judged)
//   - otherwise judged with hysteresis: a path not in breach enters it when
//     its p99 is above the SLA; one in breach leaves it only when its p99
//     falls below clear_ratio (90%) of the SLA.
// A path that is not judged is not in breach (its flag reads 0) and starts
// from "within" when judged again. Each entry into breach is a
// LatencyBreach; it asks for an Event (`notify`) only when the path's last
// Event is at least event_gap (10 min) old, so a path that flaps around its
// SLA raises at most one Event per event_gap. Paths absent from a Judge()
// are forgotten (their Event times too).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

struct LatencySlaOptions {
  std::optional<Nanos> all_rails;              // every rail's SLA unless overridden
  std::map<int, Nanos> per_rail;               // by rail index: overrides all_rails
  int min_samples = 50;                        // delays in the stats window before judging
  double clear_ratio = 0.9;                    // a breach clears below this fraction of the SLA
  Nanos event_gap = std::chrono::minutes(10);  // at most one Event per (peer, rail) per this long
};

// The SLA in force on `rail`: its override, else all_rails, else none.
std::optional<Nanos> SlaFor(const LatencySlaOptions& options, int rail);

enum class LatencyVerdict { kNoSla, kClockNotLocked, kNotEnoughSamples, kWithin, kBreach };
const char* ToString(LatencyVerdict v);

// One path's delays as of now (PathStats: owd_p99, owd_samples).
struct LatencySample {
  PathKey path;
  std::optional<Nanos> owd_p99;
  int samples = 0;
};

struct PathLatency {
  PathKey path;
  std::optional<Nanos> sla;  // nullopt: kNoSla
  std::optional<Nanos> owd_p99;
  int samples = 0;
  LatencyVerdict verdict = LatencyVerdict::kNoSla;
  bool breach() const { return verdict == LatencyVerdict::kBreach; }
};

// A path that entered breach in this Judge().
struct LatencyBreach {
  PathKey path;
  Nanos owd_p99{};
  Nanos sla{};
  int samples = 0;
  bool notify = false;  // raise an Event (none for this path within event_gap)
};

// What the node's LatencyWithinSLA condition says:
//   kNoSla            no SLA is configured (Unknown, NoSLA)
//   kClockNotLocked   the clock is not LOCKED (Unknown, ClockNotLocked)
//   kNotEnoughSamples no path with an SLA judged yet, or none yet (Unknown, NotEnoughSamples)
//   kWithin           every judged path within its SLA (True)
//   kBreach           at least one path in breach (False); `worst` is the one
//                     furthest above its SLA (by p99 / SLA)
struct LatencySummary {
  LatencyVerdict verdict = LatencyVerdict::kNoSla;
  int with_sla = 0;                  // paths with an SLA
  int judged = 0;                    // of those, judged (within or in breach)
  int breaches = 0;                  // of those, in breach
  std::optional<PathLatency> worst;  // kBreach only
};

struct LatencyDecisions {
  std::vector<PathLatency> paths;       // in input order
  std::vector<LatencyBreach> breaches;  // new breaches
  LatencySummary summary;
};

class LatencySla {
 public:
  explicit LatencySla(LatencySlaOptions options) : options_(std::move(options)) {}

  const LatencySlaOptions& options() const { return options_; }
  bool enabled() const { return options_.all_rails || !options_.per_rail.empty(); }

  // Judges every path in `paths` (see above). REQUIRES: now does not go back.
  LatencyDecisions Judge(Time now, bool clock_locked, const std::vector<LatencySample>& paths);

 private:
  struct State {
    bool breached = false;
  };
  LatencySlaOptions options_;
  std::map<PathKey, State> state_;
  // The last Event per (peer, rail): the paths of one rail to one peer
  // (fabric.pathsPerRail ECMP paths) share it, so a rail's breach is one
  // Event, not one per path.
  std::map<std::pair<std::string, int>, Time> last_event_;
};

}  // namespace lockstep::fabric
