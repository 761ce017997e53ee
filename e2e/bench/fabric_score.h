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
  // Every fault (each down of a flap train), ascending; empty: {fault}. The
  // stalls are also reported per fault, from one fault to the next.
  std::vector<double> faults;
};

// One fault's share: from its time to the next fault's (the last: to the end).
struct FaultStall {
  double at = 0;                  // wall seconds
  double max_step_stall_ms = 0;   // longest gap between rank 0's steps ending in it (the last: or running to its end)
  double stream_stalled_ms = 0;   // 50 ms windows below 10% of the pre-fault rate starting in it
};

struct Score {
  // survived: no rank error, and the loop was stepping at the end (not
  // stalled_at_end); hung: a stall reached the collective timeout (hang_s).
  bool survived = false, hung = false, stalled_at_end = false;
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
  std::vector<FaultStall> per_fault;       // every fault of the scenario, not only the first
};

Score ScoreArm(const LoopLog& loop, const std::vector<Interval>& stream, const Window& w);

nlohmann::ordered_json ToJson(const Score& s);

// ---- detection per affected path (the agent arm)

// "fabric path state changed" to down, from one agent's log.
struct PathDown {
  std::string host;  // the agent that declared it (h0)
  std::string path;  // its path key, "h1/rail0/path0"
  double t = 0;
};

// A path crosses the faulted link when the probes of `host` for it (or the
// acks coming back) do; `path` is the key's prefix "peer/railN" (every index).
struct PathRef {
  std::string host, path;
  bool operator<(const PathRef& o) const { return host != o.host ? host < o.host : path < o.path; }
  bool operator==(const PathRef& o) const { return host == o.host && path == o.path; }
};

struct Detection {
  int affected = 0;                    // paths that cross the faulted link
  int never_detected = 0;              // of those, never declared down in [fault, end]
  std::vector<double> detect_ms;       // per detected affected path: fault -> its first down
  std::optional<double> detect_ms_median, detect_ms_max;
  int false_downs_before = 0;          // downs in [ready, fault): every link was up
  int false_downs_after = 0;           // downs in [fault, end] of paths that do not cross the faulted link
};

// "h1/rail0/path0" -> "h1/rail0".
std::string PathPrefix(const std::string& key);

Detection ScoreDetection(const std::vector<PathDown>& downs, const std::vector<PathRef>& affected, double ready,
                         double fault, double end);

nlohmann::ordered_json ToJson(const Detection& d);

// When `netlab link` changed the link, from its log line
// "netlab: h0r0: down (changed at B, after A)": the change happened between A
// (its `ip` command started) and B (it returned). None if absent or A > B.
struct LinkChange {
  double after = 0, at = 0;
};
std::optional<LinkChange> ParseLinkChange(const std::string& netlab_stderr);

}  // namespace lockstep::bench::fabric
