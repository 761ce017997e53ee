#include "lockstep/agent/net/udp_fabric_socket.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "lockstep/agent/fabric_probe.h"
#include "owned_fd.h"

namespace lockstep::agent {
namespace {

constexpr size_t kBatch = 64;         // datagrams per sendmmsg / recvmmsg
constexpr size_t kRecvBuffer = FabricDatagram::kMaxBytes;  // a probe is 54 bytes; longer ones arrive cut (and are dropped)
constexpr size_t kRecvControl = CMSG_SPACE(sizeof(in_pktinfo)) + CMSG_SPACE(sizeof(timespec)) + 32;
constexpr size_t kControl = CMSG_SPACE(sizeof(in_pktinfo));

// One outgoing datagram's headers: destination, iovec, IP_PKTINFO.
struct SendSlot {
  sockaddr_in to;
  iovec iov;
  alignas(cmsghdr) char control[kControl];
};

void Fill(SendSlot& slot, mmsghdr& m, std::span<const uint8_t> bytes, uint32_t dest, int port, int ifindex,
          uint32_t source) {
  slot.to = sockaddr_in{};
  slot.to.sin_family = AF_INET;
  slot.to.sin_port = htons(static_cast<uint16_t>(port));
  slot.to.sin_addr.s_addr = htonl(dest);
  slot.iov = iovec{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  std::memset(slot.control, 0, sizeof slot.control);
  m = mmsghdr{};
  m.msg_hdr.msg_name = &slot.to;
  m.msg_hdr.msg_namelen = sizeof slot.to;
  m.msg_hdr.msg_iov = &slot.iov;
  m.msg_hdr.msg_iovlen = 1;
  m.msg_hdr.msg_control = slot.control;
  m.msg_hdr.msg_controllen = sizeof slot.control;
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg_hdr);
  c->cmsg_level = IPPROTO_IP;
  c->cmsg_type = IP_PKTINFO;
  c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
  in_pktinfo info{};
  info.ipi_ifindex = ifindex;
  info.ipi_spec_dst.s_addr = htonl(source);
  std::memcpy(CMSG_DATA(c), &info, sizeof info);
}

// One probe socket bound to bind_address:port (0: any free port), in the
// port's SO_REUSEPORT group when `reuseport`.
Result<OwnedFd> OpenOne(const std::string& bind_address, int port, bool reuseport) {
  OwnedFd owned(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!owned.valid()) return Unavailable(std::string("fabric probe socket: ") + std::strerror(errno));
  const int fd = owned.get();  // closed by `owned` on every error return
  auto fail = [](const std::string& what) { return Unavailable(what + ": " + std::strerror(errno)); };
  int on = 1;
  if (::setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on) != 0) return fail("IP_PKTINFO");
  // The kernel's receive time on each datagram: the prober reads its socket
  // once per tick, and acks and one-way delays must not include that wait.
  if (::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) != 0) return fail("SO_TIMESTAMPNS");
  // DSCP CS6 (network control), as BFD and routing protocols are marked: a
  // fabric that queues this class apart (and netlab's shapers) does not make
  // probes wait behind the bulk traffic they protect, so a full queue is not
  // mistaken for a dead link.
  int tos = kFabricProbeTos;
  if (::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos) != 0) return fail("IP_TOS");
  // Don't fragment: a probe is 74 bytes, and for DF datagrams of an
  // unconnected socket the kernel leaves the IP ID 0 instead of running its
  // hashed ID generator per packet (~1% of the prober's samples).
  int pmtu = IP_PMTUDISC_DO;
  if (::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0) return fail("IP_MTU_DISCOVER");
  if (reuseport && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) return fail("SO_REUSEPORT");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, bind_address.c_str(), &a.sin_addr) != 1) {
    return InvalidArgument("fabric probe socket: bind address \"" + bind_address + "\" is not IPv4");
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return fail("fabric probe socket: bind " + bind_address + ":" + std::to_string(port) +
                " (is another agent running, or fabric.port taken?)");
  }
  return owned;
}

