// UdpTimestampedTransport: the ProbeTransport adapter on a UDP socket with
// Linux kernel software timestamps (SO_TIMESTAMPING with RX_SOFTWARE |
// TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY).
//   - RX stamps arrive as an SCM_TIMESTAMPING cmsg with each datagram.
//   - TX stamps arrive on MSG_ERRQUEUE without payload (OPT_TSONLY), keyed by
//     the per-socket counter OPT_ID assigns to each successful sendmsg(); Send
//     mirrors that counter and returns it as the tx id.
// Kernel stamps are CLOCK_REALTIME; they are mapped into the injected
// NodeClock (MONOTONIC_RAW-based, possibly virtual) before leaving here.
// IPv4 only. Non-blocking; Poll() (poll(2)) and Collect() (a sleep) are the
// only calls that wait. Both read each queue only when poll(2) says it has
// something, in batches (recvmmsg).
// Used from one thread at a time.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/agent/ports/node_clock.h"
#include "lockstep/agent/ports/probe_transport.h"

namespace lockstep::agent {

class UdpTimestampedTransport final : public ProbeTransport {
 public:
  // Binds host:port (port 0 picks a free port; see local()). `clock` must
  // outlive the transport.
  static Result<std::unique_ptr<UdpTimestampedTransport>> Open(const std::string& host, int port,
                                                               const NodeClock& clock);
  ~UdpTimestampedTransport() override;

  Endpoint local() const override { return local_; }
  Result<uint32_t> Send(const Endpoint& to, std::span<const uint8_t> bytes) override;
  Result<std::array<uint32_t, 2>> SendPair(const Endpoint& to, std::span<const uint8_t> a,
                                            std::span<const uint8_t> b, std::chrono::nanoseconds spacing) override;
  Status Poll(std::chrono::nanoseconds max_wait, TransportEvents& out) override;
  Status Collect(std::chrono::nanoseconds wait, TransportEvents& out) override;

  // Datagrams that arrived without a kernel RX stamp (stamped in user space).
  uint64_t rx_without_kernel_stamp() const { return rx_no_stamp_; }

 private:
  UdpTimestampedTransport(int fd, Endpoint local, const NodeClock& clock)
      : fd_(fd), local_(local), clock_(clock), slots_(kBatch), msgs_(kBatch) {}
  void DrainData(TransportEvents& out);
  void DrainErrQueue(TransportEvents& out);

  // recvmmsg buffers, reused call after call.
  static constexpr int kBatch = 16;
  struct Slot {
    std::array<uint8_t, 2048> buf;
    alignas(cmsghdr) char control[512];
    sockaddr_in from;
    iovec iov;
  };

  int fd_;
  Endpoint local_;
  const NodeClock& clock_;
  uint32_t next_tx_id_ = 0;  // mirrors the kernel's OPT_ID counter
  uint64_t rx_no_stamp_ = 0;
  std::vector<Slot> slots_;
  std::vector<mmsghdr> msgs_;
};

}  // namespace lockstep::agent
