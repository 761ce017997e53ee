// CongestionLocator: from every path's one-way delay window (p50/p99, loss)
// and the links each path crosses (fabric_map.h), which links are congested
// and which paths are bad on their own. Values in (one round of the fleet's
// paths), findings out; no clocks, thread-compatible.
//
// Each path is judged against its own baseline, not an absolute threshold:
//   - a path with fewer than min_samples delays is not judged;
//   - its first baseline_rounds judged rounds build the baseline (the
//     smallest p50 and p99 seen, so one noisy round does not raise it) and
//     it is not judged yet;
//   - then it is rising when its p50 or its p99 is more than rise_ratio
//     times its baseline AND at least min_rise (p50) / min_rise_p99 (p99)
//     above it, or (loss_rise > 0) its loss is loss_rise above its
//     baseline loss; a rising
//     path clears when both fall below half way back;
//   - while not rising, the baseline follows slowly (baseline_weight of each
//     round), so it tracks a fabric that changes, but not a congestion.
// Localisation (Locate, also usable alone): a link is a candidate when at
// least min_paths of the judged paths that cross it are rising and they are
// at least min_share of them. Greedily, the candidate that explains most
// of the rising paths not yet explained is flagged (ties: the larger share,
// then the fewer paths crossing it, then by name), with every candidate that
// the probes cannot tell apart from it (the same rising and judged paths:
// say both directions' hops of a two-leaf fabric); its rising paths are
// explained; repeat until no candidate explains min_paths more. A rising
// path left unexplained is a bad path: it rises alone.
// Paths absent from a round are forgotten (their baselines too).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/fabric/fabric_map.h"
#include "lockstep/fabric/options.h"

namespace lockstep::fabric {

struct CongestionOptions {
  int min_samples = 50;                                 // delays in a path's window before it is judged
  int baseline_rounds = 3;                              // judged rounds that build a path's baseline
  double baseline_weight = 0.05;                        // share of a calm round the baseline moves by
  double rise_ratio = 2.0;                              // rising: above rise_ratio x baseline ...
  Nanos min_rise = std::chrono::microseconds(100);      // ... and p50 at least this much above it
  Nanos min_rise_p99 = std::chrono::microseconds(500);  // ... or p99 at least this much above it
  // Or loss this far above its baseline; 0: loss is not judged (the
  // default: a probe counts as lost when its ack does not come back, so
  // loss belongs to the round trip, and the way back crosses other links).
  double loss_rise = 0;
  int min_paths = 2;       // a congested link: at least this many rising paths cross it
  double min_share = 0.6;  // ... and they are at least this share of its judged paths
};

// One path's delays this round. `id` names it fleet-wide (say
// "node-a>node-b/rail0/path0"); `links` is FabricMap::Route (empty: not
// mapped, judged as a path but never localised to a link).
struct PathDelays {
  std::string id;
  std::vector<Link> links;
  std::optional<Nanos> p50, p99;
  int samples = 0;
  double loss = 0;
};

enum class PathTrend { kNotJudged, kLearning, kSteady, kRising };
const char* ToString(PathTrend t);  // "NotJudged", "Learning", "Steady", "Rising"

// For Locate: a judged path and whether it rises.
struct PathRise {
  std::string id;
  std::vector<Link> links;
  bool rising = false;
};

struct LinkCongestion {
  std::vector<Link> links;                // the congested link, or links the probes cannot tell apart (sorted)
  std::vector<std::string> rising_paths;  // sorted
  int paths = 0;                          // judged paths crossing it
  double share() const { return paths ? static_cast<double>(rising_paths.size()) / paths : 0; }
};

struct BadPath {
  std::string id;
  std::optional<Nanos> p50, p99, base_p50, base_p99;
  double loss = 0;
};

struct CongestionReport {
  std::vector<LinkCongestion> links;  // flagged, most rising paths first
  std::vector<BadPath> bad_paths;     // rising and explained by no flagged link, by id
  int judged = 0;                     // paths judged (steady or rising)
  int rising = 0;
  std::map<std::string, PathTrend> trends;  // every path of the round
};

// The localisation alone (see above). Paths that are not judged must not
// be passed. `bad_paths` carry only their ids.
CongestionReport Locate(const std::vector<PathRise>& paths, const CongestionOptions& options);

class CongestionLocator {
 public:
  explicit CongestionLocator(CongestionOptions options = {}) : options_(options) {}
  const CongestionOptions& options() const { return options_; }

  // One round: every path's current window. Judges each against its
  // baseline, then Locate()s the rising ones.
  CongestionReport Judge(const std::vector<PathDelays>& paths);

 private:
  struct Baseline {
    int rounds = 0;
    double p50 = 0, p99 = 0, loss = 0;  // nanoseconds, ratio
    bool rising = false;
  };
  bool Rising(const Baseline& b, const PathDelays& p, double slack) const;

  CongestionOptions options_;
  std::map<std::string, Baseline> base_;
};

}  // namespace lockstep::fabric
