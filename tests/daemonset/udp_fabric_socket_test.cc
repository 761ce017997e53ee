// UdpFabricSocket over real loopback: a regular datagram is read once per
// wait (it does not end the sleep), one with the urgent flag, sent to the
// same port, ends it at once (the kernel's SO_REUSEPORT program steers it),
// and each datagram keeps its kernel receive time.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "lockstep/agent/fabric_probe.h"
#include "lockstep/agent/net/udp_fabric_socket.h"
#include "lockstep/common/clock.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kLoopback = 0x7f000001;

TEST_CASE("an urgent datagram to the one port ends the prober's sleep at once, a regular one waits its turn",
          "[daemonset][udp]") {
  const Clock& clock = SystemClock::Instance();
  auto opened = UdpFabricSocket::Open("127.0.0.1", 0, clock);
  REQUIRE(opened.ok());
  UdpFabricSocket& s = **opened;
  const int lo = static_cast<int>(::if_nametoindex("lo"));
  REQUIRE(lo > 0);
  // Only the flags byte matters to the steering; a datagram too short to
  // have one is regular.
  const std::vector<uint8_t> regular{1, 2, 3, 0xff & ~kFabricUrgentFlag, 5}, urgent{4, 5, 6, kFabricUrgentFlag},
      tiny{7, 8};
  static_assert(kFabricFlagsOffset == 3);

  // A regular datagram sent just before a 60 ms wait: read after the whole wait,
  // stamped when it arrived.
  REQUIRE(s.SendVia(regular, kLoopback, s.port(), lo, kLoopback).ok());
  const MonoTime t0 = clock.Monotonic();
  std::vector<FabricDatagram> got;
  REQUIRE(s.Poll(60ms, got).ok());
  const MonoTime t1 = clock.Monotonic();
  REQUIRE(t1 - t0 >= 60ms);
  REQUIRE(got.size() == 1);
  CHECK(std::ranges::equal(got[0].bytes(), regular));
  CHECK_FALSE(got[0].urgent);
  CHECK(got[0].ifindex == lo);
  CHECK(got[0].received <= t0 + 1ms);  // the kernel's time, not the read's
  CHECK(t1 - got[0].received >= 50ms);

  // An urgent one, then a regular one: a 10 s wait ends at once and returns both.
  REQUIRE(s.SendVia(urgent, kLoopback, s.port(), lo, kLoopback).ok());
  REQUIRE(s.SendVia(regular, kLoopback, s.port(), lo, kLoopback).ok());
  REQUIRE(s.SendVia(tiny, kLoopback, s.port(), lo, kLoopback).ok());
  got.clear();
  const MonoTime t2 = clock.Monotonic();
  REQUIRE(s.Poll(10s, got).ok());
  CHECK(clock.Monotonic() - t2 < 5s);  // woken, not timed out
  REQUIRE(got.size() == 3);
  CHECK(std::ranges::equal(got[0].bytes(), urgent));
  CHECK(got[0].urgent);
  CHECK(std::ranges::equal(got[1].bytes(), regular));
  CHECK_FALSE(got[1].urgent);
  CHECK(std::ranges::equal(got[2].bytes(), tiny));
  CHECK_FALSE(got[2].urgent);

  // Regular datagrams alone, many of them: none wakes the sleep, none is
  // steered to the urgent socket (without the program the group's hash
  // would put this flow on either socket).
  for (int i = 0; i < 64; ++i) REQUIRE(s.SendVia(regular, kLoopback, s.port(), lo, kLoopback).ok());
  got.clear();
  const MonoTime t3 = clock.Monotonic();
  REQUIRE(s.Poll(40ms, got).ok());
  CHECK(clock.Monotonic() - t3 >= 40ms);
  REQUIRE(got.size() == 64);
  CHECK(std::none_of(got.begin(), got.end(), [](const FabricDatagram& d) { return d.urgent; }));

  // A datagram longer than FabricDatagram holds arrives cut to kMaxBytes (the
  // codec then drops it by its size), and the next one is read whole.
  std::vector<uint8_t> big(FabricDatagram::kMaxBytes + 36);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i);
  REQUIRE(s.SendVia(big, kLoopback, s.port(), lo, kLoopback).ok());
  REQUIRE(s.SendVia(regular, kLoopback, s.port(), lo, kLoopback).ok());
  got.clear();
  REQUIRE(s.Poll(20ms, got).ok());
  REQUIRE(got.size() == 2);
  CHECK(got[0].size == FabricDatagram::kMaxBytes);
  CHECK(std::ranges::equal(got[0].bytes(), std::span<const uint8_t>(big).first(FabricDatagram::kMaxBytes)));
  CHECK(std::ranges::equal(got[1].bytes(), regular));

  // A second agent's socket on the same fixed port is refused with the
  // reason (its SO_REUSEPORT bind alone would have joined the group).
  auto again = UdpFabricSocket::Open("127.0.0.1", s.port(), clock);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message.find("in use by another lockstep agent") != std::string::npos);
}

