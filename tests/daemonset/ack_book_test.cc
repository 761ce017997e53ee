// AckBook: the prober's ack bookkeeping as values in, decisions out (no
// socket, no clock): which ack rides on which probe, which leave alone,
// freshness by epoch and seq, the urgent reply budget.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "lockstep/agent/ack_book.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kPeerB = 0xb;
constexpr uint32_t kPeerC = 0xc;
constexpr int kIf0 = 1;  // rail 0's interface
constexpr int kIf1 = 2;  // rail 1's interface
const MonoTime kT0 = MonoTime{} + 100s;

AckBook Book() {
  AckBook book({.stats_window = 5s, .probe_interval = 10ms, .miss_threshold = 3, .rail_ifindex = {kIf0, kIf1}});
  book.SetKnown({kPeerB, kPeerC});
  return book;
}

// Our paths to `peer` on both rails (index 0), as its acks name them.
std::map<WirePath, fabric::PathId> OursTo(uint32_t peer, fabric::PathId first = 0) {
  return {{{peer, 0, 0}, first}, {{peer, 1, 0}, first + 1}};
}

AckBook::Packet Probe(uint32_t sender, int rail, uint32_t seq, int ifindex, MonoTime at, uint64_t epoch = 10) {
  return {.sender = sender,
          .epoch = epoch,
          .rail = rail,
          .index = 0,
          .seq = seq,
          .received = at,
          .ifindex = ifindex,
          .urgent = false,
          .one_way_delay = std::nullopt};
}

AckBook::Packet AckOnlyFrom(uint32_t sender, MonoTime at, uint64_t epoch = 10) {
  AckBook::Packet p = Probe(sender, 0, 0, kIf0, at, epoch);
  p.seq = std::nullopt;
  return p;
}

bool Accepted(const AckBook::Verdict& v) { return !v.drop && !v.restarted && !v.urgent_limited; }

TEST_CASE("ack book: a peer path's ack rides on our next probe out of the interface its probes arrive on",
          "[daemonset][fabric]") {
  AckBook book = Book();
  book.SetOurPaths(OursTo(kPeerB));
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerB, 0, 5, kIf0, kT0), kT0)));
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerB, 1, 7, kIf1, kT0), kT0)));
  REQUIRE(book.size() == 2);
  // Both are carried by our probes (we probe both rails): no ack-only wake-up.
  CHECK_FALSE(book.AckOnlyWake(kT0));
  CHECK_FALSE(book.AckOnlyDue());

  book.BeginBatch();
  auto on_rail1 = book.Carry(kPeerB, kIf1, 0, kT0 + 1ms);
  REQUIRE(on_rail1);
  CHECK(on_rail1->rail == 1);
  REQUIRE(on_rail1->ack);
  CHECK(on_rail1->ack->seq == 7);
  CHECK(on_rail1->ack->held == 1ms);
  auto on_rail0 = book.Carry(kPeerB, kIf0, 0, kT0 + 1ms);
  REQUIRE(on_rail0);
  CHECK(on_rail0->rail == 0);
  CHECK(on_rail0->ack->seq == 5);
  // Each ack once per batch; none for a peer that sent nothing.
  CHECK_FALSE(book.Carry(kPeerB, kIf0, 0, kT0 + 1ms));
  CHECK_FALSE(book.Carry(kPeerC, kIf0, 0, kT0 + 1ms));
  std::vector<AckBook::AckOnly> alone;
  book.TakeAckOnly(true, kT0 + 1ms, alone);
  CHECK(alone.empty());  // both carried
}

TEST_CASE("ack book: with two peer paths on one interface the same path index rides first", "[daemonset][fabric]") {
  AckBook book = Book();
  book.SetOurPaths({{{kPeerB, 0, 0}, 0}, {{kPeerB, 0, 1}, 1}});
  AckBook::Packet p0 = Probe(kPeerB, 0, 3, kIf0, kT0);
  AckBook::Packet p1 = Probe(kPeerB, 0, 9, kIf0, kT0);
  p1.index = 1;
  REQUIRE(Accepted(book.OnPacket(p0, kT0)));
  REQUIRE(Accepted(book.OnPacket(p1, kT0)));
  book.BeginBatch();
  auto first = book.Carry(kPeerB, kIf0, 1, kT0);  // our path index 1 first
  REQUIRE(first);
  CHECK(first->index == 1);
  auto second = book.Carry(kPeerB, kIf0, 0, kT0);
  REQUIRE(second);
  CHECK(second->index == 0);
}

