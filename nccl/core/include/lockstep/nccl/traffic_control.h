// Traffic control of one striped connection (sender side), as a pure policy:
// which streams carry how much, from the one-way delays the receiver measures
// in band (acks carry them back) and the node agent's path verdicts.
//
// Contention: a stream whose delay stays well above its own baseline while its
// peers' do not is on a contended path (two jobs' flows hashed onto one spine
// link, say): its weight drops so the others carry its chunks. Hysteresis:
//   - contended after `enter_after` updates in a row with
//       excess > threshold  and  the other streams calm,
//     where excess = delay - baseline, threshold = max(margin, (ratio - 1) x
//     baseline), and the others are calm when the median of their
//     excess / threshold is below 1/2 (a connection whose streams all slow
//     down is loaded, not contended: nothing to shift to);
//   - back to full weight after `exit_after` updates in a row with
//     excess < threshold / 2.
// A contended stream keeps a small weight (never 0), so its delay keeps being
// measured and the end of the contention is seen. The baseline is the lowest
// delay seen, rising by `baseline_rise_ns` per update while the stream is
// not contended (a lasting change of path becomes the new normal; a
// contention does not).
//
// UsableStreams: the agent's path verdicts (fabric/'s PathState, reduced by
// the agent to usable or not) gate the streams; when they would leave no open
// stream, every open one stays usable (no path is better: the same rule as
// fabric::ChoosePin's "while no path delivers the pin stays").
//
// Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::nccl {

struct TrafficControlOptions {
  double ratio = 2.0;               // > 1
  int64_t margin_ns = 200'000;      // > 0: excess that is never contention (jitter)
  int enter_after = 4;              // >= 1 updates
  int exit_after = 8;               // >= 1 updates
  double contended_weight = 0.25;   // (0, 1]
  int64_t baseline_rise_ns = 1000;  // >= 0, per update
};

Status ValidateTrafficControlOptions(const TrafficControlOptions& o);

struct WeightChange {
  int stream = 0;
  bool contended = false;  // the new state
  int64_t delay_ns = 0;
  int64_t baseline_ns = 0;
  bool operator==(const WeightChange&) const = default;
};

class TrafficControl {
 public:
  // REQUIRES: nstreams >= 1, ValidateTrafficControlOptions(options).ok().
  TrafficControl(int nstreams, TrafficControlOptions options);

  // One update with each stream's latest smoothed delay (nullopt: no sample
  // since the last update, or the stream is not in use: it keeps its state).
  // REQUIRES: delay_ns.size() == streams(). Returns the streams that changed.
  std::vector<WeightChange> Update(const std::vector<std::optional<int64_t>>& delay_ns);

  int streams() const { return static_cast<int>(s_.size()); }
  double Weight(int stream) const;  // 1, or contended_weight
  bool Contended(int stream) const { return s_[stream].contended; }
  std::optional<int64_t> Baseline(int stream) const;
  uint64_t rebalances() const { return rebalances_; }  // changes ever made

 private:
  struct Stream {
    bool has_baseline = false;
    int64_t baseline = 0;
    bool contended = false;
    int run = 0;  // consecutive updates meeting the condition to change state
  };
  int64_t Threshold(const Stream& s) const;

  TrafficControlOptions o_;
  std::vector<Stream> s_;
  uint64_t rebalances_ = 0;
};

// The plugin's own missing-ack timeout (a black hole the agent does not
// watch, or one it has not reported yet): a TCP stream with data in flight
// (`unacked_segments` > 0: the kernel's tcpi_unacked, or 1 for bytes queued
// and not sent, SIOCOUTQNSD) for `ms_in_flight`
// >= timeout_ms (the caller's count since it first saw data in flight: a
// stream that was idle has an old last ack) and no TCP acknowledgement for
// `ms_since_ack` >= timeout_ms (tcpi_last_ack_recv) is stalled. A stream that is only slow (a contended path) still
// gets acks every round trip; a receiver that is busy still has its kernel ack. The sender parks a stalled stream (its
// chunks move, as on the agent's verdict) until acks come back; UsableStreams keeps every stream when all are.
// timeout_ms 0: never stalled.
bool AckStalled(uint32_t unacked_segments, int64_t ms_in_flight, uint32_t ms_since_ack, uint32_t timeout_ms);

// The streams the sender may use: open[s] && agent_usable[s], or every open
// stream when that leaves none. REQUIRES: equal sizes.
std::vector<bool> UsableStreams(const std::vector<bool>& open, const std::vector<bool>& agent_usable);

// A stream's window under `weight`: max(1, round(window x weight)).
uint32_t WeightedWindow(uint32_t window, double weight);

}  // namespace lockstep::nccl
