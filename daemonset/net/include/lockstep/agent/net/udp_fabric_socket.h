// UdpFabricSocket: the FabricSocket adapter, one UDP socket on all addresses.
// A send carries an IP_PKTINFO control message (ipi_ifindex: the egress
// interface, ipi_spec_dst: the source address), so the kernel routes it
// through that interface's nexthop even when a pin or the ECMP hash would
// pick another; receives read IP_PKTINFO for the arrival interface and
// SO_TIMESTAMPNS for the kernel's receive time. Batches go out with one
// sendmmsg; Poll sleeps its whole wait unless an urgent datagram arrives
// (ppoll on the urgent socket only: no wake-up per regular datagram) and
// then drains both sockets with recvmmsg into buffers it owns, to the last
// datagram (bounded: kMaxDrain a call). The urgent socket shares the port:
// the two form a SO_REUSEPORT group whose classic BPF program sends a
// datagram with the urgent flag (kFabricUrgentFlag) to the urgent socket and
// every other to the regular one, so urgent probes take the same 5-tuple,
// hence the same ECMP path, as the others. An abstract unix socket named
// after the port keeps a second agent in the namespace from joining the
// group (its Open fails instead). ReserveReceive sizes both receive buffers
// (SO_RCVBUFFORCE where the agent may, else SO_RCVBUF up to rmem_max).
// Path i > 0 of a (rail, peer) (FabricSend.path) leaves from its own
// send-only socket bound to port + i (port 0: any free port), so each
// fabric path is its own 5-tuple for the fabric's ECMP hash; path 0 and
// everything else leave from the regular socket (port).
// Probes are marked DSCP CS6 (IP_TOS 0xc0, network control) and don't
// fragment (DF: IP_PMTUDISC_DO).
// Thread-compatible.
#pragma once

#include <memory>
#include <string>

#include "lockstep/agent/ports/fabric_socket.h"

namespace lockstep::agent {

inline constexpr int kFabricProbeTos = 0xc0;  // DSCP 48 (CS6) << 2

class UdpFabricSocket final : public FabricSocket {
 public:
  // Locks and binds bind_address:port (0: a free port) twice (regular and
  // urgent, one SO_REUSEPORT group), non-blocking, IP_PKTINFO on, and for
  // `paths` > 1 a send-only socket per path i in 1 .. paths - 1 on port + i
  // (0: any free port each).
  static Result<std::unique_ptr<UdpFabricSocket>> Open(const std::string& bind_address, int port, const Clock& clock,
                                                       int paths = 1);
  ~UdpFabricSocket() override;
  UdpFabricSocket(const UdpFabricSocket&) = delete;
  UdpFabricSocket& operator=(const UdpFabricSocket&) = delete;

  Status SendVia(std::span<const uint8_t> bytes, uint32_t dest, int port, int ifindex, uint32_t source) override;
  size_t SendBatch(std::span<FabricSend> sends) override;
  Status Poll(std::chrono::nanoseconds max_wait, std::vector<FabricDatagram>& out) override;
  int port() const override { return port_; }
  // The source port path `path` leaves from (port() for path 0).
  int SourcePort(int path) const;
  void ReserveReceive(size_t datagrams) override;
  // The regular socket's receive buffer as the kernel reports it (SO_RCVBUF:
  // twice the bytes asked for, bookkeeping included).
  size_t ReceiveBufferBytes() const;

  // At most this many datagrams per socket and Poll: a flood (replays at any
  // rate) cannot keep the prober reading forever. 64 ticks of 256 paths.
  static constexpr size_t kMaxDrain = 16384;
  // Receive-buffer bytes a queued probe takes (its skb's truesize, ~700 B
  // measured on the lab's veths; rounded up).
  static constexpr size_t kDatagramTruesize = 1024;

 private:
  struct RecvSlots;  // recvmmsg's headers and buffers, set up once
  UdpFabricSocket(int fd, int urgent_fd, int port, const Clock& clock);
  Status Drain(int fd, bool urgent, std::vector<FabricDatagram>& out);
  // Which socket a path leaves by: 0 the regular one, i > 0 path_fds_[i - 1].
  size_t SocketOf(int path) const;
  int fd_;
  int urgent_fd_;
  int lock_fd_ = -1;           // the port's lock (LockPort)
  std::vector<int> path_fds_;  // paths 1 .. paths - 1: send only
  int port_;
  size_t reserved_ = 0;  // datagrams ReserveReceive sized the buffers for
  const Clock& clock_;
  std::unique_ptr<RecvSlots> recv_;
};

}  // namespace lockstep::agent
