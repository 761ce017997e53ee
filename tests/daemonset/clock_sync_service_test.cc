// The clock-sync service end to end on simulated time: N agents with known
// virtual clocks over an in-memory network, scored against ground truth.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>

#include "fake_clock.h"
#include "fake_network.h"
#include "lockstep/agent/runtime/clock_sync_service.h"
#include "lockstep/agent/node_signer.h"
#include "lockstep/agent/peer_selection.h"
#include "lockstep/agent/net/virtual_clock.h"
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
  std::unique_ptr<NodeSigner> signer;
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
      std::vector<uint8_t> key_seed(32);  // its own generator: the clock draws stay as they were
      std::mt19937_64 key_rng(seed + static_cast<uint64_t>(i));
      for (auto& b : key_seed) b = static_cast<uint8_t>(key_rng());
      node->signer = std::make_unique<NodeSigner>(*NodeSigner::FromSeed(key_seed));
      nodes_.push_back(std::move(node));
    }
    for (int i = 0; i < n; ++i) {
      Node& node = *nodes_[static_cast<size_t>(i)];
      ClockSyncOptions o;
      o.self_name = node.name;
      o.seed = static_cast<uint64_t>(i) + 1;
      o.signer = node.signer.get();
      if (!configured_peers) {
        node.service = std::make_unique<ClockSyncService>(*node.transport, *node.clock, clock_, codec_, o, node.registry);
        continue;
      }
      for (size_t j = 0; j < all.size(); ++j) {
        const auto& p = all[j];
        if (p.name != node.name) o.known.push_back(Target(j));
      }
      for (const auto& p : SelectPeers(all, node.name, peers_per_node, NodeIdFromName(node.name))) {
        o.selected.push_back({p.name, NodeIdFromName(p.name), *Endpoint::Parse(p.address, 7311)});
      }
      node.service = std::make_unique<ClockSyncService>(*node.transport, *node.clock, clock_, codec_, o, node.registry);
    }
  }

  // What Kubernetes discovery does: every node in `members` gets the others
  // as known nodes and peers_per_node of them as probe peers.
  // What discovery knows about node i: name, endpoint, public key.
  PeerTarget Target(size_t i) const {
    const Node& n = *nodes_[i];
    return {n.name, NodeIdFromName(n.name), n.ep, n.signer->public_key().base64()};
  }

  void Discover(const std::vector<size_t>& members) {
    std::vector<PeerTarget> all;
    for (size_t i : members) all.push_back(Target(i));
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

  // As the agent runs clock sync beside fabric failover: Exchange() only on
  // the prober's wake-ups, every `tick`, and the windows closed apart.
  void RunShared(std::chrono::nanoseconds d, std::chrono::nanoseconds tick, std::chrono::nanoseconds step = 1ms) {
    for (auto t = 0ns; t < d; t += step) {
      clock_.Advance(step);
      for (auto& n : nodes_) {
        if ((shared_elapsed_ % tick).count() == 0) n->service->Exchange();
        n->service->CloseWindowIfDue();
      }
      shared_elapsed_ += step;
    }
  }
  std::chrono::nanoseconds shared_elapsed_{0};

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

TEST_CASE("clock sync riding the fabric prober's wake-ups keeps its rate and converges",
          "[daemonset][clocksync]") {
  Testbed bed(8, 4, /*seed=*/42);
  bed.RunShared(9s, 14ms);  // the prober's default interval; clock sync's is 20 ms
  auto sent_pairs = [&](const Node& n) {
    const std::string m = n.registry.Render();
    const std::string key = "lockstep_probe_sent_total{type=\"probe\"} ";
    auto at = m.find(key);
    REQUIRE(at != std::string::npos);
    return std::stod(m.substr(at + key.size())) / 2;
  };
  std::vector<double> before;
  for (auto& n : bed.nodes_) before.push_back(sent_pairs(*n));
  bed.RunShared(4s, 14ms);
  auto err = bed.OffsetErrors();
  for (size_t i = 0; i < bed.nodes_.size(); ++i) {
    const Node& n = *bed.nodes_[i];
    ClockStatus s = n.service->Status();
    INFO(n.name << " error " << err[i] << " ns, bound " << s.reading.error_bound_ns << " ns, state "
                << ClockSyncStateName(s.reading.state) << ", targets " << s.peers.size());
    REQUIRE(s.reading.state == ClockSyncState::kLocked);
    REQUIRE(std::fabs(err[i]) < 100);
    REQUIRE(std::fabs(err[i]) <= static_cast<double>(s.reading.error_bound_ns));
    REQUIRE(s.estimate.graph_nodes == 8);
    // Every target still gets a pair per 20 ms, though sends wait for a
    // 14 ms tick: the schedule keeps its phase instead of restarting late.
    const double expected = static_cast<double>(s.peers.size()) * 4.0 / 0.020;
    const double got = sent_pairs(n) - before[i];
    INFO("pairs sent in 4 s: " << got << ", expected " << expected);
    REQUIRE(got >= 0.97 * expected);
    REQUIRE(got <= 1.03 * expected);
  }
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

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

// An authenticated probe as a key holder would forge it: current sequence and
// timestamps, so only the sender check can stop it.
std::vector<uint8_t> ForgedProbe(const PacketCodec& codec, NodeId sender, NodeId dest, const Clock& wall,
                                 const NodeClock& node_clock, uint64_t pair_seq) {
  ProbeBody b;
  b.pair_seq = pair_seq;
  b.spacing_ns = 5'000;
  b.tx_app_ns = node_clock.NowNs();
  auto seq = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(wall.Wall().time_since_epoch()).count());
  return *codec.Encode(Packet{sender, dest, seq + pair_seq, b});
}

size_t Drain(ProbeTransport& t) {
  TransportEvents ev;
  (void)t.Poll(0ns, ev);
  return ev.received.size();
}

TEST_CASE("a probe from an unknown sender, or from a forged source address, draws zero replies",
          "[daemonset][clocksync][netsurface]") {
  // Before discovery (no known nodes: every sender is unknown) and after.
  const bool discovered = GENERATE(false, true);
  Testbed bed(3, 2, 5, {}, /*configured_peers=*/discovered);
  test::ManualNodeClock attacker_clock;
  const Endpoint attacker_ep = *Endpoint::Parse("10.0.0.99", 7311);
  auto attacker = bed.net_.Attach(attacker_ep, attacker_clock);
  Node& victim = *bed.nodes_[0];
  size_t replies = 0;
  for (int i = 0; i < 300; ++i) {  // 6 s of probes every 20 ms
    // An unknown node id, and a known one (node-2) sent from our address.
    (void)attacker->Send(victim.ep, ForgedProbe(bed.codec_, NodeIdFromName("intruder"), NodeIdFromName("node-0"),
                                                bed.clock_, *victim.clock, 2 * i + 1));
    (void)attacker->Send(victim.ep, ForgedProbe(bed.codec_, NodeIdFromName("node-2"), NodeIdFromName("node-0"),
                                                bed.clock_, *victim.clock, 2 * i + 2));
    bed.Run(20ms);
    replies += Drain(*attacker);
  }
  REQUIRE(replies == 0);
  REQUIRE(victim.service->filter().dropped(DropReason::kUnknownSender) == (discovered ? 300 : 600));
  const auto peers = victim.service->Status().peers;
  REQUIRE(std::find(peers.begin(), peers.end(), "node-intruder") == peers.end());
  REQUIRE(peers.size() <= 2);
}

TEST_CASE("per-sender state stays bounded under many senders", "[daemonset][clocksync][netsurface]") {
  Testbed bed(3, 2, 6);
  test::ManualNodeClock attacker_clock;
  auto attacker = bed.net_.Attach(*Endpoint::Parse("10.0.0.98", 7311), attacker_clock);
  Node& victim = *bed.nodes_[0];
  for (int i = 0; i < 20'000; ++i) {
    (void)attacker->Send(victim.ep, ForgedProbe(bed.codec_, NodeIdFromName("fake-" + std::to_string(i)),
                                                NodeIdFromName("node-0"), bed.clock_, *victim.clock, 1));
    if (i % 1000 == 999) bed.Run(1ms);
  }
  bed.Run(2100ms);
  REQUIRE(victim.service->filter().dropped(DropReason::kUnknownSender) == 20'000);
  REQUIRE(victim.service->filter().tracked_senders() <= 2);  // the two real peers
  REQUIRE(victim.service->Status().peers.size() <= 2);
  REQUIRE(victim.service->Status().estimate.graph_nodes <= 3);
}

TEST_CASE("one packet with sequence 2^64-1 does not silence its sender", "[daemonset][clocksync][netsurface]") {
  Testbed bed(3, 2, 7);
  bed.Run(3s);
  Node& victim = *bed.nodes_[0];
  ProbeBody b;
  b.pair_seq = 1;
  b.tx_app_ns = victim.clock->NowNs();
  Packet p{NodeIdFromName("node-1"), NodeIdFromName("node-0"), UINT64_MAX, b};
  test::ManualNodeClock attacker_clock;
  auto attacker = bed.net_.Attach(*Endpoint::Parse("10.0.0.97", 7311), attacker_clock);
  (void)attacker->Send(victim.ep, *bed.codec_.Encode(p));
  const uint64_t replayed_before = victim.service->filter().dropped(DropReason::kReplayed);
  const uint64_t accepted_before = victim.service->filter().accepted();
  bed.Run(1s);
  REQUIRE(victim.service->filter().dropped(DropReason::kSeqAhead) == 1);
  REQUIRE(victim.service->filter().dropped(DropReason::kReplayed) == replayed_before);
  REQUIRE(victim.service->filter().accepted() > accepted_before + 50);  // node-1 still heard
  const std::string m = victim.registry.Render();
  REQUIRE(m.find("lockstep_probe_dropped_total{reason=\"seq_ahead\"} 1") != std::string::npos);
}

TEST_CASE("gossip with extreme or foreign timestamps is dropped, and the mesh still locks",
          "[daemonset][clocksync][netsurface]") {
  Testbed bed(4, 2, 8);
  test::ManualNodeClock attacker_clock;
  auto attacker = bed.net_.Attach(*Endpoint::Parse("10.0.0.96", 7311), attacker_clock);
  Node& victim = *bed.nodes_[0];
  auto wall_seq = [&] {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(bed.clock_.Wall().time_since_epoch()).count());
  };
  const NodeId n1 = NodeIdFromName("node-1"), n2 = NodeIdFromName("node-2"), self = NodeIdFromName("node-0");
  ReportBody far_model;
  far_model.models.push_back({n2, INT64_MAX, 0, 0, 1, 1e-9f});
  ReportBody far_edge;
  far_edge.edges.push_back({std::min(n1, n2), std::max(n1, n2), INT64_MIN, 1e18, 0.5, 1, 1, 1e-9f, true});
  ReportBody stranger;
  stranger.models.push_back({NodeIdFromName("ghost"), victim.clock->NowNs(), 0, 0, 1, 1e-9f});
  (void)attacker->Send(victim.ep, *bed.codec_.Encode(Packet{n1, self, wall_seq(), far_model}));
  (void)attacker->Send(victim.ep, *bed.codec_.Encode(Packet{n1, self, wall_seq() + 1, far_edge}));
  (void)attacker->Send(victim.ep, *bed.codec_.Encode(Packet{n1, self, wall_seq() + 2, stranger}));
  bed.Run(8s);
  REQUIRE(victim.service->filter().dropped(DropReason::kImplausibleTime) == 2);
  const std::string m = victim.registry.Render();
  REQUIRE(m.find("lockstep_probe_dropped_total{reason=\"unknown_node\"} 1") != std::string::npos);
  for (auto& n : bed.nodes_) REQUIRE(n->service->Read().state == ClockSyncState::kLocked);
  REQUIRE(victim.service->Status().estimate.graph_nodes == 4);
}

}  // namespace
}  // namespace lockstep::agent

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