TEST_CASE("ack book: an ack no probe of ours can carry leaves alone, between ticks too", "[daemonset][fabric]") {
  AckBook book = Book();
  book.SetOurPaths(OursTo(kPeerB));  // nothing to kPeerC
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerC, 1, 4, kIf1, kT0), kT0)));
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerB, 0, 4, kIf0, kT0), kT0)));
  CHECK(book.AckOnlyWake(kT0) == 10ms);  // kPeerC's fast probe: every probe interval
  CHECK(book.AckOnlyDue());

  // Between ticks: only the one without a carrier.
  book.BeginBatch();
  std::vector<AckBook::AckOnly> alone;
  book.TakeAckOnly(false, kT0 + 2ms, alone);
  REQUIRE(alone.size() == 1);
  CHECK(alone[0].peer == 1);  // kPeerC, SetKnown's second
  CHECK(alone[0].path == WirePath{kPeerC, 1, 0});
  CHECK(alone[0].ifindex == kIf1);
  CHECK_FALSE(alone[0].urgent);
  REQUIRE(alone[0].ack);
  CHECK(alone[0].ack->seq == 4);
  CHECK_FALSE(book.AckOnlyDue());  // acked; kPeerB's waits for a probe

  // At a tick every pending ack not carried leaves, kPeerB's included.
  alone.clear();
  book.BeginBatch();
  book.TakeAckOnly(true, kT0 + 10ms, alone);
  REQUIRE(alone.size() == 1);
  CHECK(alone[0].path == WirePath{kPeerB, 0, 0});

  // Once we probe kPeerC's rail 1 too, its path has a carrier.
  std::map<WirePath, fabric::PathId> ours = OursTo(kPeerB);
  ours.emplace(WirePath{kPeerC, 1, 0}, 2);
  book.SetOurPaths(ours);
  CHECK_FALSE(book.AckOnlyWake(kT0 + 10ms));
  CHECK(book.OurPath({kPeerC, 1, 0}) == fabric::PathId{2});
  CHECK_FALSE(book.OurPath({kPeerC, 0, 0}));
}

TEST_CASE("ack book: a path we do not probe needs wake-ups as often as the peer's probes on it: idle ones at the "
          "idle tick, fast ones every probe interval for kFastTickHold",
          "[daemonset][fabric]") {
  AckBook book({.stats_window = 5s,
                .probe_interval = 14ms,
                .miss_threshold = 3,
                .rail_ifindex = {kIf0, kIf1},
                .idle_wake = 110ms});
  book.SetKnown({kPeerB, kPeerC});
  book.SetOurPaths(OursTo(kPeerB));  // nothing to kPeerC
  CHECK_FALSE(book.AckOnlyWake(kT0));
  // kPeerC's idle probes (the slow flag): it waits for our idle tick.
  AckBook::Packet idle = Probe(kPeerC, 1, 4, kIf1, kT0);
  idle.slow = true;
  REQUIRE(Accepted(book.OnPacket(idle, kT0)));
  CHECK(book.AckOnlyWake(kT0) == 110ms);
  // kPeerB's fast probes ride on our probes to it: no wake-up of their own.
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerB, 0, 9, kIf0, kT0), kT0)));
  CHECK(book.AckOnlyWake(kT0) == 110ms);
  // A fast probe from kPeerC on that path: every probe interval for kFastTickHold.
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerC, 1, 5, kIf1, kT0 + 1s), kT0 + 1s)));
  CHECK(book.AckOnlyWake(kT0 + 1s) == 14ms);
  CHECK(book.AckOnlyWake(kT0 + 1s + fabric::kFastTickHold - 1ms) == 14ms);
  // Idle probes again: back to the idle tick once the hold ran out.
  idle.seq = 6;
  idle.received = kT0 + 2s;
  REQUIRE(Accepted(book.OnPacket(idle, kT0 + 2s)));
  CHECK(book.AckOnlyWake(kT0 + 2s) == 14ms);
  CHECK(book.AckOnlyWake(kT0 + 1s + fabric::kFastTickHold) == 110ms);
  // An urgent probe wakes us on its own port: it does not make the path fast.
  AckBook::Packet urgent = Probe(kPeerC, 1, 7, kIf1, kT0 + 4s);
  urgent.urgent = true;
  REQUIRE(Accepted(book.OnPacket(urgent, kT0 + 4s)));
  CHECK(book.AckOnlyWake(kT0 + 4s) == 110ms);
  // Without idle ticks every such path needs the probe interval.
  AckBook fast = Book();
  fast.SetOurPaths(OursTo(kPeerB));
  REQUIRE(Accepted(fast.OnPacket(idle, kT0 + 2s)));
  CHECK(fast.AckOnlyWake(kT0 + 2s) == 10ms);
}

