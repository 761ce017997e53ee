// Randomized robustness test of the receive path: millions of mutated and
// random datagrams (seeded), none may crash, none may be accepted unless it
// is byte-identical to a packet the key holder produced.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "lockstep/agent/packet_filter.h"
#include "packet_samples.h"

namespace lockstep::agent {
namespace {

// Overwrites buf[from, end) with random bytes, 8 per generator call (a byte
// per call is what makes such loops slow in unoptimized builds).
void FillRandom(std::vector<uint8_t>& buf, size_t from, std::mt19937_64& rng) {
  for (size_t k = from; k < buf.size(); k += 8) {
    uint64_t r = rng();
    std::memcpy(buf.data() + k, &r, std::min<size_t>(8, buf.size() - k));
  }
}

TEST_CASE("random and mutated datagrams never crash and never authenticate", "[daemonset][packet][fuzz]") {
  PacketCodec codec(test::Key());
  const std::vector<std::vector<uint8_t>> seeds = {*codec.Encode(test::SampleProbe()),
                                                   *codec.Encode(test::SampleReport())};
  std::mt19937_64 rng(20240601);
  PacketFilter filter(codec, 22);
  uint64_t accepted = 0;
  std::array<uint64_t, kNumDropReasons> reasons{};
  constexpr int kIterations = 2'000'000;
  for (int i = 0; i < kIterations; ++i) {
    std::vector<uint8_t> buf;
    switch (rng() % 4) {
      case 0: {  // pure noise of random length
        buf.resize(rng() % (kMaxPacketSize + 64));
        FillRandom(buf, 0, rng);
        break;
      }
      case 1: {  // valid header prefix, random rest
        buf = seeds[rng() % 2];
        buf.resize(rng() % (kMaxPacketSize + 1));
        FillRandom(buf, std::min<size_t>(8, buf.size()), rng);
        break;
      }
      default: {  // a few bit flips / truncation / extension of a valid packet
        buf = seeds[rng() % 2];
        int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) buf[rng() % buf.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        if (rng() % 8 == 0) buf.resize(rng() % (buf.size() + 16));
        break;
      }
    }
    auto out = filter.Accept(buf);
    if (std::holds_alternative<Packet>(out)) {
      ++accepted;
    } else {
      ++reasons[static_cast<size_t>(std::get<DropReason>(out))];
    }
  }
  // A mutation that restores the original bytes is the only way in, and
  // then it is the seed packet itself: at most once per seed (replay window).
  REQUIRE(accepted <= 2);
  REQUIRE(reasons[static_cast<size_t>(DropReason::kUnauthenticated)] > 100'000);
  REQUIRE(reasons[static_cast<size_t>(DropReason::kBadMagic)] > 100'000);
  REQUIRE(reasons[static_cast<size_t>(DropReason::kTruncated)] > 1'000);
  uint64_t total = accepted;
  for (auto r : reasons) total += r;
  REQUIRE(total == kIterations);
}

TEST_CASE("re-signed random bodies are parsed without trusting their counts", "[daemonset][packet][fuzz]") {
  // Structure-aware: random bodies with a VALID MAC reach the body parser.
  PacketCodec codec(test::Key());
  std::mt19937_64 rng(7);
  const ProbeKey probe_key = test::Key();
  const std::string& key = probe_key.bytes();
  int parsed = 0, malformed = 0;
  for (int i = 0; i < 50'000; ++i) {
    std::vector<uint8_t> buf = *codec.Encode(rng() % 2 ? test::SampleProbe() : test::SampleReport());
    buf.resize(buf.size() - kMacSize);
    size_t body_len = rng() % (kMaxPacketSize - kHeaderSize - kMacSize);
    buf.resize(kHeaderSize + body_len);
    FillRandom(buf, kHeaderSize, rng);
    for (size_t k = kHeaderSize; k < buf.size(); ++k) buf[k] &= (k % 3 == 0) ? 0xff : 0x01;  // mostly small values
    if (body_len >= 4 && rng() % 2) {  // plausible counts for reports
      buf[kHeaderSize] = 0;
      buf[kHeaderSize + 1] = static_cast<uint8_t>(rng() % 30);
      buf[kHeaderSize + 2] = 0;
      buf[kHeaderSize + 3] = static_cast<uint8_t>(rng() % 12);
    }
    buf[6] = static_cast<uint8_t>(body_len >> 8);
    buf[7] = static_cast<uint8_t>(body_len);
    auto mac = test::HmacForTest(key, buf);
    buf.insert(buf.end(), mac.begin(), mac.begin() + kMacSize);
    auto out = codec.Decode(buf);
    if (std::holds_alternative<Packet>(out)) {
      ++parsed;
    } else {
      REQUIRE(std::get<DropReason>(out) == DropReason::kMalformed);
      ++malformed;
    }
  }
  REQUIRE(parsed + malformed == 50'000);
  REQUIRE(malformed > 0);
}

}  // namespace
}  // namespace lockstep::agent