// The port's lock in this network namespace: an abstract unix socket named
// after it. The probe sockets share their port (SO_REUSEPORT), so a second
// agent's bind would join their group and take half their datagrams
// instead of failing; it fails here first.
Result<OwnedFd> LockPort(const std::string& bind_address, int port) {
  OwnedFd owned(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!owned.valid()) return Unavailable(std::string("fabric probe port lock: ") + std::strerror(errno));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = "lockstep-fabric-probe-" + bind_address + ":" + std::to_string(port);
  std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof a.sun_path - 1));  // sun_path[0] = 0: abstract
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(owned.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) {
    return Unavailable("fabric probe socket: port " + std::to_string(port) + " is in use by another lockstep agent " +
                       "in this network namespace (" + std::strerror(errno) + ")");
  }
  return owned;
}

// The kernel's choice between the port's two sockets, per datagram: the
// urgent socket (index 1 of the SO_REUSEPORT group, bound second) for a
// datagram whose flags byte has the urgent bit, the regular one (index 0)
// for everything else (a datagram too short to have the byte included: the
// load fails and the program returns 0). The program sees the UDP payload.
Status SteerUrgent(int fd) {
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, static_cast<uint32_t>(kFabricFlagsOffset)),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, kFabricUrgentFlag),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, 0),
      BPF_STMT(BPF_RET | BPF_K, 1),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(code)), code};
  if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) != 0) {
    return Unavailable(std::string("fabric probe socket: SO_ATTACH_REUSEPORT_CBPF: ") + std::strerror(errno));
  }
  return Status::Ok();
}

int BoundPort(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

}  // namespace

Result<std::unique_ptr<UdpFabricSocket>> UdpFabricSocket::Open(const std::string& bind_address, int port,
                                                               const Clock& clock, int paths) {
  // The paths' send-only sockets first: a fixed port range that is taken
  // fails before the regular pair is bound.
  std::vector<OwnedFd> path_fds;
  for (int i = 1; i < paths; ++i) {
    const int path_port = port == 0 ? 0 : port + i;
    if (path_port > 65535) return InvalidArgument("fabric probe socket: fabric.port + pathsPerRail is above 65535");
    auto fd = OpenOne(bind_address, path_port, false);
    if (!fd.ok()) {
      return Unavailable(fd.error().message + " (path " + std::to_string(i) +
                         "'s source port: fabric.port + i; lower fabric.pathsPerRail or move fabric.port)");
    }
    path_fds.push_back(std::move(*fd));
  }
  // Port 0 (tests): a port the kernel finds free, then locked and bound as a
  // pair; another test may take it in between: a few tries.
  for (int attempt = 0;; ++attempt) {
    int want = port;
    if (port == 0) {
      auto probe = OpenOne(bind_address, 0, false);
      if (!probe.ok()) return probe.error();
      want = BoundPort(probe->get());
    }  // closed: free for the pair
    auto lock = LockPort(bind_address, want);
    auto fd = lock.ok() ? OpenOne(bind_address, want, true) : Result<OwnedFd>(lock.error());
    auto urgent = fd.ok() ? OpenOne(bind_address, want, true) : Result<OwnedFd>(fd.error());
    Status steered = urgent.ok() ? SteerUrgent(fd->get()) : urgent.error();
    if (steered.ok()) {
      auto s = std::unique_ptr<UdpFabricSocket>(new UdpFabricSocket(fd->release(), urgent->release(), want, clock));
      s->lock_fd_ = lock->release();
      for (OwnedFd& p : path_fds) s->path_fds_.push_back(p.release());
      return s;
    }
    if (port != 0 || attempt >= 20) return steered.error();
  }
}

UdpFabricSocket::~UdpFabricSocket() {
  ::close(fd_);
  ::close(urgent_fd_);
  ::close(lock_fd_);
  for (int fd : path_fds_) ::close(fd);
}

