#include "lockstep/nccl/socket_transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "fd.h"
#include "lockstep/nccl/handle.h"
#include "socket_connections.h"

namespace lockstep::nccl {

namespace {

// ---- configuration ----

Result<long> EnvInt(const std::function<const char*(const char*)>& env, const char* name, long def, long lo, long hi) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
    return InvalidArgument(std::string(name) + " must be an integer between " + std::to_string(lo) + " and " +
                           std::to_string(hi) + " (got \"" + v + "\")");
  }
  return x;
}

// "P1,P2,..." (at most kMaxStreams), or with `range` "P" or "P1-P2" (as
// {lo, hi}); every port in 1024..65535.
Result<std::vector<uint16_t>> ParsePorts(const char* name, const std::string& v, bool range) {
  auto bad = [&] {
    return InvalidArgument(
        std::string(name) + " must be " +
        (range ? "a port or a range P1-P2" : "comma-separated ports, at most " + std::to_string(kMaxStreams)) +
        ", each between 1024 and 65535 (got \"" + v + "\")");
  };
  std::vector<uint16_t> out;
  size_t start = 0;
  const char sep = range ? '-' : ',';
  while (start <= v.size()) {
    size_t end = v.find(sep, start);
    if (end == std::string::npos) end = v.size();
    const std::string tok = v.substr(start, end - start);
    char* e = nullptr;
    errno = 0;
    const long p = std::strtol(tok.c_str(), &e, 10);
    if (tok.empty() || errno != 0 || *e != '\0' || p < 1024 || p > 65535) return bad();
    out.push_back(static_cast<uint16_t>(p));
    start = end + 1;
  }
  if (out.empty() || out.size() > (range ? size_t{2} : static_cast<size_t>(kMaxStreams))) return bad();
  if (range && out.back() < out.front()) return bad();
  return out;
}

// The IPv4 address of interface `name`, or of the first up, non-loopback one.
std::optional<std::array<uint8_t, 4>> InterfaceAddress(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::array<uint8_t, 4>> found;
  for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (name.empty() ? ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) : name != i->ifa_name) {
      continue;
    }
    std::array<uint8_t, 4> a;
    std::memcpy(a.data(), &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
    found = a;
  }
  freeifaddrs(list);
  return found;
}

Result<std::vector<Rail>> ParseRails(const char* value) {
  std::vector<Rail> rails;
  if (value == nullptr || *value == '\0') {
    const std::array<uint8_t, 4> a = InterfaceAddress("").value_or(std::array<uint8_t, 4>{127, 0, 0, 1});
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, a.data(), buf, sizeof buf);
    rails.push_back(Rail{.name = buf, .ipv4 = a});
    return rails;
  }
  std::string all(value);
  size_t start = 0;
  while (start <= all.size()) {
    size_t comma = all.find(',', start);
    std::string tok = all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? all.size() + 1 : comma + 1;
    if (tok.empty()) return InvalidArgument("LOCKSTEP_NCCL_RAILS has an empty entry (got \"" + all + "\")");
    Rail r{.name = tok};
    in_addr addr{};
    if (inet_pton(AF_INET, tok.c_str(), &addr) == 1) {
      std::memcpy(r.ipv4.data(), &addr, 4);
    } else if (std::optional<std::array<uint8_t, 4>> a = InterfaceAddress(tok)) {
      r.ipv4 = *a;
    } else {
      return InvalidArgument("LOCKSTEP_NCCL_RAILS: \"" + tok +
                             "\" is neither an IPv4 address nor an interface with one (IPv6 is not supported yet)");
    }
    rails.push_back(r);
  }
  if (rails.size() > kMaxRails) {
    return InvalidArgument("LOCKSTEP_NCCL_RAILS names " + std::to_string(rails.size()) + " rails; at most " +
                           std::to_string(kMaxRails));
  }
  return rails;
}

uint64_t RandomU64() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  uint64_t v = 0;
  while (v == 0) v = rng();
  return v;
}

sockaddr_in Sockaddr(const std::array<uint8_t, 4>& ip, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  std::memcpy(&sa.sin_addr, ip.data(), 4);
  return sa;
}

