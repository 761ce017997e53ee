// One path's state machine, driven by synthetic times (no clock, no sleep).
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "fabric_sim.h"
#include "lockstep/fabric/path_health.h"

namespace lockstep::fabric {
namespace {

using testing::At;

const PathKey kPath{0, "b", 0};

// Request/reply timing: a reply comes 100 us after its probe, so the reply
// timeout is one interval (symmetric probing's longer ack timeout is
// covered in ack_window_test.cc).
FabricOptions Immediate(FabricOptions o = {}) {
  o.reply_timeout = 10ms;
  return o;
}

// Drives one PathHealth: probes every 10 ms from `from`, answered after
// 100 us unless `lost(i)` says the i-th is lost; returns every transition.
struct Driver {
  explicit Driver(const FabricOptions& o = Immediate()) : h(kPath, o) {}
  PathHealth h;
  uint64_t seq = 0;
  std::vector<Transition> seen;

  void Keep(std::vector<Transition> t) { seen.insert(seen.end(), t.begin(), t.end()); }
  // One probe at t; answered 100 us later when `answered`.
  void Probe(Time t, bool answered) {
    Keep(h.Tick(t));
    h.OnProbeSent(++seq, t);
    if (answered) Keep(h.OnReply({seq, t + 100us, std::nullopt}));
  }
  void Run(Time from, Time to, const std::function<bool(Time)>& answered) {
    for (Time t = from; t < to; t += 10ms) Probe(t, answered(t));
    Keep(h.Tick(to));
  }
};

TEST_CASE("a path is up at its first reply, and down after missThreshold misses in a row", "[fabric]") {
  Driver d;
  d.Probe(At(0ms), true);
  REQUIRE(d.h.state() == PathState::kUp);
  // Probes at 10, 20, 30 ms are lost: each is a miss 10 ms (the reply timeout) after it left.
  for (int i = 1; i <= 3; ++i) d.Probe(At(i * 10ms), false);
  d.Keep(d.h.Tick(At(20ms)));
  REQUIRE(d.h.state() == PathState::kSuspect);  // one miss: suspect only
  d.Keep(d.h.Tick(At(40ms) - 1ns));
  REQUIRE(d.h.state() == PathState::kSuspect);  // two misses
  d.Keep(d.h.Tick(At(40ms)));
  REQUIRE(d.h.state() == PathState::kDown);
  REQUIRE(d.seen.back().at == At(40ms));  // 3rd lost probe (sent at 30 ms) + 10 ms timeout
  REQUIRE(d.seen.back().flap);
  REQUIRE(d.h.hold_down_level() == 1);
}

TEST_CASE("a path never seen up goes down without counting a flap", "[fabric]") {
  Driver d;
  d.Run(At(0ms), At(100ms), [](Time) { return false; });
  REQUIRE(d.h.state() == PathState::kDown);
  REQUIRE(d.seen.size() == 1);
  REQUIRE(d.seen[0].from == PathState::kUnknown);
  REQUIRE_FALSE(d.seen[0].flap);
  REQUIRE(d.h.hold_down_level() == 0);
}

TEST_CASE("single lost probes never take a path down", "[fabric]") {
  Driver d;
  int i = 0;
  // Every third probe lost (33% loss, never two in a row): suspect, up, never down.
  d.Run(At(0ms), At(10s), [&](Time) { return ++i % 3 != 0; });
  for (const Transition& t : d.seen) REQUIRE(t.to != PathState::kDown);
  REQUIRE(d.h.state() == PathState::kUp);
  REQUIRE(d.h.Stats(At(10s)).loss == Approx(1.0 / 3).margin(0.01));
}

TEST_CASE("a reply after its probe's timeout is late and changes nothing", "[fabric]") {
  Driver d;
  d.Probe(At(0ms), true);
  d.h.OnProbeSent(++d.seq, At(10ms));
  d.Keep(d.h.Tick(At(20ms)));  // missed
  REQUIRE(d.h.state() == PathState::kSuspect);
  d.Keep(d.h.OnReply({d.seq, At(25ms), std::nullopt}));
  REQUIRE(d.h.state() == PathState::kSuspect);
  d.Keep(d.h.OnReply({999, At(26ms), std::nullopt}));
  PathStats s = d.h.Stats(At(26ms));
  REQUIRE(s.late_replies == 1);
  REQUIRE(s.unmatched_replies == 1);
  REQUIRE(s.misses == 1);
}

TEST_CASE("a queue longer than the reply timeout shows as delay, not only as loss", "[fabric]") {
  // Probes every 10 ms (reply timeout 10 ms): 1 s answered after 100 us with
  // a one-way delay of 50 us, then 1 s in which every probe waits 30 ms in a
  // queue (a congested link): each is a miss, then acked late with its delay.
  for (const bool by_ack : {false, true}) {
    CAPTURE(by_ack);
    Driver d;
    for (Time t = At(0ms); t < At(1s); t += 10ms) {
      d.Keep(d.h.Tick(t));
      d.h.OnProbeSent(++d.seq, t);
      d.Keep(by_ack ? d.h.OnAck({.seq = static_cast<uint32_t>(d.seq), .one_way_delay = 50us}, t + 100us)
                    : d.h.OnReply({d.seq, t + 100us, 50us}));
    }
    std::vector<std::pair<Time, uint64_t>> queued;  // (ack arrives, seq)
    for (Time t = At(1s); t < At(2s); t += 10ms) {
      for (auto it = queued.begin(); it != queued.end() && it->first <= t;) {
        d.Keep(by_ack ? d.h.OnAck({.seq = static_cast<uint32_t>(it->second), .one_way_delay = 30ms}, it->first)
                      : d.h.OnReply({it->second, it->first, 30ms}));
        it = queued.erase(it);
      }
      d.Keep(d.h.Tick(t));
      d.h.OnProbeSent(++d.seq, t);
      queued.emplace_back(t + 30ms + 100us, d.seq);
    }
    d.Keep(d.h.Tick(At(2s)));  // the last probe's miss
    const PathStats s = d.h.Stats(At(2s));
    REQUIRE(s.late_replies >= 95);                // every queued probe but the last few
    REQUIRE(s.loss == Approx(0.5).margin(0.02));  // the misses stay misses
    REQUIRE(s.window_samples == 200);             // a late reply is no second sample
    REQUIRE(s.owd_samples >= 195);
    REQUIRE(s.owd_p99 == 30ms);
    REQUIRE(d.h.state() == PathState::kDown);  // and the state is the misses' alone
  }
}

TEST_CASE("a miss asks for an urgent probe, and urgent misses confirm the fault within milliseconds", "[fabric]") {
  Driver d;  // reply timeout 10 ms, urgent timeout 5 ms
  d.Probe(At(0ms), true);
  REQUIRE_FALSE(d.h.TakeUrgent());  // nothing missed
  d.h.OnProbeSent(++d.seq, At(10ms));  // lost
  d.Keep(d.h.Tick(At(20ms)));
  REQUIRE(d.h.state() == PathState::kSuspect);
  REQUIRE(d.h.TakeUrgent());
  REQUIRE_FALSE(d.h.TakeUrgent());  // once per miss
  // The urgent probe at 20 ms is lost too, and so is a regular one at 20 ms:
  // the urgent one times out first (5 ms), though it left with the other.
  d.h.OnProbeSent(++d.seq, At(20ms));  // regular, deadline 30 ms
  d.h.OnProbeSent(++d.seq, At(20ms), /*urgent=*/true);  // deadline 25 ms
  REQUIRE(d.h.NextDeadline() == At(25ms));
  d.Keep(d.h.Tick(At(25ms)));
  REQUIRE(d.h.state() == PathState::kSuspect);  // two misses
  REQUIRE(d.h.consecutive_misses() == 2);
  REQUIRE(d.h.TakeUrgent());
  d.h.OnProbeSent(++d.seq, At(25ms), true);
  d.Keep(d.h.Tick(At(30ms)));  // the second urgent and the regular probe: both at 30 ms
  REQUIRE(d.h.state() == PathState::kDown);
  REQUIRE(d.seen.back().at == At(30ms));  // 10 + 10 + 2 x 5 ms after the fault's first probe
  REQUIRE_FALSE(d.h.TakeUrgent());  // a down path is probed at the normal rate
  REQUIRE(d.h.Stats(At(30ms)).misses == 4);
}

TEST_CASE("an answered urgent probe stops the urgent probes but clears nothing: the next regular reply does, "
          "paths never up get no urgent probes",
          "[fabric]") {
  Driver d;
  d.Probe(At(0ms), true);
  d.h.OnProbeSent(++d.seq, At(10ms));  // lost
  d.Keep(d.h.Tick(At(20ms)));
  REQUIRE(d.h.TakeUrgent());
  d.h.OnProbeSent(++d.seq, At(20ms), true);
  d.Keep(d.h.OnReply({d.seq, At(20ms) + 100us, std::nullopt}));
  // The urgent probe took another 5-tuple (the peer's urgent port): it does
  // not vouch for the path's own probes.
  REQUIRE(d.h.state() == PathState::kSuspect);
  REQUIRE_FALSE(d.h.TakeUrgent());
  REQUIRE(d.h.consecutive_misses() == 1);
  d.Probe(At(30ms), true);  // the path's own probe gets through: a random loss, cleared
  REQUIRE(d.h.state() == PathState::kUp);
  REQUIRE(d.h.consecutive_misses() == 0);
  // The same through acks: an ack of the urgent probe alone clears nothing,
  // one that also acks a regular probe does.
  d.h.OnProbeSent(++d.seq, At(40ms));  // lost
  d.Keep(d.h.Tick(At(50ms)));
  REQUIRE(d.h.TakeUrgent());
  d.h.OnProbeSent(++d.seq, At(50ms), true);
  AckField urgent_ack;
  urgent_ack.seq = static_cast<uint32_t>(d.seq);
  d.Keep(d.h.OnAck(urgent_ack, At(50ms) + 100us));
  REQUIRE(d.h.state() == PathState::kSuspect);
  d.h.OnProbeSent(++d.seq, At(60ms));
  AckField both;  // the regular probe and the urgent one before it
  both.seq = static_cast<uint32_t>(d.seq);
  both.bitmap = 1;
  d.Keep(d.h.OnAck(both, At(60ms) + 100us));
  REQUIRE(d.h.state() == PathState::kUp);

  Driver never;
  never.h.OnProbeSent(++never.seq, At(0ms));
  never.Keep(never.h.Tick(At(10ms)));
  REQUIRE(never.h.consecutive_misses() == 1);
  REQUIRE_FALSE(never.h.TakeUrgent());  // unknown: nothing to confirm
}

TEST_CASE("a path whose own probes are black-holed goes down though its urgent probes get through (another 5-tuple)",
          "[fabric]") {
  // Several paths per rail: a path is its probes' 5-tuple, and its urgent
  // probes (to the peer's urgent port) may hash onto another spine.
  Driver d;
  d.Probe(At(0ms), true);
  Time t = At(10ms);
  for (int regular = 1; regular <= 3; ++regular) {
    d.h.OnProbeSent(++d.seq, t);  // lost
    d.Keep(d.h.Tick(t + 10ms));
    if (regular < 3) {
      REQUIRE(d.h.state() == PathState::kSuspect);
      REQUIRE(d.h.TakeUrgent());
      d.h.OnProbeSent(++d.seq, t + 10ms, true);
      d.Keep(d.h.OnReply({d.seq, t + 10ms + 100us, std::nullopt}));  // answered
    }
    t += 10ms;
  }
  REQUIRE(d.h.state() == PathState::kDown);
  REQUIRE(d.seen.back().at == At(40ms));  // the 3rd regular probe's timeout
}

// Takes the path down at `t` (3 lost probes) and returns when it went down.
Time Fail(Driver& d, Time t) {
  d.Run(t, t + 30ms, [](Time) { return false; });  // probes at t, t+10, t+20 ms lost
  REQUIRE(d.h.state() == PathState::kDown);
  REQUIRE(d.seen.back().at == t + 30ms);
  return t + 30ms;
}

TEST_CASE("a recovered path is re-admitted after exactly the clean period", "[fabric]") {
  Driver d;
  d.Probe(At(0ms), true);
  Fail(d, At(10ms));
  // Replies again from 100 ms: recovering, clean since the first reply.
  const Time first_reply = At(100ms) + 100us;
  d.Run(At(100ms), At(100ms) + 2s, [](Time) { return true; });
  REQUIRE(d.h.state() == PathState::kRecovering);
  REQUIRE(d.h.ReadmitAt() == first_reply + 2s);
  d.Keep(d.h.Tick(first_reply + 2s - 1ns));
  REQUIRE(d.h.state() == PathState::kRecovering);
  d.Keep(d.h.Tick(first_reply + 2s));
  REQUIRE(d.h.state() == PathState::kUp);
  REQUIRE(d.seen.back().at == first_reply + 2s);
}

TEST_CASE("a miss while recovering restarts the clean period", "[fabric]") {
  Driver d;
  d.Probe(At(0ms), true);
  Fail(d, At(10ms));
  d.Run(At(100ms), At(1100ms), [](Time) { return true; });
  d.Probe(At(1100ms), false);  // one loss at 1.1 s
  d.Run(At(1110ms), At(3100ms), [](Time) { return true; });
  REQUIRE(d.h.state() == PathState::kRecovering);  // clean only since the reply at 1.1101 s
  REQUIRE(d.h.ReadmitAt() == At(1110ms) + 100us + 2s);
  d.Keep(d.h.Tick(At(4s)));
  REQUIRE(d.h.state() == PathState::kUp);
}

TEST_CASE("repeated flaps double the hold-down up to the cap, and staying up decays it", "[fabric]") {
  FabricOptions o;
  o.max_hold_down = 20s;
  Driver d(Immediate(o));
  d.Probe(At(0ms), true);
  Time t = At(10ms);
  std::vector<Nanos> clean_periods;
  REQUIRE(HoldDownLevelCap(o) == 5);  // 2 s * 2^4 = 32 s >= 20 s
  for (int flap = 1; flap <= 6; ++flap) {
    Time down = Fail(d, t);
    REQUIRE(d.h.hold_down_level() == std::min(flap, 5));  // a flap at the cap does not raise the level
    d.Run(down, down + 30ms, [](Time) { return true; });  // recovering
    const Time first = down + 100us;
    const Time readmit = *d.h.ReadmitAt();
    clean_periods.push_back(readmit - first);
    d.Run(down + 30ms, readmit + 10ms, [](Time) { return true; });
    REQUIRE(d.h.state() == PathState::kUp);
    t = readmit + 20ms;
  }
  REQUIRE(clean_periods == std::vector<Nanos>{2s, 4s, 8s, 16s, 20s, 20s});
  // Up and clean: the level drops by one per hold_down_decay (60 s).
  const int level = d.h.hold_down_level();
  d.Run(t, t + 61s, [](Time) { return true; });
  REQUIRE(d.h.hold_down_level() == level - 1);
  d.Run(t + 61s, t + 200s, [](Time) { return true; });
  REQUIRE(d.h.hold_down_level() == level - 3);
  REQUIRE(RequiredCleanPeriod(o, d.h.hold_down_level() + 1) == 8s);
}

TEST_CASE("a burst of flaps is forgiven after HoldDownLevelCap decay periods up, however long it was", "[fabric]") {
  FabricOptions o;  // readmit 2 s, cap 300 s, decay 60 s
  o.hold_down_decay = 10s;
  REQUIRE(HoldDownLevelCap(o) == 9);
  REQUIRE(HoldDownLevelCap(FabricOptions{}) == 9);
  Driver d(Immediate(o));
  d.Probe(At(0ms), true);
  Time t = At(10ms);
  for (int flap = 1; flap <= 30; ++flap) {  // down, then one good probe: recovering, never re-admitted
    t = Fail(d, t);
    d.Probe(t, true);
    t += 10ms;
  }
  REQUIRE(d.h.hold_down_level() == 9);
  REQUIRE(*d.h.ReadmitAt() - (t - 10ms + 100us) == 300s);
  // Clean from here: re-admitted after the cap, then one level per decay period up.
  d.Run(t, t + 300s + 9 * 10s + 1s, [](Time) { return true; });
  REQUIRE(d.h.state() == PathState::kUp);
  REQUIRE(d.h.hold_down_level() == 0);
}

TEST_CASE("loss and delay percentiles cover the recent window only", "[fabric]") {
  PathHealth h(kPath, FabricOptions{});
  uint64_t seq = 0;
  for (int i = 0; i < 100; ++i) {  // 1..100 us one-way delays
    Time t = At(i * 10ms);
    h.OnProbeSent(++seq, t);
    (void)h.OnReply({seq, t + 2 * Nanos(std::chrono::microseconds(i + 1)), Nanos(std::chrono::microseconds(i + 1))});
  }
  PathStats s = h.Stats(At(1s));
  REQUIRE(s.window_samples == 100);
  REQUIRE(s.loss == 0);
  REQUIRE(*s.owd_p50 == 51us);
  REQUIRE(*s.owd_p99 == 100us);
  REQUIRE(*s.rtt_p50 == 102us);
  REQUIRE(h.RankingDelay(At(1s)) == 51us);
  // 10 s later the samples have slid out.
  (void)h.Tick(At(20s));
  REQUIRE(h.Stats(At(20s)).window_samples == 0);
  REQUIRE_FALSE(h.RankingDelay(At(20s)).has_value());
  REQUIRE(h.Stats(At(20s)).replies == 100);  // totals stay
}

TEST_CASE("a stall excuses the timeouts that fell in it: the ack after it still delivers", "[fabric]") {
  // Probe at 0 ms (timeout at 10 ms); the host stalls from 5 to 30 ms and
  // the ack, sent by a peer that stalled too, arrives at 31 ms.
  for (const bool excused : {false, true}) {
    Driver d;
    d.Probe(At(-10ms), true);
    REQUIRE(d.h.state() == PathState::kUp);
    d.h.OnProbeSent(++d.seq, At(0ms));
    if (excused) d.h.Excuse(At(5ms), At(30ms));
    d.Keep(d.h.OnReply({d.seq, At(31ms), std::nullopt}));
    INFO("excused: " << excused);
    if (excused) {
      REQUIRE(d.h.state() == PathState::kUp);
      REQUIRE(d.h.Stats(At(31ms)).misses == 0);
      REQUIRE(d.h.NextDeadline() == std::nullopt);
    } else {
      REQUIRE(d.h.state() == PathState::kSuspect);  // missed at 10 ms, the reply is late
      REQUIRE(d.h.Stats(At(31ms)).late_replies == 1);
    }
  }
}

TEST_CASE("a stall excuses only timeouts inside it, each for its whole length again", "[fabric]") {
  Driver d;
  d.Probe(At(-10ms), true);
  d.h.OnProbeSent(++d.seq, At(0ms));   // timeout 10 ms: before the stall
  d.h.OnProbeSent(++d.seq, At(8ms));   // timeout 18 ms: inside
  d.h.OnProbeSent(++d.seq, At(25ms));  // timeout 35 ms: after
  d.h.Excuse(At(12ms), At(30ms));
  d.Keep(d.h.Tick(At(30ms)));
  REQUIRE(d.h.Stats(At(30ms)).misses == 1);          // the one due at 10 ms
  REQUIRE(d.h.NextDeadline() == At(35ms));           // unchanged
  d.Keep(d.h.Tick(At(35ms)));
  REQUIRE(d.h.Stats(At(35ms)).misses == 2);
  REQUIRE(d.h.NextDeadline() == At(40ms));           // the excused one: 30 ms + its 10 ms
}

TEST_CASE("p50 and p99 are nearest-rank whatever the order the samples came in", "[fabric]") {
  std::mt19937_64 rng(17);
  for (int n : {1, 2, 3, 50, 99, 100, 101, 250, 709}) {
    std::vector<int> us(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) us[static_cast<size_t>(i)] = i + 1;  // 1..n us
    std::shuffle(us.begin(), us.end(), rng);
    PathHealth h(kPath, FabricOptions{});
    uint64_t seq = 0;
    for (int i = 0; i < n; ++i) {
      const Time t = At(i * 10ms);
      const Nanos owd = std::chrono::microseconds(us[static_cast<size_t>(i)]);
      h.OnProbeSent(++seq, t);
      (void)h.OnReply({seq, t + 2 * owd, owd});
    }
    const PathStats s = h.Stats(At(n * 10ms));
    INFO("n = " << n);
    REQUIRE(s.window_samples == n);
    auto nearest = [&](double q) {  // the value of rank floor(q n), 0-based: rank + 1 us
      return Nanos(std::chrono::microseconds(std::min(static_cast<int>(q * n), n - 1) + 1));
    };
    CHECK(*s.owd_p50 == nearest(0.5));
    CHECK(*s.owd_p99 == nearest(0.99));
    CHECK(*s.rtt_p50 == 2 * nearest(0.5));
    CHECK(*s.rtt_p99 == 2 * nearest(0.99));
  }
}

}  // namespace
}  // namespace lockstep::fabric
