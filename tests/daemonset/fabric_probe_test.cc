// The fabric path probe codec and the pure fabric setup (peers, pin routes).
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "lockstep/agent/app/fabric_agent.h"
#include "lockstep/agent/app/fabric_status_text.h"
#include "lockstep/agent/fabric_probe.h"
#include "lockstep/agent/fabric_setup.h"
#include "lockstep/fabric/path_health.h"

namespace lockstep::agent {
namespace {

ProbeKey Key(const std::string& k) { return *ProbeKey::FromBytes(k); }
const std::string kKey = "a-shared-probe-key-of-32-bytes!!";

FabricProbe Sample() {
  FabricProbe p;
  p.rail = 1;
  p.sender = WireNodeId(NodeIdFromName("a"));
  p.dest = WireNodeId(NodeIdFromName("b"));
  p.epoch = 1'780'000'000'123'456'789ull;  // the sender's start, wall clock ns
  p.seq = 99;
  p.tx_fabric = 1'000'000;
  p.ack = fabric::AckField{41, 0b1011, Nanos(35'000), std::chrono::microseconds(7'250)};
  p.ack_rail = 0;  // b's path whose probes arrive where this one leaves (a striped fabric)
  p.ack_path_index = 2;
  return p;
}

TEST_CASE("fabric probes round-trip with their epoch and ack in 54 bytes", "[daemonset][fabric]") {
  FabricProbeCodec codec(Key(kKey));
  auto bytes = codec.Encode(Sample());
  REQUIRE(bytes.size() == kFabricProbeSize);
  REQUIRE(bytes.size() == 54);
  CHECK(bytes[2] == 3);  // version 3: the epoch
  auto back = codec.Decode(bytes);
  REQUIRE(std::holds_alternative<FabricProbe>(back));
  CHECK(std::get<FabricProbe>(back) == Sample());

  FabricProbe bare = Sample();  // not LOCKED, nothing received yet
  bare.tx_fabric.reset();
  bare.ack.reset();
  bare.ack_path_index = 0;  // only sent with an ack
  CHECK(std::get<FabricProbe>(codec.Decode(codec.Encode(bare))) == bare);
  FabricProbe ack_only = Sample();  // to a peer we do not probe
  ack_only.seq.reset();
  ack_only.tx_fabric.reset();
  ack_only.ack->one_way_delay.reset();
  CHECK(std::get<FabricProbe>(codec.Decode(codec.Encode(ack_only))) == ack_only);

  // Out of the wire's range: a hold is not known, an implausible delay is not sent.
  FabricProbe wide = Sample();
  wide.ack->held = std::chrono::seconds(9);
  wide.ack->one_way_delay = std::chrono::seconds(3);
  auto w = std::get<FabricProbe>(codec.Decode(codec.Encode(wide)));
  CHECK_FALSE(w.ack->held);
  CHECK_FALSE(w.ack->one_way_delay);
  wide.ack->held.reset();
  CHECK_FALSE(std::get<FabricProbe>(codec.Decode(codec.Encode(wide))).ack->held);

  // The slow flag (an idle path's probe: the receiver may ack it at its idle
  // tick) round-trips, in bit 0x10 of the flags; only a probe carries it.
  FabricProbe slow = Sample();
  slow.slow = true;
  const auto slow_bytes = codec.Encode(slow);
  CHECK((slow_bytes[3] & 0x10) != 0);
  CHECK((bytes[3] & 0x10) == 0);
  CHECK(std::get<FabricProbe>(codec.Decode(slow_bytes)) == slow);
  FabricProbe slow_ack_only = ack_only;
  slow_ack_only.slow = true;
  CHECK((codec.Encode(slow_ack_only)[3] & 0x10) == 0);
  CHECK_FALSE(std::get<FabricProbe>(codec.Decode(codec.Encode(slow_ack_only))).slow);
}

TEST_CASE("an ack's hold crosses the wire to within half a unit of its scale up to 8.39 s, an idle tick's whole",
          "[daemonset][fabric]") {
  using std::chrono::microseconds;
  // Scale 0: whole microseconds (the nearest) to 16.383 ms, as before.
  CHECK(HeldToWire(Nanos(0)) == 0);
  CHECK(HeldToWire(Nanos(-5)) == 0);
  CHECK(HeldFromWire(HeldToWire(Nanos(1'499))) == microseconds(1));
  CHECK(HeldFromWire(HeldToWire(Nanos(1'500))) == microseconds(2));
  CHECK(HeldToWire(microseconds(16'383)) == 16'383);
  CHECK(HeldFromWire(HeldToWire(microseconds(7'250))) == microseconds(7'250));
  // Longer: 8 us units to 131 ms (a hold to the peer's idle tick, up to
  // ~110 ms, was cut at 65.535 ms before), 64 us to 1.05 s, 512 us to 8.39 s.
  CHECK(HeldFromWire(HeldToWire(microseconds(16'384))) == microseconds(16'384));
  CHECK(HeldFromWire(HeldToWire(microseconds(103'459))) == microseconds(103'456));
  CHECK(HeldFromWire(HeldToWire(microseconds(103'461))) == microseconds(103'464));
  CHECK(HeldFromWire(HeldToWire(std::chrono::seconds(1))) == std::chrono::seconds(1));
  CHECK(HeldFromWire(HeldToWire(Nanos(8'387'000'000))) == microseconds(8'387'072));
  CHECK(HeldToWire(Nanos(8'388'000'000)) == kHeldUnknown);
  CHECK(HeldToWire(std::nullopt) == kHeldUnknown);
  CHECK_FALSE(HeldFromWire(kHeldUnknown));
  // Every hold up to 8 s: within half a unit of its scale, the unit the finest that holds it.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200'000; ++i) {
    const Nanos held(std::uniform_int_distribution<int64_t>(0, 8'000'000'000)(rng) >> (i % 20));
    const std::optional<Nanos> back = HeldFromWire(HeldToWire(held));
    REQUIRE(back);
    const Nanos unit = held < microseconds(16'383)      ? microseconds(1)
                       : held < microseconds(131'064)   ? microseconds(8)
                       : held < microseconds(1'048'512) ? microseconds(64)
                                                        : microseconds(512);
    INFO(held.count() << " ns -> " << back->count() << " ns");
    REQUIRE(std::chrono::abs(*back - held) <= unit / 2);
  }
}

TEST_CASE("an idle probe's ack held to the peer's idle tick: the sender's round trip is the network's",
          "[daemonset][fabric]") {
  // The peer reads our idle probe 40 us after it left and acks it at its idle
  // tick, 103.46 ms later; the ack crosses the wire and takes 40 us back.
  FabricProbeCodec codec(Key(kKey));
  fabric::AckWindow peer;
  const MonoTime sent = MonoTime{} + std::chrono::hours(1);
  REQUIRE(peer.OnReceive(99, sent + std::chrono::microseconds(40), Nanos(40'000)) == fabric::Receipt::kNew);
  FabricProbe p = Sample();
  p.ack = peer.Ack(sent + std::chrono::microseconds(40 + 103'460));
  const auto got = std::get<FabricProbe>(codec.Decode(codec.Encode(p)));
  REQUIRE(got.ack);
  fabric::PathHealth ours(fabric::PathKey{.rail = 0, .peer = "b", .index = 0}, fabric::FabricOptions{});
  ours.OnProbeSent(99, sent, false, true);
  (void)ours.OnAck(*got.ack, sent + std::chrono::microseconds(40 + 103'460 + 40));
  const fabric::PathStats s = ours.Stats(sent + std::chrono::seconds(1));
  REQUIRE(s.replies == 1);
  REQUIRE(s.rtt_p50);
  // 80 us, within the 4 us the wire rounds a hold of this length to (not 38 ms: the hold cut at 65.535 ms).
  CHECK(std::chrono::abs(*s.rtt_p50 - std::chrono::microseconds(80)) <= std::chrono::microseconds(4));
  CHECK(s.owd_p50 == std::chrono::microseconds(40));
}

TEST_CASE("one-way delays come from 32-bit fabric stamps, modulo 2^32", "[daemonset][fabric]") {
  CHECK(OneWayDelayNs(1'000'000u, 1'000'040) == 40);
  CHECK(OneWayDelayNs(0xFFFFFF00u, (int64_t{5} << 32) + 0x40) == 0x140);  // the low bits wrapped
  CHECK_FALSE(OneWayDelayNs(std::nullopt, 5));             // the sender was not LOCKED
  CHECK_FALSE(OneWayDelayNs(1'000'000u, std::nullopt));    // we are not LOCKED
  CHECK_FALSE(OneWayDelayNs(1'000'000u, 999'999));         // negative: a clock step
}

TEST_CASE("fabric probes that are tampered, foreign, old or malformed are dropped with a reason",
          "[daemonset][fabric]") {
  FabricProbeCodec codec(Key(kKey));
  auto reason = [&](std::span<const uint8_t> b) {
    auto r = codec.Decode(b);
    REQUIRE(std::holds_alternative<FabricDrop>(r));
    return std::get<FabricDrop>(r);
  };
  auto bytes = codec.Encode(Sample());
  for (size_t i : {4u, 14u, 21u, 22u, 30u, 37u, 45u, 46u, 53u}) {  // any signed byte (the epoch too), or the MAC
    auto tampered = bytes;
    tampered[i] ^= 1;
    CHECK(reason(tampered) == FabricDrop::kUnauthenticated);
  }
  FabricProbeCodec other(Key("another-key-that-is-long-enough"));
  CHECK(reason(other.Encode(Sample())) == FabricDrop::kUnauthenticated);
  CHECK(reason(std::span(bytes).first(40)) == FabricDrop::kTruncated);
  CHECK(reason(std::span(bytes).first(2)) == FabricDrop::kTruncated);
  auto magic = bytes;
  magic[0] = 0;
  CHECK(reason(magic) == FabricDrop::kBadMagic);
  // A version 1 agent's 72-byte probe ("LKFP", version 1): bad_magic, not truncated.
  std::vector<uint8_t> v1(72, 0);
  v1[0] = 0x4C, v1[1] = 0x4B, v1[2] = 0x46, v1[3] = 0x50, v1[4] = 1;
  CHECK(reason(v1) == FabricDrop::kBadMagic);
  auto version = bytes;
  version[2] = 1;
  CHECK(reason(version) == FabricDrop::kBadMagic);
  // A version 2 agent's 46-byte probe (no epoch): bad_magic, never believed.
  std::vector<uint8_t> v2(bytes.begin(), bytes.begin() + 46);
  v2[2] = 2;
  CHECK(reason(v2) == FabricDrop::kBadMagic);
  FabricProbe no_epoch = Sample();
  no_epoch.epoch = 0;
  CHECK(reason(codec.Encode(no_epoch)) == FabricDrop::kMalformed);
  FabricProbe empty = Sample();  // neither probe nor ack
  empty.seq.reset();
  empty.tx_fabric.reset();
  empty.ack.reset();
  CHECK(reason(codec.Encode(empty)) == FabricDrop::kMalformed);
  FabricProbe zero = Sample();
  zero.seq = 0;  // seqs start at 1
  CHECK(reason(codec.Encode(zero)) == FabricDrop::kMalformed);
  CHECK(std::string(FabricDropName(FabricDrop::kUnknownSender)) == "unknown_sender");
  CHECK(std::string(FabricDropName(FabricDrop::kStale)) == "stale");
  CHECK(std::string(FabricDropName(FabricDrop::kReplayed)) == "replayed");
}

TEST_CASE("each boot's seqs start at an unrelated, nonzero point", "[daemonset][fabric]") {
  const uint64_t e = 1'780'000'000'000'000'000ull;
  CHECK(FirstSeq(e) != 0);
  CHECK(FirstSeq(e) == FirstSeq(e));  // stable
  CHECK(FirstSeq(e) != FirstSeq(e + 1));
  // A restart a second later: far apart, modulo 2^32 (an ack of the old
  // boot's seqs names none the new boot has out).
  const uint32_t d = FirstSeq(e + 1'000'000'000) - FirstSeq(e);
  CHECK(d > 1'000'000u);
  CHECK(d < 0xFFFFFFFFu - 1'000'000u);
}

TEST_CASE("random and mutated fabric datagrams decode to a drop reason or a valid probe, never a crash",
          "[daemonset][fabric]") {
  FabricProbeCodec codec(Key(kKey));
  std::mt19937_64 rng(8);  // seeded: the same inputs every run
  const auto valid = codec.Encode(Sample());
  int accepted = 0;
  for (int i = 0; i < 20'000; ++i) {
    std::vector<uint8_t> b;
    if (i % 2 == 0) {
      b.assign(valid.begin(), valid.end());
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    } else {
      b.resize(rng() % 80);
      for (auto& x : b) x = static_cast<uint8_t>(rng());
      if (b.size() >= 3) b[0] = 0x4C, b[1] = 0x46, b[2] = kFabricProbeVersion;  // past the magic check
    }
    auto r = codec.Decode(b);
    // (Two flips of one byte by the same value give the valid probe back.)
    if (std::holds_alternative<FabricProbe>(r) && !std::equal(b.begin(), b.end(), valid.begin(), valid.end())) {
      ++accepted;
    }
  }
  CHECK(accepted == 0);  // nothing forged gets past an 8-byte MAC by chance
}

TEST_CASE("after a key rotation the previous key is still accepted", "[daemonset][fabric]") {
  FabricProbeCodec old_codec(Key(kKey));
  FabricProbeCodec codec(Key(kKey));
  codec.Rotate(Key("the-next-key-of-at-least-16-bytes"));
  CHECK(std::holds_alternative<FabricProbe>(codec.Decode(old_codec.Encode(Sample()))));
  old_codec.Rotate(Key("the-next-key-of-at-least-16-bytes"));
  CHECK(std::holds_alternative<FabricProbe>(codec.Decode(old_codec.Encode(Sample()))));
}

AgentConfig TwoPeers() {
  AgentConfig c;
  c.node_name = "a";
  c.fabric.rails = {"rail0", "rail1"};
  c.peers = {{"a", "10.0.0.1", 0, "", "10.0.200.1"},
             {"b", "10.0.0.2", 0, "", "10.0.200.2"},
             {"c", "10.0.0.3", 0, "", ""}};  // no host address: clock sync only
  return c;
}

std::vector<RailInfo> Rails() {
  return {{"rail0", 1, *ParseIpv4("10.0.0.1"), {*ParseIpv4("10.0.100.1"), "rail0", true}},
          {"rail1", 2, *ParseIpv4("10.0.1.1"), {*ParseIpv4("10.0.100.2"), "rail1", true}}};
}

TEST_CASE("fabric peers are the configured peers with a host address", "[daemonset][fabric]") {
  const uint32_t self = *ParseIpv4("10.0.200.1");
  auto peers = FabricPeers(TwoPeers(), self);
  REQUIRE(peers.ok());
  REQUIRE(peers->size() == 1);
  CHECK((*peers)[0].name == "b");
  CHECK((*peers)[0].host_address == *ParseIpv4("10.0.200.2"));

  AgentConfig dup = TwoPeers();
  dup.peers[2].host_address = "10.0.200.2";
  auto e = FabricPeers(dup, self);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("share hostAddress 10.0.200.2") != std::string::npos);
  AgentConfig mine = TwoPeers();
  mine.peers[1].host_address = "10.0.200.1";
  REQUIRE_FALSE(FabricPeers(mine, self).ok());
}

TEST_CASE("a pin is a /32 via the rail's gateway from the host address, and maps back", "[daemonset][fabric]") {
  FabricSetup s;
  s.host_address = *ParseIpv4("10.0.200.1");
  s.rails = Rails();
  s.peers = *FabricPeers(TwoPeers(), s.host_address);
  auto route = PinRoute(s, {1, "b", 0});
  REQUIRE(route.has_value());
  CHECK(route->ToString() == "10.0.200.2/32 via 10.0.100.2 dev rail1 onlink src 10.0.200.1 rto_min 10ms");
  auto pin = PinFromRoute(s, *route);
  REQUIRE(pin.has_value());
  CHECK(pin->first == "b");
  CHECK(pin->second == fabric::PathKey{1, "b", 0});
  CHECK_FALSE(PinRoute(s, {2, "b", 0}).has_value());
  CHECK_FALSE(PinRoute(s, {0, "zz", 0}).has_value());
  OwnedRoute foreign = *route;
  foreign.destination = {*ParseIpv4("10.0.200.9"), 32};
  CHECK_FALSE(PinFromRoute(s, foreign).has_value());
}

TEST_CASE("fabric options from agent.yaml: errors say what to write", "[daemonset][fabric]") {
  auto o = MakeFabricServiceOptions(TwoPeers(), Rails(), *ParseIpv4("10.0.200.1"), 3);
  REQUIRE(o.ok());
  CHECK(o->setup.peers.size() == 1);
  CHECK(o->peer_port == api::kFabricProbePort);
  CHECK(o->fabric.miss_threshold == api::kMissThreshold);
  AgentConfig none = TwoPeers();
  for (auto& p : none.peers) p.host_address.clear();
  auto e = MakeFabricServiceOptions(none, Rails(), *ParseIpv4("10.0.200.1"), 3);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("no peer has a hostAddress") != std::string::npos);
  CHECK(FailoverCoverage({}).find("no RDMA device present") != std::string::npos);
  CHECK(FailoverCoverage({"mlx5_0"}).find("mlx5_0") != std::string::npos);
}

TEST_CASE("the fabric socket listens where probes are addressed: the host address or any", "[daemonset][fabric]") {
  const uint32_t host = *ParseIpv4("10.0.200.7");
  CHECK(FabricBindAddress("0.0.0.0", host) == "0.0.0.0");
  // A rail's address for clock sync (--bind-address) is not where peers
  // send fabric probes.
  CHECK(FabricBindAddress("10.0.0.7", host) == "10.0.200.7");
  CHECK(FabricBindAddress("10.0.200.7", host) == "10.0.200.7");
}

TEST_CASE("fabric status prints rails, paths and where each peer's traffic goes", "[daemonset][fabric]") {
  nlohmann::json s = {
      {"node", "a"},
      {"host_address", "10.0.200.1"},
      {"failover", true},
      {"probe_interval_ms", 10},
      {"miss_threshold", 3},
      {"flaps_last_hour", 1},
      {"last_flap_seconds_ago", 2.5},
      {"rails", {{{"rail", 0}, {"interface", "rail0"}, {"down", true}}}},
      {"latency",
       {{"verdict", "SLABreached"}, {"breaches", 1}, {"judged", 2}, {"paths_with_sla", 2}, {"min_samples", 50}}},
      {"paths",
       {{{"peer", "b"},
         {"interface", "rail0"},
         {"state", "down"},
         {"loss", 0.5},
         {"rtt_p50_ns", 91000},
         {"owd_sla_ns", 12000},
         {"latency", "SLABreached"}}}},
      {"peers", {{{"peer", "b"}, {"host_address", "10.0.200.2"}, {"via", "rail1"}, {"route", "10.0.200.2/32 ..."}}}}};
  std::string text = FormatFabricStatus(s);
  CHECK(text.find("last 2.5 s ago") != std::string::npos);
  CHECK(text.find("50.0%") != std::string::npos);
  CHECK(text.find("91.0") != std::string::npos);
  CHECK(text.find("rail1") != std::string::npos);
  CHECK(text.find("10.0.200.2/32 ...") != std::string::npos);
  CHECK(text.find("latency SLA:   SLABreached (1 of 2 judged paths in breach, 2 with an SLA, minSamples 50)") !=
        std::string::npos);
  CHECK(text.find("12.0") != std::string::npos);  // the path's SLA in us
  CHECK(FormatFabricStatus(nlohmann::json::object()).find("node:") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::agent
