// UdpTimestampedTransport over real loopback: kernel software timestamps,
// coded pair spacing, and the drop counters for garbage from another socket.
// Polling is bounded (each wait <= 2 s of real time).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>

#include "lockstep/agent/runtime/clock_sync_service.h"
#include "lockstep/agent/net/system_node_clock.h"
#include "lockstep/agent/net/udp_timestamped_transport.h"
#include "packet_samples.h"

namespace lockstep::agent {
namespace {

using namespace std::chrono_literals;

// Polls until `done` or 2 s of real time pass.
template <typename Fn>
bool PollUntil(Fn done) {
  auto deadline = std::chrono::steady_clock::now() + 2s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
  return true;
}

void SendRaw(int port, const std::vector<uint8_t>& bytes) {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::close(fd);
}

// Linux turns software RX stamping on lazily (a deferred static key) when the
// first socket asks for it, so the first datagrams can arrive unstamped.
// Sends to itself until one arrives stamped, draining all completions.
void WarmUp(UdpTimestampedTransport& udp) {
  bool stamped = false;
  std::vector<uint8_t> ping{0xee};
  REQUIRE(PollUntil([&] {
    TransportEvents ev;
    (void)udp.Send(udp.local(), ping);
    (void)udp.Poll(5ms, ev);
    for (const auto& d : ev.received) stamped |= d.kernel_stamp;
    return stamped;
  }));
  TransportEvents ev;
  (void)udp.Poll(20ms, ev);  // late TX stamps of the pings
}

TEST_CASE("loopback pairs carry plausible kernel RX and TX software stamps", "[daemonset][udp]") {
  SystemNodeClock clock;
  auto t = UdpTimestampedTransport::Open("127.0.0.1", 0, clock);
  REQUIRE(t.ok());
  UdpTimestampedTransport& udp = **t;
  REQUIRE(udp.local().port != 0);
  WarmUp(udp);
  const uint64_t unstamped_before = udp.rx_without_kernel_stamp();
  constexpr int kPairs = 10;
  std::map<uint32_t, int> id_to_packet;
  const int64_t before = clock.NowNs();
  for (int k = 0; k < kPairs; ++k) {
    std::vector<uint8_t> a{static_cast<uint8_t>(2 * k)}, b{static_cast<uint8_t>(2 * k + 1)};
    auto ids = udp.SendPair(udp.local(), a, b, 20us);
    REQUIRE(ids.ok());
    id_to_packet[(*ids)[0]] = 2 * k;
    id_to_packet[(*ids)[1]] = 2 * k + 1;
  }
  std::map<int, int64_t> tx, rx;
  TransportEvents ev;
  REQUIRE(PollUntil([&] {
    ev.clear();
    REQUIRE(udp.Poll(10ms, ev).ok());
    for (const auto& s : ev.tx_stamps) {
      if (!id_to_packet.contains(s.tx_id)) continue;  // a warm-up ping
      tx[id_to_packet[s.tx_id]] = s.tx_ns;
    }
    for (const auto& d : ev.received) {
      if (d.bytes == std::vector<uint8_t>{0xee}) continue;
      REQUIRE(d.kernel_stamp);
      REQUIRE(d.bytes.size() == 1);
      REQUIRE(d.from == udp.local());
      rx[d.bytes[0]] = d.rx_ns;
    }
    return tx.size() == 2 * kPairs && rx.size() == 2 * kPairs;
  }));
  const int64_t after = clock.NowNs();
  for (int i = 0; i < 2 * kPairs; ++i) {
    INFO("packet " << i << " tx " << tx[i] << " rx " << rx[i]);
    REQUIRE(tx[i] >= before - 1'000'000);  // stamps are in the agent's clock domain
    REQUIRE(rx[i] <= after + 1'000'000);
    REQUIRE(rx[i] >= tx[i] - 1'000);       // loopback: received after sent (1 us slack for mapping)
    REQUIRE(rx[i] - tx[i] < 10'000'000);
    if (i > 0) REQUIRE(tx[i] > tx[i - 1]);
  }
  for (int k = 0; k < kPairs; ++k) {
    int64_t spacing = tx[2 * k + 1] - tx[2 * k];
    REQUIRE(spacing >= 15'000);  // the transport spins ~20 us between the two
    REQUIRE(spacing < 5'000'000);
  }
  REQUIRE(udp.rx_without_kernel_stamp() == unstamped_before);
}

TEST_CASE("Collect sleeps through arrivals and returns them, in one batch, with their arrival stamps",
          "[daemonset][udp]") {
  SystemNodeClock clock;
  auto t = UdpTimestampedTransport::Open("127.0.0.1", 0, clock);
  REQUIRE(t.ok());
  UdpTimestampedTransport& udp = **t;
  WarmUp(udp);
  // More datagrams than one recvmmsg batch (16), so the drain must loop.
  constexpr int kDatagrams = 40;
  std::map<uint32_t, int> ids;
  const int64_t before = clock.NowNs();
  for (int i = 0; i < kDatagrams; ++i) {
    auto id = udp.Send(udp.local(), std::vector<uint8_t>{static_cast<uint8_t>(i)});
    REQUIRE(id.ok());
    ids[*id] = i;
  }
  TransportEvents ev;
  REQUIRE(udp.Collect(30ms, ev).ok());
  const int64_t after = clock.NowNs();
  REQUIRE(after - before >= 30'000'000);  // it slept the whole wait though datagrams were ready
  REQUIRE(ev.received.size() == kDatagrams);
  std::map<int, int64_t> tx;
  for (const auto& s : ev.tx_stamps) {
    if (ids.contains(s.tx_id)) tx[ids[s.tx_id]] = s.tx_ns;
  }
  REQUIRE(tx.size() == kDatagrams);
  for (int i = 0; i < kDatagrams; ++i) {
    const ReceivedDatagram& d = ev.received[static_cast<size_t>(i)];
    REQUIRE(d.bytes == std::vector<uint8_t>{static_cast<uint8_t>(i)});  // in arrival order
    REQUIRE(d.kernel_stamp);
    // Stamped when it arrived, not when it was read ~30 ms later.
    REQUIRE(d.rx_ns >= tx[i] - 1'000);
    REQUIRE(d.rx_ns - tx[i] < 10'000'000);
    REQUIRE(after - d.rx_ns > 15'000'000);
  }
  // Nothing is left behind, and an empty Collect returns nothing.
  TransportEvents again;
  REQUIRE(udp.Collect(0ns, again).ok());
  REQUIRE(again.received.empty());
  REQUIRE(again.tx_stamps.empty());
}

TEST_CASE("garbage from a second socket is dropped and counted by reason", "[daemonset][udp]") {
  SystemNodeClock node_clock;
  auto t = UdpTimestampedTransport::Open("127.0.0.1", 0, node_clock);
  REQUIRE(t.ok());
  PacketCodec codec(test::Key());
  metrics::Registry registry;
  ClockSyncOptions o;
  o.self_name = "node-a";
  o.known.push_back({"node-b", NodeIdFromName("node-b"), *Endpoint::Parse("127.0.0.1", 9)});
  ClockSyncService service(**t, node_clock, SystemClock::Instance(), codec, o, registry);
  const int port = (*t)->local().port;

  Packet p = test::SampleProbe();
  p.sender = NodeIdFromName("node-b");
  p.dest = NodeIdFromName("node-a");
  auto& probe = std::get<ProbeBody>(p.body);
  probe.tx_app_ns = node_clock.NowNs();
  probe.prev_tx_ns = {probe.tx_app_ns - 20'000'000, probe.tx_app_ns - 19'980'000};
  auto good = *codec.Encode(p);
  auto bad_version = good;
  bad_version[4] = 9;
  auto forged = good;
  forged[50] ^= 0x80;
  PacketCodec other(*ProbeKey::FromBytes("some-other-cluster-key"));
  SendRaw(port, std::vector<uint8_t>(200, 0xab));  // bad_magic
  SendRaw(port, {0x4c, 0x4b});                     // truncated
  SendRaw(port, bad_version);                      // wrong_version
  SendRaw(port, forged);                           // unauthenticated
  SendRaw(port, *other.Encode(p));                 // unauthenticated
  SendRaw(port, std::vector<uint8_t>(1500, 0x4c)); // oversize (beyond kMaxPacketSize)
  SendRaw(port, good);                             // accepted
  SendRaw(port, good);                             // replayed
  p.dest = 12345;
  SendRaw(port, *codec.Encode(p));                 // misdirected
  const PacketFilter& f = service.filter();
  REQUIRE(PollUntil([&] {
    service.RunOnce(10ms);
    uint64_t total = f.accepted();
    for (int r = 0; r < kNumDropReasons; ++r) total += f.dropped(static_cast<DropReason>(r));
    return total >= 9;
  }));
  REQUIRE(f.dropped(DropReason::kBadMagic) == 1);
  REQUIRE(f.dropped(DropReason::kTruncated) == 1);
  REQUIRE(f.dropped(DropReason::kWrongVersion) == 1);
  REQUIRE(f.dropped(DropReason::kUnauthenticated) == 2);
  REQUIRE(f.dropped(DropReason::kOversize) == 1);
  REQUIRE(f.dropped(DropReason::kReplayed) == 1);
  REQUIRE(f.dropped(DropReason::kMisdirected) == 1);
  REQUIRE(f.accepted() == 1);
  const std::string m = registry.Render();
  REQUIRE(m.find("lockstep_probe_dropped_total{reason=\"bad_magic\"} 1") != std::string::npos);
  REQUIRE(m.find("lockstep_probe_dropped_total{reason=\"unauthenticated\"} 2") != std::string::npos);
  REQUIRE(m.find("lockstep_probe_dropped_total{reason=\"wrong_version\"} 1") != std::string::npos);
}

TEST_CASE("two agents over loopback join coded pairs in both directions", "[daemonset][udp]") {
  SystemNodeClock node_clock;
  auto ta = UdpTimestampedTransport::Open("127.0.0.1", 0, node_clock);
  auto tb = UdpTimestampedTransport::Open("127.0.0.1", 0, node_clock);
  REQUIRE(ta.ok());
  REQUIRE(tb.ok());
  PacketCodec codec(test::Key());
  metrics::Registry ra, rb;
  PeerTarget a{"node-a", NodeIdFromName("node-a"), (*ta)->local()};
  PeerTarget b{"node-b", NodeIdFromName("node-b"), (*tb)->local()};
  ClockSyncOptions oa, ob;
  oa.self_name = "node-a";
  oa.selected = {b};
  oa.known = {b};
  oa.interval = 5ms;
  ob.self_name = "node-b";
  ob.known = {a};  // b selects nobody: it probes a back because a probes it
  ob.interval = 5ms;
  ClockSyncService sa(**ta, node_clock, SystemClock::Instance(), codec, oa, ra);
  ClockSyncService sb(**tb, node_clock, SystemClock::Instance(), codec, ob, rb);
  auto& pairs_a = ra.Counter("lockstep_probe_pairs_total", "", {"direction"});
  auto& pairs_b = rb.Counter("lockstep_probe_pairs_total", "", {"direction"});
  REQUIRE(PollUntil([&] {
    sa.RunOnce(1ms);
    sb.RunOnce(1ms);
    return pairs_a.Get({"outbound"}) >= 5 && pairs_a.Get({"inbound"}) >= 5 && pairs_b.Get({"outbound"}) >= 5 &&
           pairs_b.Get({"inbound"}) >= 5;
  }));
  REQUIRE(sa.filter().dropped(DropReason::kUnauthenticated) == 0);
  REQUIRE(sb.Status().peers == std::vector<std::string>{"node-a"});
}

}  // namespace
}  // namespace lockstep::agent
