#include "lockstep/agent/net/unix_line_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <vector>

namespace lockstep::agent {

namespace {

Status Fail(const std::string& path, const std::string& what) {
  return Unavailable("local socket " + path + ": " + what + ": " + std::strerror(errno));
}

// mkdir -p of the socket's directory (0755).
void MakeParents(const std::string& path) {
  for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    ::mkdir(path.substr(0, pos).c_str(), 0755);
  }
}

}  // namespace

UnixLineServer::UnixLineServer(std::string path, LineHandler& handler, UnixLineServerOptions options)
    : path_(std::move(path)), handler_(handler), o_(options) {}

UnixLineServer::~UnixLineServer() { Stop(); }

Status UnixLineServer::Start() {
  sockaddr_un sa{};
  if (path_.empty() || path_.size() >= sizeof sa.sun_path) {
    return InvalidArgument("local socket path \"" + path_ + "\" is empty or longer than " +
                           std::to_string(sizeof sa.sun_path - 1) + " bytes");
  }
  MakeParents(path_);
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      errno = EEXIST;
      return Fail(path_, "exists and is not a socket");
    }
    // A live socket belongs to another agent on this machine (testbeds run
    // several): leave it. A dead one is a previous run's: replace it.
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un live{};
    live.sun_family = AF_UNIX;
    std::memcpy(live.sun_path, path_.c_str(), path_.size());
    const bool in_use = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&live), sizeof live) == 0;
    if (probe >= 0) ::close(probe);
    if (in_use) {
      errno = EADDRINUSE;
      return Fail(path_, "served by another process");
    }
    ::unlink(path_.c_str());
  }
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Fail(path_, "socket");
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path_.c_str(), path_.size());
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    Status s = Fail(path_, "bind");
    ::close(listen_fd_);
    listen_fd_ = -1;
    return s;
  }
  ::chmod(path_.c_str(), 0666);
  if (::listen(listen_fd_, 64) != 0 || ::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    Status s = Fail(path_, "listen");
    ::close(listen_fd_);
    listen_fd_ = -1;
    ::unlink(path_.c_str());
    return s;
  }
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void UnixLineServer::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  const char c = 1;
  (void)!::write(wake_[1], &c, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
  listen_fd_ = wake_[0] = wake_[1] = -1;
  ::unlink(path_.c_str());
}

void UnixLineServer::Run() {
  struct Client {
    int fd = -1;
    std::string in{}, out{};
  };
  std::map<LineClient, Client> clients;
  LineClient next_id = 1;
  auto drop = [&](LineClient id) {
    auto it = clients.find(id);
    if (it == clients.end()) return;
    ::close(it->second.fd);
    clients.erase(it);
    handler_.OnClose(id);
  };
  std::vector<pollfd> fds;
  std::vector<LineClient> ids;
  while (!stop_) {
    fds.clear();
    ids.clear();
    fds.push_back({.fd = wake_[0], .events = POLLIN, .revents = 0});
    fds.push_back({.fd = listen_fd_, .events = POLLIN, .revents = 0});
    for (const auto& [id, c] : clients) {
      fds.push_back({.fd = c.fd, .events = static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), .revents = 0});
      ids.push_back(id);
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) break;
    if (stop_) break;
    if (fds[1].revents & POLLIN) {
      while (true) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (clients.size() >= o_.max_clients) {
          ::close(fd);
          continue;
        }
        const LineClient id = next_id++;
        clients[id] = Client{.fd = fd};
        handler_.OnOpen(id);
      }
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      const LineClient id = ids[i];
      auto it = clients.find(id);
      if (it == clients.end()) continue;
      Client& c = it->second;
      bool dead = false;
      if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        while (true) {
          ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
          if (n > 0) {
            c.in.append(buf, static_cast<size_t>(n));
            continue;
          }
          if (n < 0 && errno == EINTR) continue;
          if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) dead = true;
          break;
        }
        size_t pos;
        while ((pos = c.in.find('\n')) != std::string::npos) {
          std::string line = c.in.substr(0, pos);
          c.in.erase(0, pos + 1);
          if (!line.empty() && line.back() == '\r') line.pop_back();
          c.out += handler_.OnLine(id, line);
        }
        if (c.in.size() > o_.max_line || c.out.size() > o_.max_buffered) dead = true;
      }
      while (!dead && !c.out.empty()) {
        ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          c.out.erase(0, static_cast<size_t>(n));
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else {
          if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) dead = true;
          break;
        }
      }
      if (dead) drop(id);
    }
  }
  std::vector<LineClient> all;
  for (const auto& [id, c] : clients) all.push_back(id);
  for (LineClient id : all) drop(id);
}

}  // namespace lockstep::agent