std::string AddrString(const std::array<uint8_t, 4>& ip, uint16_t port) {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, ip.data(), buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(port);
}

Result<Fd> StreamSocket() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Unavailable(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// The local (or the peer's) IPv4 address of a connected socket.
Ipv4 SocketAddress(const Fd& fd, bool peer) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  Ipv4 out{};
  const int r = peer ? ::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len)
                     : ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  if (r == 0 && sa.sin_family == AF_INET) std::memcpy(out.data(), &sa.sin_addr, 4);
  return out;
}

// ---- listener ----

constexpr size_t kMaxPendingSockets = 256;
constexpr size_t kMaxPendingGroups = 64;

class SocketListener final : public Listener {
 public:
  SocketListener(std::vector<Fd> fds, uint64_t token, size_t max_outstanding, WarnFn warn,
                 std::shared_ptr<AgentLink> agent)
      : fds_(std::move(fds)),
        token_(token),
        max_outstanding_(max_outstanding),
        warn_(std::move(warn)),
        agent_(std::move(agent)) {}

  Result<std::unique_ptr<RecvConnection>> Accept() override {
    for (Fd& l : fds_) AcceptAll(l);
    ReadHellos();
    for (auto it = groups_.begin(); it != groups_.end(); ++it) {
      if (it->second.have < it->second.fds.size()) continue;
      ConnIdentity who{.id = it->first, .agent = agent_};
      for (const Fd& fd : it->second.fds) {
        who.local.push_back(SocketAddress(fd, false));
        who.remote.push_back(SocketAddress(fd, true));
      }
      auto conn =
          std::make_unique<SocketRecvConnection>(std::move(it->second.fds), max_outstanding_, warn_, std::move(who));
      groups_.erase(it);
      return std::unique_ptr<RecvConnection>(std::move(conn));
    }
    return std::unique_ptr<RecvConnection>();
  }

 private:
  struct Pending {
    Fd fd;
    std::array<uint8_t, kHelloBytes> buf{};
    size_t off = 0;
  };
  struct Group {
    std::vector<Fd> fds;
    size_t have = 0;
  };

  void AcceptAll(Fd& l) {
    while (true) {
      Fd fd(::accept4(l.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) return;  // EAGAIN, or an error the next call retries
      if (pending_.size() >= kMaxPendingSockets) {
        Warn("more than " + std::to_string(kMaxPendingSockets) + " connections without a hello; dropping one");
        continue;
      }
      int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      pending_.push_back(Pending{.fd = std::move(fd)});
    }
  }

  void ReadHellos() {
    for (size_t i = 0; i < pending_.size();) {
      Pending& p = pending_[i];
      ssize_t n = ::recv(p.fd.get(), p.buf.data() + p.off, kHelloBytes - p.off, MSG_DONTWAIT);
      if (n > 0) p.off += static_cast<size_t>(n);
      const bool closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      if (!closed && p.off < kHelloBytes) {
        ++i;
        continue;
      }
      if (!closed) Admit(std::move(p));
      pending_.erase(pending_.begin() + static_cast<long>(i));
    }
  }

  void Admit(Pending p) {
    Result<Hello> h = DecodeHello(p.buf.data());
    if (!h.ok()) return Warn("dropping an incoming stream: " + h.error().message);
    if (h->listen_token != token_) {
      return Warn("dropping an incoming stream made for another listener (stale or foreign handle)");
    }
    auto it = groups_.find(h->conn_id);
    if (it == groups_.end()) {
      if (groups_.size() >= kMaxPendingGroups) return Warn("too many half-open connections; dropping a stream");
      it = groups_.emplace(h->conn_id, Group{.fds = std::vector<Fd>(h->nstreams)}).first;
    }
    Group& g = it->second;
    if (g.fds.size() != h->nstreams || g.fds[h->stream].valid()) {
      return Warn("dropping an incoming stream: inconsistent hello for stream " + std::to_string(h->stream));
    }
    g.fds[h->stream] = std::move(p.fd);
    ++g.have;
  }

  void Warn(const std::string& m) {
    if (warn_) warn_(m);
  }

  std::vector<Fd> fds_;
  uint64_t token_;
  size_t max_outstanding_;
  WarnFn warn_;
  std::vector<Pending> pending_;
  std::map<uint64_t, Group> groups_;
  std::shared_ptr<AgentLink> agent_;
};

// ---- connecting ----

class SocketPendingConnection final : public PendingConnection {
 public:
  SocketPendingConnection(const SocketTransportConfig& config, ListenHandle peer, WarnFn warn,
                          std::shared_ptr<AgentLink> agent)
      : config_(config),
        peer_(std::move(peer)),
        warn_(std::move(warn)),
        agent_(std::move(agent)),
        conn_id_(RandomU64()) {
    const size_t rails = std::max(config_.rails.size(), peer_.rails.size());
    const size_t n = std::min<size_t>(rails * static_cast<size_t>(config_.streams_per_rail), kMaxStreams);
    streams_.resize(n);
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.connect_timeout_ms);
  }

