// FabricSocket: the port the fabric prober sends and receives path probes
// through. A send names the interface it must leave by and its source
// address (a probe for rail r leaves through rail r whatever the routing
// table prefers; a reply leaves through the interface its probe came in on);
// a received datagram carries the interface it arrived on and when.
// Adapters: UdpFabricSocket (lockstep/agent/net/udp_fabric_socket.h,
// IP_PKTINFO) and the in-memory fake in tests/support/fake_fabric_socket.h.
// Used from one thread at a time.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "lockstep/common/clock.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

// Urgent probes and their acks (fabric::PathHealth::TakeUrgent) go to the
// peer's fabric port like every other probe, with the wire's urgent flag
// (fabric_probe.h, kFabricUrgentFlag): the adapter hands them over as
// `urgent`, and one arriving ends the prober's sleep at once, so it is
// acknowledged within a round trip.

// One datagram of a batch send (see SendBatch).
struct FabricSend {
  std::span<const uint8_t> bytes{};
  uint32_t dest = 0;  // host order
  int port = 0;
  int ifindex = 0;
  uint32_t source = 0;  // host order
  // The fabric path index (fabric::PathKey.index): the adapter sends path i
  // from its own UDP source port (UdpFabricSocket: port() + i for i > 0),
  // so each path is its own 5-tuple for the fabric's ECMP hash. Urgent
  // probes of a path leave from its port too; ack-only packets use path 0.
  int path = 0;
  bool sent = false;  // out: the kernel took it
};

struct FabricDatagram {
  // The bytes, inline: reading a tick's datagrams allocates nothing. A probe
  // is 54 bytes (kFabricProbeSize); a longer datagram keeps its first
  // kMaxBytes, which the codec drops like any datagram of the wrong size.
  static constexpr size_t kMaxBytes = 64;
  std::array<uint8_t, kMaxBytes> data{};
  size_t size = 0;
  std::span<const uint8_t> bytes() const { return {data.data(), size}; }
  void Assign(std::span<const uint8_t> b) {
    size = std::min(b.size(), kMaxBytes);
    std::copy_n(b.begin(), size, data.begin());
  }
  uint32_t source = 0;  // the datagram's source address (host order): informative only, never trusted
  int ifindex = 0;      // the interface it arrived on
  MonoTime received{};  // the kernel's receive time where the adapter has it (else when it was read)
  bool urgent = false;  // carried the urgent flag (steered to the urgent socket)
};

class FabricSocket {
 public:
  virtual ~FabricSocket() = default;
  // Sends `bytes` to dest:port out of interface `ifindex` with source address
  // `source` (host order). Errors: Unavailable (the kernel refused: no route
  // out of that interface, a full buffer); the caller counts and goes on.
  virtual Status SendVia(std::span<const uint8_t> bytes, uint32_t dest, int port, int ifindex, uint32_t source) = 0;
  // Sends every datagram of `sends` as SendVia would, in one system call
  // where the adapter can (sendmmsg), and marks each `sent`; returns how many
  // the kernel refused. The default sends one by one.
  virtual size_t SendBatch(std::span<FabricSend> sends) {
    size_t failed = 0;
    for (FabricSend& s : sends) {
      s.sent = SendVia(s.bytes, s.dest, s.port, s.ifindex, s.source).ok();
      failed += s.sent ? 0 : 1;
    }
    return failed;
  }
  // Waits max_wait (datagrams arriving meanwhile do not end the wait: they
  // queue with their receive time; an urgent one does), then
  // appends every datagram that arrived. The prober wakes once per event,
  // not once per datagram. Every datagram: a backlog left for a later
  // wake-up would hold acks that arrived in time while the caller judges
  // their probes' timeouts.
  virtual Status Poll(std::chrono::nanoseconds max_wait, std::vector<FabricDatagram>& out) = 0;
  // Room for `datagrams` queued datagrams per port (the paths' arrivals over
  // a stall the prober should survive without a loss). Best effort; the
  // default does nothing.
  virtual void ReserveReceive(size_t /*datagrams*/) {}
  virtual int port() const = 0;  // the bound UDP port
};

}  // namespace lockstep::agent