TEST_CASE("a node holding the probe key cannot speak for another node's clock",
          "[daemonset][clocksync][netsurface]") {
  Testbed bed(4, 2, 12);
  bed.Run(4s);
  test::ManualNodeClock attacker_clock;
  auto attacker = bed.net_.Attach(*Endpoint::Parse("10.0.0.95", 7311), attacker_clock);
  Node& victim = *bed.nodes_[0];
  const NodeId n1 = NodeIdFromName("node-1"), n2 = NodeIdFromName("node-2"), n3 = NodeIdFromName("node-3");
  const NodeId self = NodeIdFromName("node-0");
  auto seq = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(bed.clock_.Wall().time_since_epoch()).count());
  // node-1 (the key holder, its own signer at hand) claims node-2 serves a
  // model 1 ms away, signed by node-1, and invents an edge node-2 -- node-3.
  ReportBody lie;
  ModelRecord m{n2, victim.clock->NowNs(), 1e6, 0, 1, 1e-9f};
  m.sig = bed.nodes_[1]->signer->Sign(SigningBytes(m));
  lie.models.push_back(m);
  EdgeRecord e{std::min(n2, n3), std::max(n2, n3), victim.clock->NowNs(), 5e5, 0, 10, 1, 1e-9f, true};
  e.sig = bed.nodes_[1]->signer->Sign(SigningBytes(e));
  lie.edges.push_back(e);
  // Its own model, correctly signed, is accepted.
  ModelRecord own{n1, victim.clock->NowNs(), 0, 0, 50, 1e-9f};
  own.sig = bed.nodes_[1]->signer->Sign(SigningBytes(own));
  lie.models.push_back(own);
  (void)attacker->Send(victim.ep, *bed.codec_.Encode(Packet{n1, self, seq, lie}));
  bed.Run(10ms);
  const std::string m1 = victim.registry.Render();
  INFO(m1);
  REQUIRE(m1.find("lockstep_probe_dropped_total{reason=\"bad_signature\"} 2") != std::string::npos);
  // A node with no published key, while others have one: unknown_signer.
  std::vector<PeerTarget> known, selected;
  for (size_t i = 1; i < 4; ++i) known.push_back(bed.Target(i));
  known[2].public_key.clear();  // node-3
  victim.service->SetPeers({known[0]}, known);
  ModelRecord m3{n3, victim.clock->NowNs(), 0, 0, 50, 1e-9f};
  m3.sig = bed.nodes_[3]->signer->Sign(SigningBytes(m3));
  ReportBody from3;
  from3.models.push_back(m3);
  bed.Run(1ms);
  (void)attacker->Send(victim.ep, *bed.codec_.Encode(Packet{n1, self, seq + 1, from3}));
  bed.Run(10ms);
  const std::string m2 = victim.registry.Render();
  REQUIRE(m2.find("lockstep_probe_dropped_total{reason=\"unknown_signer\"} 1") != std::string::npos);
  // Signed gossip flows between honest nodes: all lock with the full graph.
  for (auto& n : bed.nodes_) REQUIRE(n->service->Status().estimate.graph_nodes == 4);
}

}  // namespace
}  // namespace lockstep::agent
