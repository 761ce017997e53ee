// The fabric benchmark's scoring (pure): from the workloads' logs (the DDP
// loop's steps, the bulk stream's bytes per 10 ms) and the fault times, what
// one arm of one scenario did: survived, time until traffic flows again,
// longest step stall, lost steps, throughput dip, time back to full speed.
// All times are wall-clock seconds (every netlab namespace shares one clock).
// Values only; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::bench::fabric {

struct Step {
  int rank = 0, step = 0;
  double t = 0;  // end of the step
  double step_ms = 0;
};

struct LoopError {
  int rank = 0;
  double t = 0;
  std::string error;
};

// What the DDP ranks logged (see e2e/workloads/ddp_loop.py).
struct LoopLog {
  std::vector<Step> steps;
  std::vector<LoopError> errors;
  int ranks_ended = 0;  // "end" lines
};

// One rank's JSON lines; other lines (Python warnings) are skipped.
void ParseLoopLog(const std::string& text, LoopLog& into);

struct Interval {
  double t = 0;  // end of the 10 ms interval
  long long bytes = 0;
};
std::vector<Interval> ParseStreamLog(const std::string& text);

// The scenario's timeline.
struct Window {
  double fault = 0;   // first fault action
  double repair = 0;  // last repair action (0: none)
  double end = 0;     // end of observation
  double hang_s = 15; // a loop with no step for this long is hung
};

struct Score {
  bool survived = false, hung = false;
  std::string error;                       // first rank error, if any
  double pre_step_ms = 0;                  // median step before the fault
  double max_step_stall_ms = 0;            // longest gap between steps (rank 0) around/after the fault
  long long lost_steps = 0;                // steps expected at the pre-fault pace but not made
  double pre_mbps = 0;                     // stream throughput before the fault
  bool stream_stalled = false;             // some 50 ms window after the fault fell below 10% of pre_mbps
  // fault -> the stream flowing again for 100 ms after the stall the fault
  // caused (one starting within 1 s of it: an empty 10 ms interval or a 50 ms
  // window below 10%); 0: no such stall; none: never flowing again.
  std::optional<double> failover_ms;
  double stream_stalled_ms = 0;            // total time (50 ms windows) below 10% after the fault
  double dip_pct = 0;                      // 100 - worst 100 ms throughput in % of pre_mbps
  std::optional<double> recover_full_speed_ms;  // fault -> a 300 ms window at >= 80% of pre_mbps
};

Score ScoreArm(const LoopLog& loop, const std::vector<Interval>& stream, const Window& w);

nlohmann::ordered_json ToJson(const Score& s);

// When `netlab link` changed the link, from its log line
// "netlab: h0r0: down (changed at B, after A)": the change happened between A
// (its `ip` command started) and B (it returned). None if absent or A > B.
struct LinkChange {
  double after = 0, at = 0;
};
std::optional<LinkChange> ParseLinkChange(const std::string& netlab_stderr);

}  // namespace lockstep::bench::fabric