size_t UdpFabricSocket::SocketOf(int path) const {
  if (path <= 0 || path_fds_.empty()) return 0;
  return 1 + static_cast<size_t>(path - 1) % path_fds_.size();
}

int UdpFabricSocket::SourcePort(int path) const {
  const size_t s = SocketOf(path);
  return s == 0 ? port_ : BoundPort(path_fds_[s - 1]);
}

Status UdpFabricSocket::SendVia(std::span<const uint8_t> bytes, uint32_t dest, int port, int ifindex,
                                uint32_t source) {
  SendSlot slot;
  mmsghdr m;
  Fill(slot, m, bytes, dest, port, ifindex, source);
  if (::sendmsg(fd_, &m.msg_hdr, 0) < 0) {
    return Unavailable(std::string("fabric probe send (ifindex ") + std::to_string(ifindex) + "): " +
                       std::strerror(errno));
  }
  return Status::Ok();
}

size_t UdpFabricSocket::SendBatch(std::span<FabricSend> sends) {
  std::array<SendSlot, kBatch> slots;
  std::array<mmsghdr, kBatch> msgs;
  std::array<size_t, kBatch> which;  // slot -> index in sends
  size_t failed = 0;
  // One sendmmsg per socket (path index) and kBatch datagrams.
  for (size_t sock = 0; sock <= path_fds_.size(); ++sock) {
    const int fd = sock == 0 ? fd_ : path_fds_[sock - 1];
    for (size_t next = 0; next < sends.size();) {
      size_t n = 0;
      for (; next < sends.size() && n < kBatch; ++next) {
        const FabricSend& s = sends[next];
        if (SocketOf(s.path) != sock) continue;
        Fill(slots[n], msgs[n], s.bytes, s.dest, s.port, s.ifindex, s.source);
        which[n++] = next;
      }
      // sendmmsg stops at the first datagram the kernel refuses (say, a rail
      // without a route): that one is marked failed and the rest go on.
      size_t done = 0;
      while (done < n) {
        const int got = ::sendmmsg(fd, &msgs[done], static_cast<unsigned>(n - done), 0);
        if (got <= 0) {
          if (got < 0 && errno == EINTR) continue;
          sends[which[done]].sent = false;
          ++failed;
          ++done;
          continue;
        }
        for (int i = 0; i < got; ++i) sends[which[done + static_cast<size_t>(i)]].sent = true;
        done += static_cast<size_t>(got);
      }
    }
  }
  return failed;
}

