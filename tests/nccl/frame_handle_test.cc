// The wire frames and the connection handle: round trips for seeded random
// values, and damaged or foreign bytes turned into errors (never a crash).
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "lockstep/nccl/frame.h"
#include "lockstep/nccl/handle.h"

using namespace lockstep::nccl;

TEST_CASE("data headers, acks and hellos round-trip for random values", "[nccl]") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    DataHeader h;
    h.msg_size = rng() % kMaxMessageBytes;
    h.offset = h.msg_size ? rng() % h.msg_size : 0;
    h.len = static_cast<uint32_t>(std::min<uint64_t>(rng() % kMaxChunkBytes, h.msg_size - h.offset));
    h.stream = static_cast<uint16_t>(rng() % kMaxStreams);
    h.tag = static_cast<int32_t>(rng());
    h.seq = rng();
    h.msg = rng();
    h.send_ns = rng();
    auto b = EncodeDataHeader(h);
    auto back = DecodeDataHeader(b.data());
    REQUIRE(back.ok());
    REQUIRE(*back == h);

    AckFrame a{.cum_seq = rng(), .credit = rng()};
    if (i % 2 == 1) {
      a.has_owd = true;
      a.owd_stream = static_cast<uint16_t>(rng() % kMaxStreams);
      a.owd_ns = static_cast<int64_t>(rng()) >> 8;  // either sign: clocks disagree within their bound
    }
    auto ab = EncodeAck(a);
    REQUIRE(*DecodeAck(ab.data()) == a);

    Hello hello{.listen_token = rng(), .conn_id = rng(), .stream = 3, .nstreams = 4};
    auto hb = EncodeHello(hello);
    REQUIRE(*DecodeHello(hb.data()) == hello);
  }
}

TEST_CASE("a damaged data header is rejected", "[nccl]") {
  DataHeader h{.len = 10, .seq = 5, .msg = 1, .offset = 0, .msg_size = 100};
  auto b = EncodeDataHeader(h);
  for (size_t i = 0; i < b.size(); ++i) {
    auto c = b;
    c[i] ^= 0x40;
    REQUIRE_FALSE(DecodeDataHeader(c.data()).ok());
  }
}

TEST_CASE("a header whose chunk lies outside its message is rejected", "[nccl]") {
  DataHeader h{.len = 10, .offset = 95, .msg_size = 100};
  auto r = DecodeDataHeader(EncodeDataHeader(h).data());
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().message.find("outside its message") != std::string::npos);
}

TEST_CASE("a hello with a stream index outside its count is rejected", "[nccl]") {
  auto b = EncodeHello(Hello{.listen_token = 1, .conn_id = 2, .stream = 4, .nstreams = 4});
  REQUIRE_FALSE(DecodeHello(b.data()).ok());
}

TEST_CASE("the handle fits NCCL_NET_HANDLE_MAXSIZE and round-trips", "[nccl]") {
  STATIC_REQUIRE(kHandleBytes == 128);
  ListenHandle h{.token = 0x1234'5678'9abc'def0ull, .host = {10, 9, 8, 7}};
  for (uint8_t i = 0; i < kMaxRails; ++i) {
    h.rails.push_back(RailEndpoint{.ipv4 = {127, 0, 0, static_cast<uint8_t>(i + 1)}, .port = uint16_t(40000 + i)});
  }
  std::vector<uint8_t> buf(kHandleBytes, 0xee);
  EncodeHandle(h, buf.data());
  auto back = DecodeHandle(buf.data());
  REQUIRE(back.ok());
  REQUIRE(*back == h);
  REQUIRE(ConnectStage(buf.data()) == 0);
  SetConnectStage(buf.data(), 42);
  REQUIRE(ConnectStage(buf.data()) == 42);
  REQUIRE(DecodeHandle(buf.data()).ok());  // the stage is outside the checksum
}

TEST_CASE("foreign, damaged and other-version handles are errors, not crashes", "[nccl]") {
  ListenHandle h{.token = 9, .rails = {RailEndpoint{.ipv4 = {10, 0, 0, 1}, .port = 5000}}};
  std::vector<uint8_t> good(kHandleBytes);
  EncodeHandle(h, good.data());

  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {  // random bytes, as another plugin's handle would be
    std::vector<uint8_t> b(kHandleBytes);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    auto r = DecodeHandle(b.data());
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.code() == lockstep::ErrorCode::kInvalidArgument);
  }
  auto other_version = good;
  other_version[4] = 1;  // the first slice's handles (no host address, 24-byte acks)
  auto r = DecodeHandle(other_version.data());
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().message.find("version 1") != std::string::npos);

  auto flipped = good;
  flipped[20] ^= 1;  // a rail's address
  REQUIRE_FALSE(DecodeHandle(flipped.data()).ok());
  flipped = good;
  flipped[81] ^= 1;  // the host address
  REQUIRE_FALSE(DecodeHandle(flipped.data()).ok());
  REQUIRE_FALSE(DecodeHandle(nullptr).ok());
}