TEST_CASE("ack book: replayed and stale seqs are dropped and change nothing", "[daemonset][fabric]") {
  AckBook book = Book();
  book.SetOurPaths(OursTo(kPeerB));
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerB, 0, 100, kIf0, kT0), kT0)));
  book.BeginBatch();
  REQUIRE(book.Carry(kPeerB, kIf0, 0, kT0));

  CHECK(book.OnPacket(Probe(kPeerB, 0, 100, kIf0, kT0 + 1ms), kT0 + 1ms).drop == FabricDrop::kReplayed);
  CHECK(book.OnPacket(Probe(kPeerB, 0, 100 - 40, kIf0, kT0 + 1ms), kT0 + 1ms).drop == FabricDrop::kStale);
  // Nothing pending: the replays did not ask for an ack.
  std::vector<AckBook::AckOnly> alone;
  book.BeginBatch();
  book.TakeAckOnly(true, kT0 + 2ms, alone);
  CHECK(alone.empty());
  // A late one within the window is taken (its bit set).
  CHECK(Accepted(book.OnPacket(Probe(kPeerB, 0, 98, kIf0, kT0 + 2ms), kT0 + 2ms)));
  book.BeginBatch();
  auto c = book.Carry(kPeerB, kIf0, 0, kT0 + 2ms);
  REQUIRE(c);
  CHECK(c->ack->seq == 100);
  CHECK(fabric::Acked(*c->ack, 98));
  CHECK_FALSE(fabric::Acked(*c->ack, 99));
}

TEST_CASE("ack book: epochs: an older one is stale, a newer one is a restart that starts the windows again",
          "[daemonset][fabric]") {
  AckBook book = Book();
  book.SetOurPaths(OursTo(kPeerB));
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerB, 0, 50, kIf0, kT0, 10), kT0)));
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerC, 0, 50, kIf0, kT0, 10), kT0)));
  // The first epoch seen is no restart; an older one within a stats window is stale.
  AckBook::Verdict v = book.OnPacket(Probe(kPeerB, 0, 51, kIf0, kT0 + 1s, 9), kT0 + 1s);
  CHECK(v.drop == FabricDrop::kStale);
  CHECK_FALSE(v.restarted);
  CHECK(book.OnPacket(AckOnlyFrom(kPeerB, kT0 + 1s, 9), kT0 + 1s).drop == FabricDrop::kStale);

  // Newer: a restart; its seqs begin again (seq 1 is new, not stale), kPeerC untouched.
  v = book.OnPacket(Probe(kPeerB, 0, 1, kIf0, kT0 + 2s, 11), kT0 + 2s);
  CHECK(v.restarted);
  CHECK_FALSE(v.older_epoch);
  CHECK_FALSE(v.drop);
  CHECK(book.size() == 2);  // kPeerB's new window and kPeerC's
  // The old boot's packets are stale now.
  CHECK(book.OnPacket(Probe(kPeerB, 0, 52, kIf0, kT0 + 2s, 10), kT0 + 2s).drop == FabricDrop::kStale);

  // Older after a stats window of silence: let in as a restart whose clock went back.
  const MonoTime later = kT0 + 2s + 6s;
  v = book.OnPacket(Probe(kPeerB, 0, 1, kIf0, later, 5), later);
  CHECK(v.restarted);
  CHECK(v.older_epoch);
  CHECK_FALSE(v.drop);
}

