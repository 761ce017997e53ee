// The clock-sync service end to end on simulated time: N agents with known
// virtual clocks over an in-memory network, scored against ground truth.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>

#include "fake_clock.h"
#include "fake_network.h"
#include "lockstep/agent/clock_sync_service.h"
#include "lockstep/agent/peer_selection.h"
#include "lockstep/agent/virtual_clock.h"
#include "packet_samples.h"
#include "sim_node_clock.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;
using test::TrueNs;

struct Node {
  std::string name;
  Endpoint ep;
  std::unique_ptr<VirtualClock> clock;
  std::unique_ptr<ProbeTransport> transport;
  metrics::Registry registry;
  std::unique_ptr<ClockSyncService> service;
};

class Testbed {
 public:
  // configured_peers = false: the services start with no peers at all, as in
  // Kubernetes mode before discovery; Discover() hands them over.
  Testbed(int n, int peers_per_node, uint64_t seed, test::LinkModel link = {}, bool configured_peers = true)
      : net_(clock_, seed, link), base_(clock_), codec_(test::Key()), peers_per_node_(peers_per_node) {
    std::mt19937_64 rng(seed);
    std::vector<PeerConfig> all;
    for (int i = 0; i < n; ++i) all.push_back({"node-" + std::to_string(i), "10.0.0." + std::to_string(i + 1), 7311});
    for (int i = 0; i < n; ++i) {
      auto node = std::make_unique<Node>();
      node->name = all[static_cast<size_t>(i)].name;
      node->ep = *Endpoint::Parse(all[static_cast<size_t>(i)].address, 7311);
      VirtualClockParams p;
      p.offset_ns = static_cast<int64_t>(rng() % 100'000'000) - 50'000'000;
      p.drift_ppb = static_cast<int64_t>(rng() % 60'000) - 30'000;
      p.wander_ppb = 5;
      p.seed = rng();
      node->clock = std::make_unique<VirtualClock>(base_, p);
      node->transport = net_.Attach(node->ep, *node->clock);
      nodes_.push_back(std::move(node));
    }
    for (int i = 0; i < n; ++i) {
      Node& node = *nodes_[static_cast<size_t>(i)];
      ClockSyncOptions o;
      o.self_name = node.name;
      o.seed = static_cast<uint64_t>(i) + 1;
      if (!configured_peers) {
        node.service = std::make_unique<ClockSyncService>(*node.transport, *node.clock, clock_, codec_, o, node.registry);
        continue;
      }
      for (const auto& p : all) {
        if (p.name != node.name) o.known.push_back({p.name, NodeIdFromName(p.name), *Endpoint::Parse(p.address, 7311)});
      }
      for (const auto& p : SelectPeers(all, node.name, peers_per_node, NodeIdFromName(node.name))) {
        o.selected.push_back({p.name, NodeIdFromName(p.name), *Endpoint::Parse(p.address, 7311)});
      }
      node.service = std::make_unique<ClockSyncService>(*node.transport, *node.clock, clock_, codec_, o, node.registry);
    }
  }

  // What Kubernetes discovery does: every node in `members` gets the others
  // as known nodes and peers_per_node of them as probe peers.
  void Discover(const std::vector<size_t>& members) {
    std::vector<PeerTarget> all;
    for (size_t i : members) all.push_back({nodes_[i]->name, NodeIdFromName(nodes_[i]->name), nodes_[i]->ep});
    std::vector<std::string> names;
    for (const auto& p : all) names.push_back(p.name);
    for (size_t i : members) {
      Node& node = *nodes_[i];
      std::vector<PeerTarget> known, selected;
      auto chosen = SelectPeerNames(names, node.name, peers_per_node_, NodeIdFromName(node.name));
      for (const auto& p : all) {
        if (p.name == node.name) continue;
        known.push_back(p);
        if (std::find(chosen.begin(), chosen.end(), p.name) != chosen.end()) selected.push_back(p);
      }
      node.service->SetPeers(selected, known);
    }
  }

  void Run(std::chrono::nanoseconds d, std::chrono::nanoseconds step = 1ms) {
    for (auto t = 0ns; t < d; t += step) {
      clock_.Advance(step);
      for (auto& n : nodes_) n->service->RunOnce(0ns);
    }
  }

  // Estimated minus true offset of node i against the mean clock, at one
  // true instant for all nodes.
  std::vector<double> OffsetErrors() const {
    std::vector<size_t> all;
    for (size_t i = 0; i < nodes_.size(); ++i) all.push_back(i);
    return OffsetErrors(all);
  }
  // The same over `members`, against the mean clock of `reference` (default:
  // the members). From a cold start fabric time is the mean clock of the nodes
  // present; after that it continues (anchored gauge), whoever leaves.
  std::vector<double> OffsetErrors(const std::vector<size_t>& members, std::vector<size_t> reference = {}) const {
    if (reference.empty()) reference = members;
    const int64_t now = TrueNs(clock_);
    double mean = 0;
    for (size_t i : reference) mean += static_cast<double>(nodes_[i]->clock->TrueOffsetNs(now));
    mean /= static_cast<double>(reference.size());
    std::vector<double> err;
    for (size_t i : members) {
      const auto& n = nodes_[i];
      ClockStatus s = n->service->Status(n->clock->Transform(now));
      err.push_back(s.reading.offset_ns - (static_cast<double>(n->clock->TrueOffsetNs(now)) - mean));
    }
    return err;
  }

  FakeClock clock_;
  test::FakeNetwork net_;
  test::SimNodeClock base_;
  PacketCodec codec_;
  int peers_per_node_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_CASE("agents on virtual clocks converge to fabric time within 100 ns", "[daemonset][clocksync]") {
  Testbed bed(8, 4, /*seed=*/42);
  for (auto& n : bed.nodes_) REQUIRE(n->service->Read().state == ClockSyncState::kFreerun);
  bed.Run(9s);
  auto err = bed.OffsetErrors();
  for (size_t i = 0; i < bed.nodes_.size(); ++i) {
    const Node& n = *bed.nodes_[i];
    ClockStatus s = n.service->Status();
    INFO(n.name << " error " << err[i] << " ns, bound " << s.reading.error_bound_ns << " ns, state "
                << ClockSyncStateName(s.reading.state));
    REQUIRE(s.reading.state == ClockSyncState::kLocked);
    REQUIRE(std::fabs(err[i]) < 100);
    REQUIRE(std::fabs(err[i]) <= static_cast<double>(s.reading.error_bound_ns));
    REQUIRE(s.estimate.graph_nodes == 8);
    REQUIRE(s.estimate.peers >= 4);
    REQUIRE(s.estimate.pure_fraction > 0.5);
    REQUIRE(s.estimate.pure_fraction < 1.0);  // the queueing model makes some impure
    // Fabric time agrees across nodes: earliest/latest intervals overlap.
    TimeReading r = n.service->Read();
    REQUIRE(r.earliest_ns <= r.now_ns);
    REQUIRE(r.now_ns <= r.latest_ns);
    // Legitimate traffic is never dropped.
    REQUIRE(n.service->filter().accepted() > 0);
    for (int reason = 0; reason < kNumDropReasons; ++reason) {
      REQUIRE(n.service->filter().dropped(static_cast<DropReason>(reason)) == 0);
    }
  }
  // The metrics carry the same numbers.
  const std::string m = bed.nodes_[0]->registry.Render();
  REQUIRE(m.find("lockstep_clock_state{state=\"LOCKED\"} 1") != std::string::npos);
  REQUIRE(m.find("lockstep_clock_peers ") != std::string::npos);
  REQUIRE(m.find("lockstep_clock_pure_probe_fraction ") != std::string::npos);
  REQUIRE(m.find("lockstep_probe_dropped_total{reason=\"unauthenticated\"} 0") != std::string::npos);
}

TEST_CASE("a cut-off agent goes to HOLDOVER with a growing bound", "[daemonset][clocksync]") {
  Testbed bed(4, 3, 7);
  bed.Run(7s);
  Node& lone = *bed.nodes_[0];
  REQUIRE(lone.service->Read().state == ClockSyncState::kLocked);
  const int64_t locked_bound = lone.service->Read().error_bound_ns;
  bed.net_.SetDown(lone.ep, true);
  bed.Run(8s);
  TimeReading r = lone.service->Read();
  REQUIRE(r.state == ClockSyncState::kHoldover);
  REQUIRE(r.error_bound_ns > locked_bound);
  // The others carry on without it.
  REQUIRE(bed.nodes_[1]->service->Read().state == ClockSyncState::kLocked);
  REQUIRE(bed.nodes_[1]->service->Status().estimate.graph_nodes == 3);
}

TEST_CASE("peers handed over at run time lock, and a node that leaves is dropped", "[daemonset][clocksync]") {
  Testbed bed(8, 4, /*seed=*/11, {}, /*configured_peers=*/false);
  bed.Run(1s);
  for (auto& n : bed.nodes_) {
    REQUIRE(n->service->Read().state == ClockSyncState::kFreerun);
    REQUIRE(n->service->Status().peers.empty());
  }
  bed.Discover({0, 1, 2, 3, 4, 5, 6, 7});
  bed.Run(9s);
  auto err = bed.OffsetErrors();
  for (size_t i = 0; i < bed.nodes_.size(); ++i) {
    ClockStatus s = bed.nodes_[i]->service->Status();
    INFO(bed.nodes_[i]->name << " error " << err[i] << " ns, bound " << s.reading.error_bound_ns);
    REQUIRE(s.reading.state == ClockSyncState::kLocked);
    REQUIRE(std::fabs(err[i]) < 100);
    REQUIRE(s.estimate.graph_nodes == 8);
  }

  // node-7 dies; discovery drops it from everyone's peer set. The survivors
  // keep agreeing, and fabric time does not jump to their mean clock (~2.7 ms
  // away here): it goes on from the mean clock of the 8 it started as, moved
  // only by the slow random walk of a continued gauge (~100 ns here).
  bed.net_.SetDown(bed.nodes_[7]->ep, true);
  const std::vector<size_t> rest = {0, 1, 2, 3, 4, 5, 6};
  bed.Discover(rest);
  bed.Run(12s);
  const auto from_all8 = bed.OffsetErrors(rest, {0, 1, 2, 3, 4, 5, 6, 7});
  const double jump_to_survivors_mean = from_all8[0] - bed.OffsetErrors(rest)[0];
  REQUIRE(std::fabs(jump_to_survivors_mean) > 100'000);  // what a mean-clock gauge would jump by
  double consensus = 0;  // pairwise agreement: errors around their own mean
  for (double e : from_all8) consensus += e / static_cast<double>(rest.size());
  err.clear();
  for (double e : from_all8) err.push_back(e - consensus);
  for (size_t k = 0; k < rest.size(); ++k) {
    ClockStatus s = bed.nodes_[rest[k]]->service->Status();
    INFO(bed.nodes_[rest[k]]->name << " error " << err[k] << " ns from the survivors' consensus, " << from_all8[k]
                                   << " ns against the mean clock of all 8");
    REQUIRE(s.reading.state == ClockSyncState::kLocked);
    REQUIRE(std::find(s.peers.begin(), s.peers.end(), "node-7") == s.peers.end());
    REQUIRE(s.estimate.graph_nodes == 7);
    REQUIRE(std::fabs(err[k]) < 100);
    REQUIRE(std::fabs(from_all8[k]) < 1000);
  }
}

TEST_CASE("garbage and replays reaching an agent are counted by reason", "[daemonset][clocksync]") {
  Testbed bed(3, 2, 9);
  test::ManualNodeClock attacker_clock;
  auto attacker = bed.net_.Attach(*Endpoint::Parse("10.0.0.99", 7311), attacker_clock);
  const Endpoint victim = bed.nodes_[0]->ep;
  bed.Run(100ms);
  std::vector<uint8_t> captured = bed.net_.last_delivered(victim);
  REQUIRE_FALSE(captured.empty());
  (void)attacker->Send(victim, captured);                        // replayed
  (void)attacker->Send(victim, std::vector<uint8_t>(64, 0x00));  // bad magic
  (void)attacker->Send(victim, std::vector<uint8_t>(8, 0x4c));   // truncated
  auto forged = captured;
  forged[40] ^= 1;
  (void)attacker->Send(victim, forged);                           // unauthenticated
  PacketCodec wrong_key(*ProbeKey::FromBytes("not-the-cluster-key-0000"));
  Packet p = test::SampleProbe();
  p.dest = NodeIdFromName("node-0");
  (void)attacker->Send(victim, *wrong_key.Encode(p));             // unauthenticated
  bed.Run(10ms);
  const PacketFilter& f = bed.nodes_[0]->service->filter();
  REQUIRE(f.dropped(DropReason::kReplayed) == 1);
  REQUIRE(f.dropped(DropReason::kBadMagic) == 1);
  REQUIRE(f.dropped(DropReason::kTruncated) == 1);
  REQUIRE(f.dropped(DropReason::kUnauthenticated) == 2);
  const std::string m = bed.nodes_[0]->registry.Render();
  REQUIRE(m.find("lockstep_probe_dropped_total{reason=\"unauthenticated\"} 2") != std::string::npos);
  REQUIRE(m.find("lockstep_probe_dropped_total{reason=\"replayed\"} 1") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::agent