Status UdpFabricSocket::Poll(std::chrono::nanoseconds max_wait, std::vector<FabricDatagram>& out) {
  // Sleep the whole wait unless an urgent datagram comes: the others queue
  // in the socket with their kernel receive time (no wake-up per datagram).
  // The urgent port is read only when ppoll says it has something (most
  // wake-ups are timer ticks: one system call fewer each).
  const int64_t ns = std::max<int64_t>(0, max_wait.count());
  bool urgent_ready = true;
  if (ns > 0) {
    const timespec sleep{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    pollfd p{urgent_fd_, POLLIN, 0};
    // 0: the wait ran out with nothing urgent; EINTR: drain early, harmless.
    urgent_ready = ::ppoll(&p, 1, &sleep, nullptr) != 0;
  }
  if (urgent_ready) {
    if (Status s = Drain(urgent_fd_, true, out); !s.ok()) return s;
  }
  return Drain(fd_, false, out);
}

// Every datagram slot of a recvmmsg, pointing at its own buffers. The
// kernel writes back only the lengths (msg_len, msg_namelen,
// msg_controllen) and msg_flags, so a slot is set up once and only its
// lengths are reset after use (not 64 headers per call).
struct UdpFabricSocket::RecvSlots {
  std::array<std::array<uint8_t, kRecvBuffer>, kBatch> bufs;
  std::array<sockaddr_in, kBatch> from;
  std::array<iovec, kBatch> iov;
  alignas(cmsghdr) std::array<std::array<char, kRecvControl>, kBatch> control;
  std::array<mmsghdr, kBatch> msgs;

  RecvSlots() {
    for (size_t i = 0; i < kBatch; ++i) {
      iov[i] = iovec{bufs[i].data(), bufs[i].size()};
      msgs[i] = mmsghdr{};
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = control[i].data();
      Reset(i);
    }
  }
  void Reset(size_t i) {
    msgs[i].msg_hdr.msg_namelen = sizeof from[i];
    msgs[i].msg_hdr.msg_controllen = control[i].size();
    msgs[i].msg_hdr.msg_flags = 0;
    msgs[i].msg_len = 0;
  }
};

UdpFabricSocket::UdpFabricSocket(int fd, int urgent_fd, int port, const Clock& clock)
    : fd_(fd), urgent_fd_(urgent_fd), port_(port), clock_(clock), recv_(std::make_unique<RecvSlots>()) {}

Status UdpFabricSocket::Drain(int fd, bool urgent, std::vector<FabricDatagram>& out) {
  RecvSlots& r = *recv_;
  // To the last datagram: what stays queued is read only at the next wake-up,
  // after this one judged the timeouts its acks would have met (at 128 paths
  // a stall of ~30 ms queues more than the 256 datagrams this read once).
  for (size_t read = 0; read < kMaxDrain;) {
    const int got = ::recvmmsg(fd, r.msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
    if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Unavailable(std::string("fabric probe receive: ") + std::strerror(errno));
    }
    if (got <= 0) break;  // EAGAIN: drained
    read += static_cast<size_t>(got);
    // Kernel receive stamps are wall-clock: map them onto the monotonic
    // clock through one pair of readings (a wall step between the two
    // readings and the stamp is clamped: never later than now).
    const MonoTime mono_now = clock_.Monotonic();
    const WallTime wall_now = clock_.Wall();
    for (int i = 0; i < got; ++i) {
      const mmsghdr& m = r.msgs[static_cast<size_t>(i)];
      FabricDatagram& d = out.emplace_back();
      d.received = mono_now;
      d.urgent = urgent;
      d.Assign(std::span<const uint8_t>(r.bufs[static_cast<size_t>(i)].data(), m.msg_len));
      d.source = ntohl(r.from[static_cast<size_t>(i)].sin_addr.s_addr);
      for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg_hdr); c != nullptr;
           c = CMSG_NXTHDR(const_cast<msghdr*>(&m.msg_hdr), c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
          in_pktinfo info{};
          std::memcpy(&info, CMSG_DATA(c), sizeof info);
          d.ifindex = info.ipi_ifindex;
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
          timespec ts{};
          std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
          const WallTime stamp{std::chrono::duration_cast<WallTime::duration>(
              std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec))};
          const auto age = std::clamp<Nanos>(std::chrono::duration_cast<Nanos>(wall_now - stamp), Nanos(0),
                                             std::chrono::seconds(1));
          d.received = mono_now - age;
        }
      }
      r.Reset(static_cast<size_t>(i));
    }
    if (static_cast<size_t>(got) < kBatch) break;
  }
  return Status::Ok();
}

void UdpFabricSocket::ReserveReceive(size_t datagrams) {
  if (datagrams <= reserved_) return;  // only grows: paths that leave free nothing worth a system call
  reserved_ = datagrams;
  const size_t bytes = std::min<size_t>(datagrams * kDatagramTruesize, size_t{64} << 20);
  const int want = static_cast<int>(bytes);
  for (int fd : {fd_, urgent_fd_}) {
    // SO_RCVBUFFORCE ignores net.core.rmem_max (CAP_NET_ADMIN: the agent
    // runs as root); without it SO_RCVBUF is capped at rmem_max.
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof want) != 0) {
      (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
    }
  }
}

size_t UdpFabricSocket::ReceiveBufferBytes() const {
  int v = 0;
  socklen_t len = sizeof v;
  if (::getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &v, &len) != 0) return 0;
  return static_cast<size_t>(v);
}

}  // namespace lockstep::agent
