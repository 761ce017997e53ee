// ProbeTransport: the port through which the agent sends and receives probe
// datagrams with timestamps. Like an NCCL net plugin it never blocks beyond
// the wait a caller asks for: Send returns at once, completion (the kernel TX
// timestamp) is reported later by Poll, matched by the id Send returned.
// All timestamps are in the NodeClock domain the transport was built with.
// Adapters: UdpTimestampedTransport (kernel SO_TIMESTAMPING); tests use an
// in-memory fake. Implementations are used from one thread at a time.
#pragma once

#include <array>
#include <chrono>
#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/agent/endpoint.h"
#include "lockstep/common/result.h"

namespace lockstep::agent {

struct ReceivedDatagram {
  Endpoint from;
  std::vector<uint8_t> bytes;
  int64_t rx_ns = 0;          // local clock; kernel RX stamp when kernel_stamp
  bool kernel_stamp = false;  // false: stamped in user space on receipt
};

struct TxCompletion {
  uint32_t tx_id = 0;
  int64_t tx_ns = 0;  // local clock; kernel TX software stamp
};

struct TransportEvents {
  std::vector<ReceivedDatagram> received;
  std::vector<TxCompletion> tx_stamps;
  void clear() {
    received.clear();
    tx_stamps.clear();
  }
};

class ProbeTransport {
 public:
  virtual ~ProbeTransport() = default;
  virtual Endpoint local() const = 0;
  // Sends one datagram. Returns the id its TxCompletion will carry.
  virtual Result<uint32_t> Send(const Endpoint& to, std::span<const uint8_t> bytes) = 0;
  // Sends a coded pair: `a`, then `b` about `spacing` later (the TX stamps
  // tell what really happened). REQUIRES: spacing <= 1 ms.
  virtual Result<std::array<uint32_t, 2>> SendPair(const Endpoint& to, std::span<const uint8_t> a,
                                                    std::span<const uint8_t> b, std::chrono::nanoseconds spacing) = 0;
  // Waits up to max_wait (0: not at all) for traffic, then appends every
  // datagram and TX stamp that is ready to `out`.
  virtual Status Poll(std::chrono::nanoseconds max_wait, TransportEvents& out) = 0;
  // Waits `wait` whatever arrives, then appends what is ready, as Poll(0)
  // does: for a loop that acts on its own timers and reads traffic in
  // batches. Each datagram keeps its kernel receive stamp, so the wait
  // changes no measurement; it saves a wake-up per datagram and per TX
  // stamp. Transports whose Poll does not really wait (in-memory fakes on a
  // virtual clock) need not override it.
  virtual Status Collect(std::chrono::nanoseconds wait, TransportEvents& out) { return Poll(wait, out); }
};

}  // namespace lockstep::agent
