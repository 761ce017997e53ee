#include "lockstep/agent/net/udp_timestamped_transport.h"

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "owned_fd.h"

namespace lockstep::agent {
namespace {

constexpr int kMaxPerDrain = 512;

int64_t ToNs(const timespec& ts) { return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec; }

sockaddr_in ToSockaddr(const Endpoint& e) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(e.port);
  a.sin_addr.s_addr = htonl(e.ipv4);
  return a;
}

// Finds the software stamp in an SCM_TIMESTAMPING cmsg, 0 if none.
int64_t SoftwareStamp(msghdr& msg) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING &&
        c->cmsg_len >= CMSG_LEN(sizeof(scm_timestamping))) {
      scm_timestamping ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      return ToNs(ts.ts[0]);
    }
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<UdpTimestampedTransport>> UdpTimestampedTransport::Open(const std::string& host, int port,
                                                                               const NodeClock& clock) {
  auto ep = Endpoint::Parse(host, port);
  if (!ep.ok()) return InvalidArgument("probe bind address: " + ep.error().message);
  OwnedFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Unavailable(std::string("probe socket: ") + std::strerror(errno));
  // fd closes itself on every return below but the last.
  auto fail = [](const std::string& what) {
    return Error{ErrorCode::kUnavailable, what + ": " + std::strerror(errno)};
  };
  unsigned flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
                   SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) != 0) {
    return fail("probe socket: SO_TIMESTAMPING");
  }
  sockaddr_in addr = ToSockaddr(*ep);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return fail("probe socket: cannot bind " + ep->ToString());
  }
  socklen_t len = sizeof addr;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return fail("probe socket: getsockname");
  }
  Endpoint local{ntohl(addr.sin_addr.s_addr), ntohs(addr.sin_port)};
  return std::unique_ptr<UdpTimestampedTransport>(new UdpTimestampedTransport(fd.release(), local, clock));
}

UdpTimestampedTransport::~UdpTimestampedTransport() {
  if (fd_ >= 0) ::close(fd_);
}

Result<uint32_t> UdpTimestampedTransport::Send(const Endpoint& to, std::span<const uint8_t> bytes) {
  sockaddr_in addr = ToSockaddr(to);
  for (;;) {
    ssize_t n = ::sendto(fd_, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    if (n >= 0) return next_tx_id_++;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      return Unavailable("probe send to " + to.ToString() + ": socket buffer full");
    }
    return Unavailable("probe send to " + to.ToString() + ": " + std::strerror(errno));
  }
}

Result<std::array<uint32_t, 2>> UdpTimestampedTransport::SendPair(const Endpoint& to, std::span<const uint8_t> a,
                                                                   std::span<const uint8_t> b,
                                                                   std::chrono::nanoseconds spacing) {
  auto first = Send(to, a);
  if (!first.ok()) return first.error();
  // Spin (at most 1 ms) so the second packet leaves `spacing` after the first.
  int64_t until = clock_.NowNs() + std::min<int64_t>(spacing.count(), 1'000'000);
  while (clock_.NowNs() < until) {
  }
  auto second = Send(to, b);
  if (!second.ok()) return second.error();
  return std::array<uint32_t, 2>{*first, *second};
}

