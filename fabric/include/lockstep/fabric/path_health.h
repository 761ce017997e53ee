// PathHealth: one path's health state machine, its outstanding probes, its
// hold-down, and its loss and delay over a recent window. Values in
// (probe sent, reply received, now), transitions out. Thread-compatible.
//
//            reply                 missThreshold misses in a row
//   unknown -------> up <--------> suspect ------------------------> down
//      |  N misses    ^   reply      (1..N-1 misses)                   ^ |
//      +--------------|------------------------------------------------+ | reply
//                     |  clean (no miss) for RequiredCleanPeriod(level)   v
//                     +------------------------------------------ recovering
//                          (a miss restarts the clean period; N misses: down)
//
// A miss that leaves a path up-but-suspect or recovering (short of down)
// asks for an urgent probe (TakeUrgent): the caller sends one at once, the
// peer acknowledges it on arrival, and it times out after urgent_timeout
// instead of reply_timeout, so the N misses that make a path down come
// within milliseconds of the first (options.h, WorstCaseDetection).
// An urgent probe can confirm a fault but not clear one: it goes to the
// peer's urgent port, another 5-tuple than the path's own probes, which the
// fabric's ECMP hash may send over another spine. An ack of urgent probes
// alone stops the urgent probes of that miss and changes nothing else (the
// path stays suspect, its misses in a row stand); only an ack of a regular
// probe delivers. So a path whose own 5-tuple is black-holed goes down after
// N regular probes missed in a row (they are fast while it is suspect)
// whatever its urgent probes meet.
//
// A flap is a transition into down from a state that delivered (up, suspect,
// recovering); each flap raises the hold-down level by one, each
// hold_down_decay spent up lowers it by one. A reply counts only for the
// probe it answers (matched by seq) and only before that probe's reply
// timeout; later it is "late" and changes no state (its one-way delay still
// counts in the window's delays: a queue longer than the reply timeout must
// show as delay, not only as loss). Events are applied in time
// order: OnReply first applies the timeouts due before the reply arrived.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "lockstep/fabric/ack_window.h"
#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

// A reply to one of our probes.
struct Reply {
  uint64_t seq = 0;                    // the probe's sequence number
  Time received{};                     // when the reply arrived (our monotonic clock)
  std::optional<Nanos> one_way_delay;  // our egress delay from fabric time (when clocks are synced)
};

struct Transition {
  PathKey path;
  PathState from = PathState::kUnknown;
  PathState to = PathState::kUnknown;
  Time at{};
  bool flap = false;  // into down from up, suspect or recovering
};

// Totals since the path was added, and the recent window.
struct PathStats {
  uint64_t probes_sent = 0, replies = 0, misses = 0;
  uint64_t late_replies = 0;       // answered (or acked) after their timeout (already counted as misses)
  uint64_t unmatched_replies = 0;  // no such probe outstanding (duplicate or stale seq)
  int window_samples = 0;          // probes decided (replied or missed) in the window
  double loss = 0;                 // misses / window_samples over the window (0 when empty)
  std::optional<Nanos> owd_p50, owd_p99;  // one-way delay (replies that carried one)
  int owd_samples = 0;                    // replies in the window that carried a one-way delay, late ones too
  std::optional<Nanos> rtt_p50, rtt_p99;  // round trip, less the time the peer held its ack
  int rtt_samples = 0;                    // replies in the window that gave a round trip
};

class PathHealth {
 public:
  // REQUIRES: Validate(options).ok().
  PathHealth(PathKey key, const FabricOptions& options);

  const PathKey& key() const { return key_; }
  PathState state() const { return state_; }
  int hold_down_level() const { return level_; }
  int consecutive_misses() const { return misses_in_a_row_; }

  // A probe left at `sent`; `urgent`: one asked for by TakeUrgent, acked on
  // arrival (its timeout is urgent_timeout). Seqs should grow; at most 64
  // stay outstanding (the oldest is dropped as a miss when the caller never
  // ticks).
  // `slow`: one the peer may ack at its idle tick (options.h, idle_tick): its
  // timeout is IdleAckTimeout.
  void OnProbeSent(uint64_t seq, Time sent, bool urgent = false, bool slow = false);

  // True once after a miss that left the path short of down while it was
  // delivering (suspect or recovering): send an urgent probe now. Cleared
  // when an ack delivers.
  bool TakeUrgent();

  // A reply arrived. Applies timeouts due before reply.received first.
  // On a path not delivering (unknown or down) the probes sent before the
  // answered one are forgotten, not judged (as OnAck's).
  std::vector<Transition> OnReply(const Reply& reply);

