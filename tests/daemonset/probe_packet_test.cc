#include <catch2/catch.hpp>

#include "lockstep/agent/packet_filter.h"
#include "lockstep/agent/probe_packet.h"
#include "packet_samples.h"

namespace lockstep::agent {
namespace {

using test::Key;
using test::SampleProbe;
using test::SampleReport;

DropReason Reason(const std::variant<Packet, DropReason>& v) {
  REQUIRE(std::holds_alternative<DropReason>(v));
  return std::get<DropReason>(v);
}

TEST_CASE("probe and report packets round-trip through the codec", "[daemonset][packet]") {
  PacketCodec codec(Key());
  for (const Packet& p : {SampleProbe(), SampleReport()}) {
    auto bytes = codec.Encode(p);
    REQUIRE(bytes.ok());
    auto back = codec.Decode(*bytes);
    REQUIRE(std::holds_alternative<Packet>(back));
    REQUIRE(std::get<Packet>(back) == p);
  }
  REQUIRE(codec.Encode(SampleProbe())->size() == kHeaderSize + kProbeBodySize + kMacSize);
}

TEST_CASE("a full report fits the maximum packet size", "[daemonset][packet]") {
  PacketCodec codec(Key());
  Packet p = SampleReport();
  auto& r = std::get<ReportBody>(p.body);
  r.rx.resize(kMaxRxRecords, r.rx[0]);
  r.edges.resize(kMaxEdgeRecords, r.edges[0]);
  r.models.resize(kMaxModelRecords, r.models[0]);
  auto bytes = codec.Encode(p);
  REQUIRE(bytes.ok());
  REQUIRE(bytes->size() <= kMaxPacketSize);
  REQUIRE(std::get<Packet>(codec.Decode(*bytes)) == p);
  r.rx.push_back(r.rx[0]);
  REQUIRE_FALSE(codec.Encode(p).ok());
  r.rx.pop_back();
  r.models.push_back(r.models[0]);
  REQUIRE_FALSE(codec.Encode(p).ok());
}

TEST_CASE("the header layout is the documented v2 layout", "[daemonset][packet]") {
  PacketCodec codec(Key());
  auto b = *codec.Encode(SampleProbe());
  REQUIRE(b[0] == 'L');
  REQUIRE(b[1] == 'K');
  REQUIRE(b[2] == 'S');
  REQUIRE(b[3] == 'P');
  REQUIRE(b[4] == kProbeVersion);
  REQUIRE(b[5] == static_cast<uint8_t>(PacketType::kProbe));
  REQUIRE(((b[6] << 8) | b[7]) == kProbeBodySize);
}

TEST_CASE("damaged packets are dropped with the right reason", "[daemonset][packet]") {
  PacketCodec codec(Key());
  const std::vector<uint8_t> good = *codec.Encode(SampleProbe());

  SECTION("truncated") {
    REQUIRE(Reason(codec.Decode(std::span(good).first(10))) == DropReason::kTruncated);
    REQUIRE(Reason(codec.Decode(std::span(good).first(good.size() - 1))) == DropReason::kTruncated);
    REQUIRE(Reason(codec.Decode({})) == DropReason::kTruncated);
  }
  SECTION("oversize") {
    auto b = good;
    b.push_back(0);
    REQUIRE(Reason(codec.Decode(b)) == DropReason::kOversize);
    std::vector<uint8_t> huge(kMaxPacketSize + 1, 0);
    REQUIRE(Reason(codec.Decode(huge)) == DropReason::kOversize);
  }
  SECTION("bad magic") {
    auto b = good;
    b[0] ^= 0xff;
    REQUIRE(Reason(codec.Decode(b)) == DropReason::kBadMagic);
  }
  SECTION("wrong version") {
    auto b = good;
    b[4] = 1;  // v1: reports without model records
    REQUIRE(Reason(codec.Decode(b)) == DropReason::kWrongVersion);
  }
  SECTION("bad type") {
    auto b = good;
    b[5] = 9;
    REQUIRE(Reason(codec.Decode(b)) == DropReason::kBadType);
  }
  SECTION("tampered body fails authentication") {
    for (size_t i = 8; i < good.size(); ++i) {
      auto b = good;
      b[i] ^= 0x01;
      REQUIRE(Reason(codec.Decode(b)) == DropReason::kUnauthenticated);
    }
  }
  SECTION("another key fails authentication") {
    PacketCodec other(*ProbeKey::FromBytes("another-key-another-key-0123456789"));
    REQUIRE(Reason(other.Decode(good)) == DropReason::kUnauthenticated);
  }
}

TEST_CASE("authenticated but out-of-range fields are malformed", "[daemonset][packet]") {
  PacketCodec codec(Key());
  // Build a probe with index 2 by patching and re-signing: Encode refuses it.
  Packet p = SampleProbe();
  std::get<ProbeBody>(p.body).index = 2;
  REQUIRE_FALSE(codec.Encode(p).ok());

  Packet report = SampleReport();
  std::get<ReportBody>(report.body).edges[0].offset_ns = std::numeric_limits<double>::quiet_NaN();
  auto bytes = codec.Encode(report);
  REQUIRE(bytes.ok());
  REQUIRE(Reason(codec.Decode(*bytes)) == DropReason::kMalformed);

  for (auto spoil : {+[](ModelRecord& m) { m.error_bound_ns = -1.0f; },
                     +[](ModelRecord& m) { m.drift = std::numeric_limits<double>::infinity(); },
                     +[](ModelRecord& m) { m.drift_sigma = std::numeric_limits<float>::quiet_NaN(); }}) {
    Packet bad = SampleReport();
    spoil(std::get<ReportBody>(bad.body).models[0]);
    auto b = codec.Encode(bad);
    REQUIRE(b.ok());
    REQUIRE(Reason(codec.Decode(*b)) == DropReason::kMalformed);
  }
}

TEST_CASE("PacketFilter drops replays, misdirected packets and unknown senders", "[daemonset][packet]") {
  PacketCodec codec(Key());
  Packet p = SampleProbe();  // sender 11 -> dest 22
  PacketFilter filter(codec, /*self=*/22);
  auto bytes = *codec.Encode(p);
  REQUIRE(std::holds_alternative<Packet>(filter.Accept(bytes)));
  REQUIRE(Reason(filter.Accept(bytes)) == DropReason::kReplayed);

  PacketFilter other(codec, /*self=*/33);
  REQUIRE(Reason(other.Accept(bytes)) == DropReason::kMisdirected);

  PacketFilter strict(codec, 22);
  strict.SetKnownSenders({99});
  REQUIRE(Reason(strict.Accept(bytes)) == DropReason::kUnknownSender);

  std::vector<uint8_t> garbage(100, 0x42);
  REQUIRE(Reason(filter.Accept(garbage)) == DropReason::kBadMagic);
  REQUIRE(filter.accepted() == 1);
  REQUIRE(filter.dropped(DropReason::kReplayed) == 1);
  REQUIRE(filter.dropped(DropReason::kBadMagic) == 1);
}

TEST_CASE("PacketFilter keeps per-sender state bounded", "[daemonset][packet]") {
  PacketCodec codec(Key());
  PacketFilter filter(codec, 22, /*max_senders=*/4);
  for (NodeId s = 100; s < 200; ++s) {
    Packet p = SampleProbe();
    p.sender = s;
    REQUIRE(std::holds_alternative<Packet>(filter.Accept(*codec.Encode(p))));
  }
  REQUIRE(filter.accepted() == 100);
}

TEST_CASE("ProbeKey rejects keys that are too short", "[daemonset][packet]") {
  REQUIRE_FALSE(ProbeKey::FromBytes("short").ok());
  REQUIRE(ProbeKey::FromBytes(std::string(16, 'k')).ok());
  REQUIRE_FALSE(ProbeKey::FromBytes(std::string(5000, 'k')).ok());
}

}  // namespace
}  // namespace lockstep::agent

namespace lockstep::agent {
namespace {

TEST_CASE("the packet MAC is HMAC-SHA256 truncated to 16 bytes", "[daemonset][packet]") {
  for (const std::string& k : {std::string("0123456789abcdef-test-key"), std::string(200, 'x')}) {
    PacketCodec codec(*ProbeKey::FromBytes(k));
    auto bytes = *codec.Encode(test::SampleReport());
    std::vector<uint8_t> signed_part(bytes.begin(), bytes.end() - kMacSize);
    auto want = test::HmacForTest(k, signed_part);
    REQUIRE(std::equal(want.begin(), want.begin() + kMacSize, bytes.end() - kMacSize));
  }
}

}  // namespace
}  // namespace lockstep::agent