  Status Start() {
    for (size_t i = 0; i < streams_.size(); ++i) {
      streams_[i].remote = i % peer_.rails.size();
      if (Status s = Dial(i); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<SendConnection>> Poll() override {
    bool all = true;
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (Status s = Advance(i); !s.ok()) return s.error();
      all = all && streams_[i].off == kHelloBytes;
    }
    if (all) {
      std::vector<Fd> fds;
      ConnIdentity who{.id = conn_id_, .peer_host = peer_.host, .agent = agent_};
      for (size_t i = 0; i < streams_.size(); ++i) {
        who.local.push_back(config_.rails[i % config_.rails.size()].ipv4);
        who.remote.push_back(peer_.rails[streams_[i].remote].ipv4);
        fds.push_back(std::move(streams_[i].fd));
      }
      return std::unique_ptr<SendConnection>(
          std::make_unique<SocketSendConnection>(std::move(fds), config_.stripe, config_.max_outstanding, warn_,
                                                 std::move(who), config_.traffic, config_.ack_timeout_ms));
    }
    if (std::chrono::steady_clock::now() > deadline_) {
      return Unavailable("connecting to " + AddrString(peer_.rails[0].ipv4, peer_.rails[0].port) + " timed out after " +
                         std::to_string(config_.connect_timeout_ms) + " ms");
    }
    return std::unique_ptr<SendConnection>();
  }

 private:
  struct Stream {
    Fd fd;
    size_t remote = 0;  // the peer rail it dials
    size_t tries = 0;
    bool connected = false;
    std::array<uint8_t, kHelloBytes> hello{};
    size_t off = 0;
  };

  Status Dial(size_t i) {
    Stream& st = streams_[i];
    if (st.tries >= peer_.rails.size()) {
      return Unavailable("stream " + std::to_string(i) + " could not reach the peer on any of its " +
                         std::to_string(peer_.rails.size()) + " rails (last: " + last_error_ + ")");
    }
    ++st.tries;
    st.connected = false;
    st.off = 0;
    Result<Fd> fd = StreamSocket();
    if (!fd.ok()) return fd.error();
    st.fd = std::move(*fd);
    const Rail& local = config_.rails[i % config_.rails.size()];
    const uint16_t sport = i < config_.source_ports.size() ? config_.source_ports[i] : 0;
    if (sport != 0) {
      int one = 1;
      ::setsockopt(st.fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      ::setsockopt(st.fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    }
    sockaddr_in src = Sockaddr(local.ipv4, sport);
    if (::bind(st.fd.get(), reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
      return Unavailable("binding a stream to rail " + local.name + " (" + AddrString(local.ipv4, 0) +
                         "): " + std::strerror(errno));
    }
    const RailEndpoint& dst = peer_.rails[st.remote];
    sockaddr_in sa = Sockaddr(dst.ipv4, dst.port);
    if (::connect(st.fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      st.connected = true;
    } else if (errno != EINPROGRESS) {
      return Retry(i, std::string("connect: ") + std::strerror(errno));
    }
    st.hello = EncodeHello(Hello{.listen_token = peer_.token,
                                 .conn_id = conn_id_,
                                 .stream = static_cast<uint16_t>(i),
                                 .nstreams = static_cast<uint16_t>(streams_.size())});
    return Status::Ok();
  }

  // The stream failed on its current peer rail: try the next one.
  Status Retry(size_t i, const std::string& why) {
    Stream& st = streams_[i];
    const RailEndpoint& dst = peer_.rails[st.remote];
    last_error_ = AddrString(dst.ipv4, dst.port) + ": " + why;
    if (warn_ && st.tries < peer_.rails.size())
      warn_("stream " + std::to_string(i) + " to " + last_error_ + "; trying the next rail");
    st.remote = (st.remote + 1) % peer_.rails.size();
    return Dial(i);
  }

  Status Advance(size_t i) {
    Stream& st = streams_[i];
    if (st.off == kHelloBytes) return Status::Ok();
    if (!st.connected) {
      pollfd p{.fd = st.fd.get(), .events = POLLOUT, .revents = 0};
      if (::poll(&p, 1, 0) <= 0) return Status::Ok();
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(st.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return Retry(i, std::strerror(err));
      st.connected = true;
    }
    while (st.off < kHelloBytes) {
      ssize_t n = ::send(st.fd.get(), st.hello.data() + st.off, kHelloBytes - st.off, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        st.off += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return Status::Ok();
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        return Retry(i, std::string("hello: ") + std::strerror(errno));
      }
    }
    return Status::Ok();
  }

  const SocketTransportConfig& config_;
  ListenHandle peer_;
  WarnFn warn_;
  std::shared_ptr<AgentLink> agent_;
  uint64_t conn_id_;
  std::vector<Stream> streams_;
  std::chrono::steady_clock::time_point deadline_;
  std::string last_error_ = "none";
};

// ---- the transport ----

class SocketTransport final : public Transport {
 public:
  SocketTransport(SocketTransportConfig config, WarnFn warn, std::shared_ptr<AgentLink> agent)
      : config_(std::move(config)), warn_(std::move(warn)), agent_(std::move(agent)) {}

  int Devices() const override { return 1; }

  DeviceProperties Properties(int /*dev*/) const override {
    DeviceProperties p;
    p.name = "lockstep[";
    for (size_t i = 0; i < config_.rails.size(); ++i) p.name += (i ? "+" : "") + config_.rails[i].name;
    p.name += "]";
    p.rails = static_cast<int>(config_.rails.size());
    p.streams = p.rails * config_.streams_per_rail;
    p.speed_mbps = config_.rail_speed_mbps * p.rails;
    p.guid = 0x4c4b5354'00000000ull;
    return p;
  }

  Result<std::unique_ptr<Listener>> Listen(int dev, uint8_t* handle) override {
    if (dev != 0) return InvalidArgument("device " + std::to_string(dev) + " does not exist (1 device)");
    ListenHandle h{.token = RandomU64()};
    if (agent_) {
      agent_->Poll();
      h.host = agent_->State()->host;
    }
    std::vector<Fd> fds;
    for (const Rail& rail : config_.rails) {
      Result<Fd> fd = StreamSocket();
      if (!fd.ok()) return fd.error();
      int one = 1;
      ::setsockopt(fd->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in sa = Sockaddr(rail.ipv4, config_.listen_port_lo);
      socklen_t len = sizeof sa;
      // A fixed range: the first free port in it.
      int bound = ::bind(fd->get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      for (uint32_t p = config_.listen_port_lo + 1u;
           bound != 0 && errno == EADDRINUSE && config_.listen_port_lo != 0 && p <= config_.listen_port_hi; ++p) {
        sa = Sockaddr(rail.ipv4, static_cast<uint16_t>(p));
        bound = ::bind(fd->get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      }
      if (bound != 0 || ::listen(fd->get(), 128) != 0 ||
          ::getsockname(fd->get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        return Unavailable("listening on rail " + rail.name + " (" + AddrString(rail.ipv4, 0) +
                           "): " + std::strerror(errno));
      }
      h.rails.push_back(RailEndpoint{.ipv4 = rail.ipv4, .port = ntohs(sa.sin_port)});
      fds.push_back(std::move(*fd));
    }
    EncodeHandle(h, handle);
    return std::unique_ptr<Listener>(
        std::make_unique<SocketListener>(std::move(fds), h.token, config_.max_outstanding, warn_, agent_));
  }

  Result<std::unique_ptr<PendingConnection>> Connect(int dev, const uint8_t* handle) override {
    if (dev != 0) return InvalidArgument("device " + std::to_string(dev) + " does not exist (1 device)");
    Result<ListenHandle> h = DecodeHandle(handle);
    if (!h.ok()) return h.error();
    auto pending = std::make_unique<SocketPendingConnection>(config_, std::move(*h), warn_, agent_);
    if (Status s = pending->Start(); !s.ok()) return s.error();
    return std::unique_ptr<PendingConnection>(std::move(pending));
  }

 private:
  SocketTransportConfig config_;
  WarnFn warn_;
  std::shared_ptr<AgentLink> agent_;
};

}  // namespace

Result<SocketTransportConfig> SocketConfigFromEnv(const std::function<const char*(const char*)>& env) {
  SocketTransportConfig c;
  Result<std::vector<Rail>> rails = ParseRails(env("LOCKSTEP_NCCL_RAILS"));
  if (!rails.ok()) return rails.error();
  c.rails = std::move(*rails);
  Result<long> spr = EnvInt(env, "LOCKSTEP_NCCL_STREAMS_PER_RAIL", 1, 1, 8);
  if (!spr.ok()) return spr.error();
  c.streams_per_rail = static_cast<int>(*spr);
  Result<long> chunk = EnvInt(env, "LOCKSTEP_NCCL_CHUNK_BYTES", 512 * 1024, 4096, kMaxChunkBytes);
  if (!chunk.ok()) return chunk.error();
  c.stripe.chunk_bytes = static_cast<uint32_t>(*chunk);
  Result<long> window = EnvInt(env, "LOCKSTEP_NCCL_WINDOW", 8, 1, 64);
  if (!window.ok()) return window.error();
  c.stripe.window_per_stream = static_cast<uint32_t>(*window);
  Result<long> speed = EnvInt(env, "LOCKSTEP_NCCL_RAIL_SPEED_MBPS", 10000, 1, 10'000'000);
  if (!speed.ok()) return speed.error();
  c.rail_speed_mbps = static_cast<int>(*speed);
  if (const char* v = env("LOCKSTEP_NCCL_SOURCE_PORTS"); v != nullptr && *v != '\0') {
    Result<std::vector<uint16_t>> ports = ParsePorts("LOCKSTEP_NCCL_SOURCE_PORTS", v, false);
    if (!ports.ok()) return ports.error();
    c.source_ports = std::move(*ports);
  }
  if (const char* v = env("LOCKSTEP_NCCL_LISTEN_PORTS"); v != nullptr && *v != '\0') {
    Result<std::vector<uint16_t>> ports = ParsePorts("LOCKSTEP_NCCL_LISTEN_PORTS", v, true);
    if (!ports.ok()) return ports.error();
    c.listen_port_lo = ports->front();
    c.listen_port_hi = ports->back();
  }
  Result<long> ack_timeout = EnvInt(env, "LOCKSTEP_NCCL_ACK_TIMEOUT_MS", 60, 0, 60000);
  if (!ack_timeout.ok()) return ack_timeout.error();
  c.ack_timeout_ms = static_cast<int>(*ack_timeout);
  const int nstreams = static_cast<int>(std::min<size_t>(kMaxRails * 8, c.rails.size() * c.streams_per_rail));
  if (Status s = ValidateStripeOptions(c.stripe, nstreams); !s.ok()) return s.error();
  return c;
}

std::unique_ptr<Transport> MakeSocketTransport(SocketTransportConfig config, WarnFn warn,
                                               std::shared_ptr<AgentLink> agent) {
  return std::make_unique<SocketTransport>(std::move(config), std::move(warn), std::move(agent));
}

}  // namespace lockstep::nccl
