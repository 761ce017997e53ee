#include "lockstep/agent/net/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lockstep::agent {

Result<HttpReply> HttpGet(const std::string& host, int port, const std::string& path,
                          std::chrono::milliseconds timeout) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument("\"" + host + "\" is not an IPv4 address");
  }
  const std::string where = host + ":" + std::to_string(port);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Unavailable(std::string("socket: ") + std::strerror(errno));
  auto done = [fd](auto r) {
    ::close(fd);
    return r;
  };
  const int ms = static_cast<int>(timeout.count());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    return done(Result<HttpReply>(Unavailable("cannot connect to " + where + ": " + std::strerror(errno))));
  }
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof err;
  if (::poll(&p, 1, ms) <= 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    return done(Result<HttpReply>(
        Unavailable("cannot connect to " + where + ": " + (err ? std::strerror(err) : "timed out") +
                    " (is the agent running, and is this its timeApiAddr?)")));
  }
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + where + "\r\nConnection: close\r\n\r\n";
  size_t off = 0;
  while (off < req.size()) {
    p = {fd, POLLOUT, 0};
    if (::poll(&p, 1, ms) <= 0) return done(Result<HttpReply>(Unavailable("timed out sending to " + where)));
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return done(Result<HttpReply>(Unavailable("send to " + where + ": " + std::strerror(errno))));
    }
    if (n > 0) off += static_cast<size_t>(n);
  }
  std::string resp;
  for (;;) {
    p = {fd, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return done(Result<HttpReply>(Unavailable("timed out reading from " + where)));
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return done(Result<HttpReply>(Unavailable("read from " + where + ": " + std::strerror(errno))));
    }
    resp.append(buf, static_cast<size_t>(n));
    if (resp.size() > (1u << 20)) return done(Result<HttpReply>(Internal("reply from " + where + " is too large")));
  }
  ::close(fd);
  size_t sp = resp.find(' ');
  size_t head_end = resp.find("\r\n\r\n");
  if (!resp.starts_with("HTTP/") || sp == std::string::npos || head_end == std::string::npos) {
    return Internal("malformed HTTP reply from " + where);
  }
  HttpReply r;
  r.status = std::atoi(resp.c_str() + sp + 1);
  r.body = resp.substr(head_end + 4);
  return r;
}

}  // namespace lockstep::agent
