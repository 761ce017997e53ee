#include "clocksync_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace lockstep::bench {
namespace {

void SetTimeouts(int fd, double timeout_s) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // also bounds connect()
}

// A connected socket to ip:port in the current namespace, or -1.
int ConnectIp(const std::string& ip, int port, double timeout_s) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) return -1;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  SetTimeouts(fd, timeout_s);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void EnterNs(int fd) {
  if (::setns(fd, CLONE_NEWNET) != 0) throw std::runtime_error(std::string("setns: ") + std::strerror(errno));
}

}  // namespace

Netns::Netns() {
  root_fd_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (root_fd_ < 0) throw std::runtime_error(std::string("/proc/self/ns/net: ") + std::strerror(errno));
}

Netns::~Netns() {
  Close();
  if (root_fd_ >= 0) ::close(root_fd_);
}

void Netns::Close() {
  for (auto& [ns, fd] : fds_) ::close(fd);
  fds_.clear();
}

int Netns::Fd(const std::string& ns) {
  auto it = fds_.find(ns);
  if (it != fds_.end()) return it->second;
  std::string path = "/run/netns/" + ns;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  fds_[ns] = fd;
  return fd;
}

int Netns::Connect(const std::string& ns, int port, double timeout_s) {
  EnterNs(Fd(ns));
  int fd = ConnectIp("127.0.0.1", port, timeout_s);
  EnterNs(root_fd_);
  return fd;
}

int ConnectTcp(const std::string& host_port, double timeout_s) {
  size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return -1;
  int port = 0;
  try {
    port = std::stoi(host_port.substr(colon + 1));
  } catch (const std::exception&) {
    return -1;
  }
  return ConnectIp(host_port.substr(0, colon), port, timeout_s);
}

bool SendGet(int fd, const std::string& path) {
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  size_t off = 0;
  while (off < req.size()) {
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::string> ReadBody(int fd) {
  std::string data;
  char buf[65536];
  bool ok = true;
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  size_t head_end = data.find("\r\n\r\n");
  std::string status_line = data.substr(0, data.find("\r\n"));
  if (data.rfind("HTTP/1.", 0) != 0 || (status_line + " ").find(" 200 ") == std::string::npos) return std::nullopt;
  return head_end == std::string::npos ? std::string() : data.substr(head_end + 4);
}

std::map<std::string, std::optional<std::string>> GetMany(Netns& netns, const std::vector<std::string>& namespaces,
                                                           const std::string& path, int port) {
  std::vector<int> socks;  // in the order asked
  for (const auto& ns : namespaces) socks.push_back(netns.Connect(ns, port));
  for (int& fd : socks) {
    if (fd >= 0 && !SendGet(fd, path)) {
      ::close(fd);
      fd = -1;
    }
  }
  std::map<std::string, std::optional<std::string>> out;
  for (size_t k = 0; k < socks.size(); ++k) out[namespaces[k]] = socks[k] >= 0 ? ReadBody(socks[k]) : std::nullopt;
  return out;
}

std::optional<std::string> HttpGet(const std::string& host_port, const std::string& path, double timeout_s) {
  int fd = ConnectTcp(host_port, timeout_s);
  if (fd < 0) return std::nullopt;
  if (!SendGet(fd, path)) {
    ::close(fd);
    return std::nullopt;
  }
  return ReadBody(fd);
}

}  // namespace lockstep::bench
