#include <catch2/catch.hpp>

#include "lockstep/agent/pair_joiner.h"

namespace lockstep::agent {
namespace {

constexpr NodeId kA = 1, kB = 2;

ProbeBody Probe(uint64_t seq, uint8_t index, std::optional<PrevTx> prev = std::nullopt) {
  ProbeBody b;
  b.pair_seq = seq;
  b.index = index;
  b.spacing_ns = 20'000;
  if (prev) {
    b.prev_valid = true;
    b.prev_pair_seq = prev->pair_seq;
    b.prev_tx_ns = prev->tx_ns;
  }
  return b;
}

TEST_CASE("both directions of an edge are joined from carried stamps and reports", "[daemonset][joiner]") {
  PairJoiner a(kA), b(kB);
  // A sends pair 1 to B; its kernel TX stamps come back to A.
  a.OnLocalTx(kB, 1, 0, 1000);
  a.OnLocalTx(kB, 1, 1, 1020);
  b.OnProbe(kA, Probe(1, 0), 5000);
  b.OnProbe(kA, Probe(1, 1), 5021);
  REQUIRE(b.TakeReady().empty());  // B has no TX stamps yet

  // A's next pair carries pair 1's TX stamps.
  auto prev = a.TakePrevTx(kB);
  REQUIRE(prev);
  REQUIRE(prev->pair_seq == 1);
  REQUIRE_FALSE(a.TakePrevTx(kB));  // carried once
  a.OnLocalTx(kB, 2, 0, 2000);
  b.OnProbe(kA, Probe(2, 0, prev), 6000);
  auto at_b = b.TakeReady();
  REQUIRE(at_b.size() == 1);
  REQUIRE(at_b[0] == CodedPair{kA, kB, 1, 1000, 5000, 1020, 5021});

  // B reports its RX stamps of pair 1 back; A joins the same pair.
  REQUIRE(b.PendingRxRecords(kA) == 1);
  ReportBody report;
  report.rx = b.TakeRxRecords(kA, kMaxRxRecords);
  REQUIRE(b.PendingRxRecords(kA) == 0);
  a.OnReport(kB, report);
  auto at_a = a.TakeReady();
  REQUIRE(at_a.size() == 1);
  REQUIRE(at_a[0] == at_b[0]);
  a.OnReport(kB, report);  // a duplicate report joins nothing new
  REQUIRE(a.TakeReady().empty());
}

TEST_CASE("incomplete pairs are never joined and state stays bounded", "[daemonset][joiner]") {
  PairJoiner b(kB, /*max_pairs_per_peer=*/8);
  for (uint64_t s = 1; s <= 100; ++s) b.OnProbe(kA, Probe(s, 0), static_cast<int64_t>(s) * 1000);  // index 1 lost
  REQUIRE(b.PendingRxRecords(kA) == 0);
  b.OnProbe(kA, Probe(101, 0, PrevTx{100, {1, 2}}), 200'000);
  REQUIRE(b.TakeReady().empty());
  b.Forget(kA);
  REQUIRE(b.TakeRxRecords(kA, 10).empty());
}

}  // namespace
}  // namespace lockstep::agent
