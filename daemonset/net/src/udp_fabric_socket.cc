#include "lockstep/agent/net/udp_fabric_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lockstep::agent {

Result<std::unique_ptr<UdpFabricSocket>> UdpFabricSocket::Open(const std::string& bind_address, int port,
                                                               const Clock& clock) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(std::string("fabric probe socket: ") + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    std::string m = what + ": " + std::strerror(errno);
    ::close(fd);
    return Unavailable(m);
  };
  int on = 1;
  if (::setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on) != 0) return fail("IP_PKTINFO");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, bind_address.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    return InvalidArgument("fabric probe socket: bind address \"" + bind_address + "\" is not IPv4");
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return fail("fabric probe socket: bind " + bind_address + ":" + std::to_string(port) +
                " (is another agent running, or fabric.port taken?)");
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return std::unique_ptr<UdpFabricSocket>(new UdpFabricSocket(fd, ntohs(a.sin_port), clock));
}

UdpFabricSocket::~UdpFabricSocket() { ::close(fd_); }

Status UdpFabricSocket::SendVia(std::span<const uint8_t> bytes, uint32_t dest, int port, int ifindex,
                                uint32_t source) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(dest);
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in_pktinfo))] = {};
  msghdr msg{};
  msg.msg_name = &to;
  msg.msg_namelen = sizeof to;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = IPPROTO_IP;
  c->cmsg_type = IP_PKTINFO;
  c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
  in_pktinfo info{};
  info.ipi_ifindex = ifindex;
  info.ipi_spec_dst.s_addr = htonl(source);
  std::memcpy(CMSG_DATA(c), &info, sizeof info);
  if (::sendmsg(fd_, &msg, 0) < 0) {
    return Unavailable(std::string("fabric probe send (ifindex ") + std::to_string(ifindex) + "): " +
                       std::strerror(errno));
  }
  return Status::Ok();
}

Status UdpFabricSocket::Poll(std::chrono::nanoseconds max_wait, std::vector<FabricDatagram>& out) {
  pollfd p{fd_, POLLIN, 0};
  int ms = static_cast<int>((max_wait.count() + 999'999) / 1'000'000);
  int n = ::poll(&p, 1, ms < 0 ? 0 : ms);
  if (n < 0 && errno != EINTR) return Unavailable(std::string("fabric probe poll: ") + std::strerror(errno));
  if (n <= 0) return Status::Ok();
  for (int i = 0; i < 256; ++i) {
    uint8_t buf[2048];
    sockaddr_in from{};
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char control[256];
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof from;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t got = ::recvmsg(fd_, &msg, MSG_DONTWAIT);
    if (got < 0) break;  // EAGAIN: drained
    FabricDatagram d;
    d.received = clock_.Monotonic();
    d.bytes.assign(buf, buf + got);
    d.source = ntohl(from.sin_addr.s_addr);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
        in_pktinfo info{};
        std::memcpy(&info, CMSG_DATA(c), sizeof info);
        d.ifindex = info.ipi_ifindex;
      }
    }
    out.push_back(std::move(d));
  }
  return Status::Ok();
}

}  // namespace lockstep::agent
