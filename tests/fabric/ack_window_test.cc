// Symmetric probing's acknowledgements: what a receiver acks (AckWindow) and
// what an ack delivers on the sender's path (PathHealth::OnAck). Synthetic
// times, no clock.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fabric_sim.h"
#include "lockstep/fabric/ack_window.h"
#include "lockstep/fabric/path_health.h"

namespace lockstep::fabric {
namespace {

using testing::At;

TEST_CASE("an ack names the latest seq and the 32 before it that arrived", "[fabric]") {
  AckWindow w;
  REQUIRE_FALSE(w.Ack(At(0ms)));
  REQUIRE_FALSE(w.pending());
  w.OnReceive(10, At(0ms), 300us);
  w.OnReceive(12, At(20ms), 400us);  // 11 lost
  w.OnReceive(13, At(30ms), std::nullopt);
  REQUIRE(w.pending());
  auto a = w.Ack(At(35ms));
  REQUIRE(a);
  CHECK(a->seq == 13);
  CHECK(a->bitmap == 0b101);  // 12 (bit 0) and 10 (bit 2); 11 (bit 1) missing
  CHECK_FALSE(a->one_way_delay);  // 13 carried no fabric time
  CHECK(a->held == 5ms);
  CHECK(Acked(*a, 13));
  CHECK(Acked(*a, 12));
  CHECK_FALSE(Acked(*a, 11));
  CHECK(Acked(*a, 10));
  CHECK_FALSE(Acked(*a, 14));
  w.MarkAcked();
  REQUIRE_FALSE(w.pending());

  w.OnReceive(11, At(36ms), std::nullopt);  // late, reordered: acked in the bitmap, latest unchanged
  a = w.Ack(At(40ms));
  CHECK(a->seq == 13);
  CHECK(a->bitmap == 0b111);
  CHECK(a->held == 10ms);
  w.OnReceive(13, At(41ms), std::nullopt);  // a duplicate changes nothing
  CHECK(w.Ack(At(41ms))->bitmap == 0b111);

  w.OnReceive(13 + 32, At(50ms), 1ms);  // 13 is now the bitmap's last bit
  a = w.Ack(At(50ms));
  CHECK(a->seq == 45);
  CHECK(a->bitmap == 1u << 31);
  CHECK(a->one_way_delay == 1ms);
  w.OnReceive(45 + 33, At(60ms), std::nullopt);  // a jump past the bitmap forgets it
  CHECK(w.Ack(At(60ms))->bitmap == 0);
}

TEST_CASE("seqs wrap at 2^32, an old seq never restarts the window, Reset does", "[fabric]") {
  AckWindow w;
  w.OnReceive(0xFFFFFFFFu, At(0ms), std::nullopt);
  w.OnReceive(1, At(10ms), std::nullopt);  // 0 is skipped by senders: 2 ahead
  auto a = w.Ack(At(10ms));
  CHECK(a->seq == 1);
  CHECK(a->bitmap == 0b10);
  CHECK(Acked(*a, 0xFFFFFFFFu));
  CHECK(w.OnReceive(5'000, At(20ms), std::nullopt) == Receipt::kNew);
  w.MarkAcked();
  // Far behind: a replay of an old probe, not "the peer restarted" (that
  // takes authenticated evidence: the caller's Reset).
  CHECK(w.OnReceive(1, At(30ms), std::nullopt) == Receipt::kStale);
  CHECK_FALSE(w.pending());
  a = w.Ack(At(30ms));
  CHECK(a->seq == 5'000);
  CHECK(a->held == 10ms);
  // Implausibly far ahead is long ago modulo 2^32: stale too.
  CHECK(w.OnReceive(5'000 + kMaxSeqAdvance, At(31ms), std::nullopt) == Receipt::kStale);
  CHECK(w.OnReceive(5'000 - kMaxSeqAdvance, At(31ms), std::nullopt) == Receipt::kStale);
  CHECK(w.Ack(At(31ms))->seq == 5'000);
  w.Reset();  // the peer's new epoch
  CHECK_FALSE(w.Ack(At(32ms)));
  CHECK(w.OnReceive(1, At(32ms), std::nullopt) == Receipt::kNew);
  a = w.Ack(At(32ms));
  CHECK(a->seq == 1);
  CHECK(a->bitmap == 0);
  CHECK(a->held == 0ms);
}

TEST_CASE("a replayed stream, at any rate and in any order, never moves the window", "[fabric]") {
  // The genuine stream: seqs 100.. every 14 ms, 103 lost. The attacker
  // replays every seq it ever saw, interleaved with the genuine stream,
  // 1 to 1,000 times per genuine probe.
  for (int rate : {1, 10, 1'000}) {
    AckWindow w;
    std::vector<uint32_t> seen;
    for (uint32_t seq = 100; seq < 200; ++seq) {
      const Time t = At(std::chrono::milliseconds(14 * (seq - 100)));
      if (seq != 103) {
        const Receipt r = w.OnReceive(seq, t, 1ms);
        CHECK(r == Receipt::kNew);
        seen.push_back(seq);
      }
      const auto genuine = w.Ack(t);
      for (int i = 0; i < rate; ++i) {
        const uint32_t replay = seen[(static_cast<size_t>(i) * 7919u + seq) % seen.size()];
        const Receipt r = w.OnReceive(replay, t + std::chrono::microseconds(i), std::nullopt);
        CHECK((r == Receipt::kDuplicate || r == Receipt::kStale));
      }
      CHECK(w.Ack(t) == genuine);  // what we acknowledge is what the sender sent
    }
    const auto a = w.Ack(At(2s));
    CHECK(a->seq == 199);
    CHECK_FALSE(Acked(*a, 103));
  }
}

TEST_CASE("a late probe is acked once, its repeat is a duplicate", "[fabric]") {
  AckWindow w;
  CHECK(w.OnReceive(10, At(0ms), std::nullopt) == Receipt::kNew);
  CHECK(w.OnReceive(12, At(1ms), std::nullopt) == Receipt::kNew);
  w.MarkAcked();
  CHECK(w.OnReceive(11, At(2ms), std::nullopt) == Receipt::kLate);
  CHECK(w.pending());
  w.MarkAcked();
  CHECK(w.OnReceive(11, At(3ms), std::nullopt) == Receipt::kDuplicate);
  CHECK(w.OnReceive(10, At(3ms), std::nullopt) == Receipt::kDuplicate);
  CHECK(w.OnReceive(12, At(3ms), std::nullopt) == Receipt::kDuplicate);
  CHECK_FALSE(w.pending());
  CHECK(std::string(ToString(Receipt::kStale)) == "stale");
}

TEST_CASE(
    "an ack's round trip leaves out the peer's hold (a whole idle tick too), an unknown hold or one longer "
    "than the round trip gives no round trip, the one-way delay always counts",
    "[fabric]") {
  FabricOptions o;
  PathHealth h({0, "b", 0}, o);
  // An idle probe the peer read 40 us after it left and acked at its idle
  // tick 99.92 ms later; the ack took 40 us back: 80 us of round trip.
  h.OnProbeSent(1, At(0ms), false, true);
  REQUIRE(h.OnAck({.seq = 1, .one_way_delay = 40us, .held = 99920us}, At(100ms)).size() == 1);  // up
  PathStats s = h.Stats(At(100ms));
  CHECK(s.rtt_samples == 1);
  CHECK(s.rtt_p50 == 80us);
  CHECK(s.rtt_p99 == 80us);
  // A hold the wire could not say: delivered, one-way delay counted, no round trip.
  h.OnProbeSent(2, At(500ms), false, true);
  (void)h.OnAck({.seq = 2, .one_way_delay = 45us, .held = std::nullopt}, At(600ms));
  // A hold longer than the whole round trip: an inconsistent sample, not a 0 us round trip.
  h.OnProbeSent(3, At(1s), false, true);
  (void)h.OnAck({.seq = 3, .one_way_delay = 50us, .held = 100001us}, At(1100ms));
  s = h.Stats(At(1100ms));
  CHECK(s.replies == 3);
  CHECK(s.misses == 0);
  CHECK(h.state() == PathState::kUp);
  CHECK(s.rtt_samples == 1);
  CHECK(s.rtt_p50 == 80us);
  CHECK(s.rtt_p99 == 80us);
  CHECK(s.owd_samples == 3);
  CHECK(s.owd_p50 == 45us);
  CHECK(h.RankingDelay(At(1100ms)) == 45us);
}

TEST_CASE("an ack delivers every outstanding probe it covers, with samples from the latest", "[fabric]") {
  FabricOptions o;
  o.probe_interval = 10ms;
  o.reply_timeout = 14ms;  // AckTimeout at 10 ms
  PathHealth h({0, "b", 0}, o);
  h.OnProbeSent(1, At(10ms));
  h.OnProbeSent(2, At(15ms));
  h.OnProbeSent(3, At(20ms));
  // The peer's packet at 21 ms acks 3 (held 500 us) and 1 from its bitmap; 2 was lost.
  auto t = h.OnAck({3, 0b10, 200us, 500us}, At(21ms));
  REQUIRE(t.size() == 1);
  CHECK(t[0].to == PathState::kUp);
  auto s = h.Stats(At(21ms));
  CHECK(s.replies == 2);
  CHECK(s.rtt_p50 == 500us);  // 21 - 20 ms, less the 500 us the peer held it
  CHECK(s.owd_p50 == 200us);
  // 2 times out 14 ms after it left (29 ms): a miss, suspect.
  t = h.Tick(At(29ms));
  REQUIRE(t.size() == 1);
  CHECK(t[0].to == PathState::kSuspect);
  CHECK(h.Stats(At(29ms)).misses == 1);
  // Repeating an ack delivers nothing again (2 acked now is past its timeout).
  h.OnAck({3, 0b11, 200us, 9ms}, At(30ms));
  h.OnAck({3, 0b11, 200us, 9ms}, At(31ms));
  s = h.Stats(At(31ms));
  CHECK(s.replies == 2);
  CHECK(s.late_replies == 0);  // the latest (3) was delivered: repeats are not late
  CHECK(h.state() == PathState::kSuspect);
}

TEST_CASE("an ack arriving before the timeout counts even when it is read after it", "[fabric]") {
  FabricOptions o;
  o.probe_interval = 10ms;
  o.reply_timeout = 14ms;  // AckTimeout at 10 ms
  PathHealth h({0, "b", 0}, o);
  h.OnProbeSent(1, At(0ms));
  REQUIRE(h.OnAck({1, 0, std::nullopt, 11ms}, At(13ms)).size() == 1);  // up
  h.OnProbeSent(2, At(10ms));
  // Received at 23.9 ms (kernel time), processed after the 24 ms deadline passed.
  h.OnAck({2, 0b1, std::nullopt, 11ms}, At(24ms) - 100us);
  h.Tick(At(25ms));
  CHECK(h.state() == PathState::kUp);
  CHECK(h.Stats(At(25ms)).misses == 0);
  // A probe whose ack comes after its timeout is a miss, and its ack late.
  h.OnProbeSent(3, At(20ms));
  h.Tick(At(34ms));
  CHECK(h.state() == PathState::kSuspect);
  h.OnAck({3, 0b11, std::nullopt, 0ms}, At(35ms));
  CHECK(h.Stats(At(35ms)).late_replies == 1);
  h.OnAck({3, 0b11, std::nullopt, 0ms}, At(36ms));
  CHECK(h.Stats(At(36ms)).late_replies == 1);
}

}  // namespace
}  // namespace lockstep::fabric
