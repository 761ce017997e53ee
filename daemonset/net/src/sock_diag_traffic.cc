#include "lockstep/agent/net/sock_diag_traffic.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "owned_fd.h"

namespace lockstep::agent {
namespace {

constexpr int kTcpEstablished = 1;  // TCP_ESTABLISHED (netinet/tcp.h clashes with linux/tcp.h)

std::string Errno(const char* what) { return std::string("sock_diag: ") + what + ": " + std::strerror(errno); }

}  // namespace

Result<std::unique_ptr<SockDiagTraffic>> SockDiagTraffic::Open() {
  OwnedFd fd(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!fd.valid()) return Unavailable(Errno("socket"));
  return std::unique_ptr<SockDiagTraffic>(new SockDiagTraffic(fd.release()));
}

SockDiagTraffic::~SockDiagTraffic() { ::close(fd_); }

Result<std::vector<TcpFlow>> SockDiagTraffic::Flows() {
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } request{};
  request.nlh.nlmsg_len = sizeof(request);
  request.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  request.req.sdiag_family = AF_INET;
  request.req.sdiag_protocol = IPPROTO_TCP;
  request.req.idiag_states = 1u << kTcpEstablished;
  request.req.idiag_ext = 1u << (INET_DIAG_INFO - 1);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd_, &request, sizeof(request), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0) {
    return Unavailable(Errno("send"));
  }
  std::vector<TcpFlow> flows;
  buffer_.resize(64 * 1024);
  for (;;) {
    const ssize_t n = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable(Errno("recv"));
    }
    if (n == 0) return flows;
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buffer_.data()); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE) return flows;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        errno = -e->error;
        return Unavailable(Errno("dump"));
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
      const auto* msg = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      TcpFlow f;
      std::memcpy(&f.cookie, msg->id.idiag_cookie, sizeof(f.cookie));
      f.remote = ntohl(msg->id.idiag_dst[0]);
      f.remote_port = ntohs(msg->id.idiag_dport);
      int attr_len = static_cast<int>(h->nlmsg_len) - static_cast<int>(NLMSG_LENGTH(sizeof(*msg)));
      for (auto* a = reinterpret_cast<rtattr*>(const_cast<inet_diag_msg*>(msg) + 1); RTA_OK(a, attr_len);
           a = RTA_NEXT(a, attr_len)) {
        if (a->rta_type != INET_DIAG_INFO) continue;
        tcp_info info{};
        std::memcpy(&info, RTA_DATA(a), std::min<size_t>(RTA_PAYLOAD(a), sizeof(info)));
        // Kernels before 4.1/4.2 end tcp_info before these: 0, as on a quiet socket.
        if (RTA_PAYLOAD(a) >= offsetof(tcp_info, tcpi_bytes_received) + sizeof(info.tcpi_bytes_received)) {
          f.bytes = info.tcpi_bytes_acked + info.tcpi_bytes_received;
        }
      }
      flows.push_back(f);
    }
  }
}

}  // namespace lockstep::agent