TEST_CASE("each path index leaves from its own source port: port + i on a fixed port, a free one on port 0",
          "[daemonset][udp]") {
  const Clock& clock = SystemClock::Instance();
  const int lo = static_cast<int>(::if_nametoindex("lo"));
  REQUIRE(lo > 0);
  // A plain receiver that sees each datagram's source port.
  const int rx = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(rx >= 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(kLoopback);
  REQUIRE(::bind(rx, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
  socklen_t len = sizeof at;
  REQUIRE(::getsockname(rx, reinterpret_cast<sockaddr*>(&at), &len) == 0);
  const int rx_port = ntohs(at.sin_port);
  timeval wait{1, 0};
  REQUIRE(::setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait) == 0);
  auto source_ports = [&](UdpFabricSocket& s, const std::vector<int>& paths) {
    const std::vector<uint8_t> bytes{9};
    std::vector<FabricSend> sends;
    for (int p : paths) {
      sends.push_back(
          {.bytes = bytes, .dest = kLoopback, .port = rx_port, .ifindex = lo, .source = kLoopback, .path = p});
    }
    REQUIRE(s.SendBatch(sends) == 0);
    std::multiset<int> ports;
    for (size_t i = 0; i < paths.size(); ++i) {
      sockaddr_in from{};
      socklen_t from_len = sizeof from;
      uint8_t buf[8];
      REQUIRE(::recvfrom(rx, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len) == 1);
      ports.insert(ntohs(from.sin_port));
    }
    for (const FabricSend& send : sends) CHECK(send.sent);
    return ports;
  };

  // Port 0: every path a socket of its own on a free port.
  auto free = UdpFabricSocket::Open("127.0.0.1", 0, clock, 3);
  REQUIRE(free.ok());
  UdpFabricSocket& f = **free;
  const std::set<int> distinct{f.SourcePort(0), f.SourcePort(1), f.SourcePort(2)};
  CHECK(distinct.size() == 3);
  CHECK(f.SourcePort(0) == f.port());
  // Interleaved paths, one batch: each leaves from its path's port.
  CHECK(source_ports(f, {0, 1, 2, 1, 0, 2, 2}) == std::multiset<int>{f.SourcePort(0), f.SourcePort(0), f.SourcePort(1),
                                                                     f.SourcePort(1), f.SourcePort(2), f.SourcePort(2),
                                                                     f.SourcePort(2)});

  // A fixed port: path i > 0 sends from port + i (urgent probes share the port).
  const int base = f.port() + 100 <= 65000 ? f.port() + 100 : 20000;
  auto fixed = UdpFabricSocket::Open("127.0.0.1", base, clock, 3);
  if (fixed.ok()) {  // the range may be taken on a busy machine
    UdpFabricSocket& x = **fixed;
    CHECK(x.SourcePort(0) == base);
    CHECK(x.SourcePort(1) == base + 1);
    CHECK(x.SourcePort(2) == base + 2);
    CHECK(source_ports(x, {2, 1, 0}) == std::multiset<int>{base, base + 1, base + 2});
    // A second agent on the same range is refused, naming the setting.
    auto again = UdpFabricSocket::Open("127.0.0.1", base, clock, 3);
    REQUIRE_FALSE(again.ok());
    CHECK(again.error().message.find("pathsPerRail") != std::string::npos);
  }
  ::close(rx);
}

TEST_CASE("every read keeps each datagram's arrival interface and receive time, batch after batch", "[daemonset][udp]") {
  // The receive slots are set up once and reused: a slot whose lengths were
  // not reset would lose its control messages (interface, kernel time).
  const Clock& clock = SystemClock::Instance();
  auto opened = UdpFabricSocket::Open("127.0.0.1", 0, clock);
  REQUIRE(opened.ok());
  UdpFabricSocket& s = **opened;
  const int lo = static_cast<int>(::if_nametoindex("lo"));
  for (int round = 0; round < 3; ++round) {
    const MonoTime before = clock.Monotonic();
    for (int i = 0; i < 70; ++i) {  // more than one recvmmsg batch (64)
      const std::vector<uint8_t> bytes{static_cast<uint8_t>(round), static_cast<uint8_t>(i)};
      REQUIRE(s.SendVia(bytes, kLoopback, s.port(), lo, kLoopback).ok());
    }
    std::vector<FabricDatagram> got;
    REQUIRE(s.Poll(0ns, got).ok());
    REQUIRE(got.size() == 70);
    for (int i = 0; i < 70; ++i) {
      const FabricDatagram& d = got[static_cast<size_t>(i)];
      INFO("round " << round << ", datagram " << i);
      CHECK(std::ranges::equal(d.bytes(), std::vector<uint8_t>{static_cast<uint8_t>(round), static_cast<uint8_t>(i)}));
      CHECK(d.ifindex == lo);
      CHECK(d.source == kLoopback);
      CHECK(d.received >= before);
      CHECK(d.received <= clock.Monotonic());
    }
  }
}

TEST_CASE("one read takes the whole backlog: a stall's arrivals are all judged at the wake-up that follows",
          "[daemonset][udp]") {
  // At 128 paths a stall of ~30 ms queues more datagrams than the 256 a read
  // once took; the rest, acks that arrived in time among them, waited for a
  // later wake-up while this one timed their probes out.
  const Clock& clock = SystemClock::Instance();
  auto opened = UdpFabricSocket::Open("127.0.0.1", 0, clock);
  REQUIRE(opened.ok());
  UdpFabricSocket& s = **opened;
  const int lo = static_cast<int>(::if_nametoindex("lo"));
  const size_t before = s.ReceiveBufferBytes();
  s.ReserveReceive(2048);  // 128 paths: 100 ms of arrivals
  const size_t after = s.ReceiveBufferBytes();
  CHECK(after >= before);
  // Root (the agent, CI here) gets the size asked for whatever rmem_max is;
  // SO_RCVBUF reports twice the bytes set.
  if (::geteuid() == 0) CHECK(after >= 2 * 2048 * UdpFabricSocket::kDatagramTruesize);
  s.ReserveReceive(16);  // never shrinks
  CHECK(s.ReceiveBufferBytes() == after);
  // As many as the buffer surely holds (loopback truesize < 2 KiB), at most 1,000.
  const size_t n = std::min<size_t>(1000, after / 2048);
  if (n <= 256) WARN("receive buffer too small here to queue more than 256 datagrams: " << after << " bytes");
  const MonoTime t0 = clock.Monotonic();
  for (size_t i = 0; i < n; ++i) {
    const std::vector<uint8_t> bytes{static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)};
    REQUIRE(s.SendVia(bytes, kLoopback, s.port(), lo, kLoopback).ok());
  }
  std::vector<FabricDatagram> got;
  REQUIRE(s.Poll(0ns, got).ok());
  REQUIRE(got.size() == n);
  for (size_t i = 0; i < n; ++i) {
    INFO("datagram " << i);
    CHECK(std::ranges::equal(got[i].bytes(), std::vector<uint8_t>{static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)}));
    CHECK(got[i].received >= t0);
  }
  got.clear();
  REQUIRE(s.Poll(0ns, got).ok());
  CHECK(got.empty());
}

}  // namespace
}  // namespace lockstep::agent