Status UdpTimestampedTransport::Poll(std::chrono::nanoseconds max_wait, TransportEvents& out) {
  pollfd p{fd_, POLLIN, 0};
  int timeout_ms = static_cast<int>((max_wait.count() + 999'999) / 1'000'000);
  int rc = ::poll(&p, 1, timeout_ms);
  if (rc < 0 && errno != EINTR) return Unavailable(std::string("probe poll: ") + std::strerror(errno));
  if (rc <= 0) return Status::Ok();
  // POLLERR is level-triggered on the error queue (TX stamps), POLLIN on
  // the data queue: read only the queues that have something.
  if (p.revents & POLLERR) DrainErrQueue(out);
  if (p.revents & POLLIN) DrainData(out);
  return Status::Ok();
}

Status UdpTimestampedTransport::Collect(std::chrono::nanoseconds wait, TransportEvents& out) {
  if (wait > std::chrono::nanoseconds(0)) {
    timespec ts{static_cast<time_t>(wait.count() / 1'000'000'000), static_cast<long>(wait.count() % 1'000'000'000)};
    while (::clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
    }
  }
  return Poll(std::chrono::nanoseconds(0), out);
}

void UdpTimestampedTransport::DrainData(TransportEvents& out) {
  // One recvmmsg per batch; a batch that comes back short emptied the queue.
  for (int read = 0; read < kMaxPerDrain;) {
    for (int i = 0; i < kBatch; ++i) {
      Slot& s = slots_[i];
      s.iov = {s.buf.data(), s.buf.size()};
      msgs_[i] = {};
      msgs_[i].msg_hdr.msg_name = &s.from;
      msgs_[i].msg_hdr.msg_namelen = sizeof s.from;
      msgs_[i].msg_hdr.msg_iov = &s.iov;
      msgs_[i].msg_hdr.msg_iovlen = 1;
      msgs_[i].msg_hdr.msg_control = s.control;
      msgs_[i].msg_hdr.msg_controllen = sizeof s.control;
    }
    int n = ::recvmmsg(fd_, msgs_.data(), kBatch, MSG_DONTWAIT, nullptr);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN, or an error we cannot act on here
    }
    for (int i = 0; i < n; ++i) {
      Slot& s = slots_[i];
      msghdr& msg = msgs_[i].msg_hdr;
      const size_t len = msgs_[i].msg_len;
      ReceivedDatagram d;
      d.from = {ntohl(s.from.sin_addr.s_addr), ntohs(s.from.sin_port)};
      // A datagram larger than the buffer is truncated (MSG_TRUNC): keep the
      // prefix so the codec counts it; it can never authenticate.
      d.bytes.assign(s.buf.data(), s.buf.data() + std::min(len, s.buf.size()));
      if (msg.msg_flags & MSG_TRUNC) d.bytes.push_back(0);
      int64_t rt = SoftwareStamp(msg);
      if (rt != 0) {
        d.rx_ns = clock_.FromKernelRealtime(rt);
        d.kernel_stamp = true;
      } else {
        d.rx_ns = clock_.NowNs();
        ++rx_no_stamp_;
      }
      out.received.push_back(std::move(d));
    }
    read += n;
    if (n < kBatch) return;
  }
}

void UdpTimestampedTransport::DrainErrQueue(TransportEvents& out) {
  for (int read = 0; read < kMaxPerDrain;) {
    for (int i = 0; i < kBatch; ++i) {
      Slot& s = slots_[i];
      s.iov = {s.buf.data(), 64};  // OPT_TSONLY: no payload comes back
      msgs_[i] = {};
      msgs_[i].msg_hdr.msg_iov = &s.iov;
      msgs_[i].msg_hdr.msg_iovlen = 1;
      msgs_[i].msg_hdr.msg_control = s.control;
      msgs_[i].msg_hdr.msg_controllen = sizeof s.control;
    }
    int n = ::recvmmsg(fd_, msgs_.data(), kBatch, MSG_ERRQUEUE | MSG_DONTWAIT, nullptr);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < n; ++i) {
      msghdr& msg = msgs_[i].msg_hdr;
      int64_t rt = 0;
      bool have_id = false;
      uint32_t id = 0;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING &&
            c->cmsg_len >= CMSG_LEN(sizeof(scm_timestamping))) {
          scm_timestamping ts;
          std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
          rt = ToNs(ts.ts[0]);
        } else if (((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                    (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) &&
                   c->cmsg_len >= CMSG_LEN(sizeof(sock_extended_err))) {
          sock_extended_err ee;
          std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
          if (ee.ee_errno == ENOMSG && ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && ee.ee_info == SCM_TSTAMP_SND) {
            have_id = true;
            id = ee.ee_data;
          }
        }
      }
      if (have_id && rt != 0) out.tx_stamps.push_back({id, clock_.FromKernelRealtime(rt)});
    }
    read += n;
    if (n < kBatch) return;
  }
}

}  // namespace lockstep::agent