TEST_CASE("ack book: urgent replies are granted within the peer's budget and refill per probe interval",
          "[daemonset][fabric]") {
  AckBook book = Book();
  book.SetOurPaths(OursTo(kPeerB));
  // Twice what the peer's paths can ask for: 2 x (missThreshold - 1) x rails = 8 per interval.
  int granted = 0, limited = 0;
  for (uint32_t seq = 1; seq <= 12; ++seq) {
    AckBook::Packet p = Probe(kPeerB, 0, seq, kIf0, kT0);
    p.urgent = true;
    const AckBook::Verdict v = book.OnPacket(p, kT0);
    REQUIRE_FALSE(v.drop);
    if (v.urgent_limited) {
      ++limited;
    } else {
      ++granted;
      // Granted: the urgent ack leaves alone, to the urgent port, carried or not.
      book.BeginBatch();
      REQUIRE(book.Carry(kPeerB, kIf0, 0, kT0));
      std::vector<AckBook::AckOnly> alone;
      book.TakeAckOnly(false, kT0, alone);
      REQUIRE(alone.size() == 1);
      CHECK(alone[0].urgent);
    }
  }
  CHECK(granted == 8);
  CHECK(limited == 4);
  // Half an interval later half the budget is back.
  const MonoTime t = kT0 + 5ms;
  granted = 0;
  for (uint32_t seq = 13; seq <= 20; ++seq) {
    AckBook::Packet p = Probe(kPeerB, 0, seq, kIf0, t);
    p.urgent = true;
    if (!book.OnPacket(p, t).urgent_limited) {
      ++granted;
      std::vector<AckBook::AckOnly> alone;
      book.BeginBatch();
      book.TakeAckOnly(false, t, alone);
    }
  }
  CHECK(granted == 4);
}

TEST_CASE("ack book: a new peer set keeps the epochs of peers that stay and forgets the others' paths",
          "[daemonset][fabric]") {
  AckBook book = Book();
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerB, 0, 50, kIf0, kT0, 10), kT0)));
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerC, 0, 50, kIf0, kT0, 10), kT0)));
  book.SetKnown({kPeerC});
  CHECK(book.PeerIndex(kPeerB) == -1);
  CHECK(book.PeerIndex(kPeerC) == 0);
  CHECK(book.size() == 1);
  // kPeerC kept its epoch: an older one is still stale.
  CHECK(book.OnPacket(Probe(kPeerC, 0, 51, kIf0, kT0, 9), kT0).drop == FabricDrop::kStale);
  // kPeerB back: a fresh start (its first epoch is no restart).
  book.SetKnown({kPeerB, kPeerC});
  CHECK(Accepted(book.OnPacket(Probe(kPeerB, 0, 1, kIf0, kT0, 3), kT0)));
}

TEST_CASE("ack book: paths silent for a stats window are dropped", "[daemonset][fabric]") {
  AckBook book = Book();
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerB, 0, 1, kIf0, kT0), kT0)));
  REQUIRE(Accepted(book.OnPacket(Probe(kPeerC, 0, 1, kIf0, kT0 + 3s), kT0 + 3s)));
  book.DropQuiet(kT0 + 5s);
  CHECK(book.size() == 2);
  book.DropQuiet(kT0 + 5s + 1ns);
  CHECK(book.size() == 1);
  book.DropQuiet(kT0 + 9s);
  CHECK(book.size() == 0);
}

}  // namespace
}  // namespace lockstep::agent