  // A peer's acknowledgement (symmetric probing, ack_window.h) arrived at
  // `received`. Applies timeouts due before it first, then delivers every
  // outstanding probe it covers (the latest with its round trip, less the
  // time the peer held the ack, and its one-way delay; older ones from the
  // bitmap without samples). The round trip is a sample only when the hold
  // is known and no longer than the whole round trip (the peer acks idle
  // probes at its idle tick, up to ~110 ms later: a hold counted into the
  // round trip would read as that much delay); the one-way delay was taken
  // at the peer's kernel receive stamp, before any hold, and always counts.
  // An ack repeating what was already delivered changes nothing; one whose
  // latest seq already timed out counts late once. An ack that delivers on
  // a path not delivering (unknown: never up; down) also forgets the probes
  // sent before the earliest one it delivers: they were lost before the
  // peer received anything of ours again, no losses of the path that now
  // delivers (those between its earliest and latest seqs are judged).
  // Seqs compare modulo 2^32 (the wire's width).
  std::vector<Transition> OnAck(const AckField& ack, Time received);

  // Applies everything due at or before now, in time order: probe timeouts
  // (misses), re-admission, hold-down decay. REQUIRES: now does not go back.
  std::vector<Transition> Tick(Time now);

  // The host was stalled from `from` to `now` (see PathMonitor::ExcuseStall):
  // every outstanding probe whose timeout fell in [from, now] gets its whole
  // timeout again, from now. Call before handling what arrived meanwhile.
  void Excuse(Time from, Time now);

  // When the next timed event is due (a probe timeout, re-admission or
  // decay), so the caller can tick then; nullopt when nothing is pending.
  std::optional<Time> NextDeadline() const;

  // Recovering and clean: when the path will be re-admitted.
  std::optional<Time> ReadmitAt() const;

  PathStats Stats(Time now) const;
  // The totals alone (no window, no percentiles): cheap, for every tick.
  const PathStats& totals() const { return totals_; }

  // For ranking alternatives: the one-way delay p50 when replies carried one,
  // else half the round-trip p50; nullopt without samples in the window.
  std::optional<Nanos> RankingDelay(Time now) const;

 private:
  struct Outstanding {
    uint64_t seq;
    Time sent;
    Time deadline;  // a miss at this time without an ack
    bool urgent = false;
  };
  struct Sample {
    Time at;
    bool lost;
    Nanos owd;  // < 0: none
    Nanos rtt;  // < 0: none (acked from a bitmap)
    // A reply after its probe's timeout (already counted as a miss): its
    // delays count, not as a reply (loss and window_samples keep the miss).
    bool late = false;
  };

  // The first delivery of a path that was not delivering (unknown: never
  // seen up; down), whose earliest delivered probe left at `sent`: the
  // probes sent before it and still outstanding were lost before the peer
  // received anything of ours (a peer not started yet, the fault it comes
  // back from), and the answer proves the path delivers after them. They are forgotten, not judged: their timeouts (up to
  // IdleAckTimeout for the first of a fast run) would fall after the path
  // came up and count as losses while it delivered (a suspect, a promotion
  // to fast probing for promote_for, a restarted clean period). Acks of
  // the probes missed so far (while it did not deliver) no longer count as
  // late (a late ack while delivering promotes a path too).
  void ForgetBeforeFirstDelivery(Time sent);
  void Miss(Time at, std::vector<Transition>& out);
  void Deliver(Time at, std::vector<Transition>& out);
  void Move(PathState to, Time at, std::vector<Transition>& out);
  void Record(Sample s);
  std::optional<Time> DecayAt() const;
  std::deque<Outstanding>::const_iterator FirstDeadline() const;  // outstanding_.end() when none

  PathKey key_;
  FabricOptions options_;
  Nanos idle_reply_timeout_;  // IdleAckTimeout(options_)
  PathState state_ = PathState::kUnknown;
  int misses_in_a_row_ = 0;
  bool urgent_ = false;                 // an urgent probe is wanted (TakeUrgent)
  int level_ = 0;                       // hold-down level
  std::optional<Time> clean_since_;     // recovering: first reply after the last miss
  Time decay_anchor_{};                 // up: last re-admission or decay step
  std::deque<Outstanding> outstanding_;  // send order
  std::deque<uint64_t> recently_missed_;
  std::deque<Sample> window_;
  PathStats totals_;
};

}  // namespace lockstep::fabric
