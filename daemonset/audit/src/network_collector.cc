#include "lockstep/agent/audit/network_collector.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <map>
#include <thread>

namespace lockstep::agent::audit {
namespace {

namespace la = lockstep::audit;
using nlohmann::json;

std::optional<double> Us(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>() / 1000.0;
}

std::string FirstIpv4(const std::string& interface) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string out;
  for (ifaddrs* a = all; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || interface != a->ifa_name) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    out = buf;
    break;
  }
  freeifaddrs(all);
  return out;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// One error from the queue: the ICMP type and the offender, for the probe
// whose payload was `ttl`; nullopt when none arrived in time.
struct IcmpAnswer {
  uint8_t type = 0, code = 0;
  std::string offender;
};

std::optional<IcmpAnswer> AwaitAnswer(int fd, int ttl, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{.fd = fd, .events = 0, .revents = 0};  // POLLERR is always reported
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    for (;;) {
      char data[64];
      char control[512];
      sockaddr_in from{};
      iovec iov{.iov_base = data, .iov_len = sizeof data};
      msghdr m{};
      m.msg_name = &from;
      m.msg_namelen = sizeof from;
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      const ssize_t n = recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
      if (n < 0) break;
      int got_ttl = -1;
      if (n >= 4) std::memcpy(&got_ttl, data, 4);
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR) continue;
        const auto* e = reinterpret_cast<const sock_extended_err*>(CMSG_DATA(c));
        if (e->ee_origin != SO_EE_ORIGIN_ICMP || got_ttl != ttl) continue;
        const auto* off = reinterpret_cast<const sockaddr_in*>(SO_EE_OFFENDER(e));
        char buf[INET_ADDRSTRLEN] = "*";
        if (off->sin_family == AF_INET) inet_ntop(AF_INET, &off->sin_addr, buf, sizeof buf);
        return IcmpAnswer{e->ee_type, e->ee_code, buf};
      }
    }
  }
}

}  // namespace

la::RouteTrace UdpRouteTracer::Trace(const TraceRail& rail, const TraceTarget& target, int source_port,
                                     const TraceOptions& o) {
  la::RouteTrace t{.rail = rail.rail, .peer = target.peer, .target = target.address, .source_port = source_port};
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(o.dest_port));
  if (inet_pton(AF_INET, target.address.c_str(), &to.sin_addr) != 1) return t;
  Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return t;
  int on = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  setsockopt(fd.get(), IPPROTO_IP, IP_RECVERR, &on, sizeof on);
  // DSCP CS6 (network control), as the fabric probes: a congested link's
  // data queue must not lose the trace (routers answer errors at CS6 too).
  int tos = 0xc0;
  setsockopt(fd.get(), IPPROTO_IP, IP_TOS, &tos, sizeof tos);
  if (setsockopt(fd.get(), SOL_SOCKET, SO_BINDTODEVICE, rail.interface.c_str(),
                 static_cast<socklen_t>(rail.interface.size())) != 0) {
    return t;  // no such interface (or no privilege): nothing traced
  }
  sockaddr_in self{};
  self.sin_family = AF_INET;
  self.sin_port = htons(static_cast<uint16_t>(source_port));
  const std::string source = FirstIpv4(rail.interface);
  if (!source.empty()) inet_pton(AF_INET, source.c_str(), &self.sin_addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&self), sizeof self) != 0) return t;
  int unanswered = 0;
  for (int ttl = 1; ttl <= o.max_ttl && unanswered < o.give_up_after; ++ttl) {
    setsockopt(fd.get(), IPPROTO_IP, IP_TTL, &ttl, sizeof ttl);
    char payload[16] = {};
    std::memcpy(payload, &ttl, 4);
    if (sendto(fd.get(), payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) {
      t.hops.push_back("*");
      ++unanswered;
      continue;
    }
    auto a = AwaitAnswer(fd.get(), ttl, o.timeout);
    if (o.gap.count() > 0) std::this_thread::sleep_for(o.gap);
    if (!a) {
      t.hops.push_back("*");
      ++unanswered;
      continue;
    }
    unanswered = 0;
    t.hops.push_back(a->offender);
    if (a->type == 3) {  // destination unreachable: the target (port) or a router that cannot route it
      t.reached = a->offender == target.address;
      break;
    }
  }
  while (!t.hops.empty() && t.hops.back() == "*") t.hops.pop_back();
  return t;
}

void PathsFromFabricStatus(const json& status, la::NetworkFacts& out) {
  auto paths = status.find("paths");
  if (!status.is_object() || paths == status.end() || !paths->is_array()) {
    out.paths_unavailable = "the fabric status has no paths";
    return;
  }
  for (const json& p : *paths) {
    if (!p.is_object() || !p.contains("peer") || !p["peer"].is_string()) continue;
    la::PathObservation o{
        .rail = p.value("rail", 0), .peer = p["peer"].get<std::string>(), .state = p.value("state", "")};
    if (auto it = p.find("loss"); it != p.end() && it->is_number()) o.loss = it->get<double>();
    o.p50_us = Us(p, "owd_p50_ns");
    o.p99_us = Us(p, "owd_p99_ns");
    auto count = [&p](const char* key) -> std::optional<int> {
      auto it = p.find(key);
      if (it == p.end() || !it->is_number_integer()) return std::nullopt;
      return it->get<int>();
    };
    o.delay_samples = count("owd_samples");
    if (!o.p50_us) {
      auto half = [](std::optional<double> v) { return v ? std::optional<double>(*v / 2) : std::nullopt; };
      o.p50_us = half(Us(p, "rtt_p50_ns"));
      o.p99_us = half(Us(p, "rtt_p99_ns"));
      o.one_way = false;
      o.delay_samples = count("rtt_samples");
      // An agent without rtt_samples: every reply in the window (decided probes less the misses).
      if (!o.delay_samples) {
        if (auto w = count("window_samples")) o.delay_samples = static_cast<int>(*w * (1 - o.loss) + 0.5);
      }
    }
    out.paths.push_back(std::move(o));
  }
}

std::vector<TraceRail> RailsFromFabricStatus(const json& status) {
  std::map<int, std::string> rails;
  if (auto paths = status.find("paths"); status.is_object() && paths != status.end() && paths->is_array()) {
    for (const json& p : *paths) {
      if (p.is_object() && p.contains("interface") && p["interface"].is_string()) {
        rails[p.value("rail", 0)] = p["interface"].get<std::string>();
      }
    }
  }
  std::vector<TraceRail> out;
  for (const auto& [r, name] : rails) out.push_back({r, name});
  return out;
}

std::vector<TraceTarget> TargetsFromFabricStatus(const json& status) {
  std::vector<TraceTarget> out;
  if (auto peers = status.find("peers"); status.is_object() && peers != status.end() && peers->is_array()) {
    for (const json& p : *peers) {
      if (p.is_object() && p.contains("peer") && p["peer"].is_string() && p.contains("host_address") &&
          p["host_address"].is_string()) {
        out.push_back({p["peer"].get<std::string>(), p["host_address"].get<std::string>()});
      }
    }
  }
  return out;
}

void TraceRoutes(const std::vector<TraceRail>& rails, const std::vector<TraceTarget>& targets, RouteTracer& tracer,
                 const TraceOptions& options, la::NetworkFacts& out) {
  if (rails.empty() || targets.empty()) {
    out.traces_unavailable = rails.empty() ? "no rail to trace from" : "no peer to trace to";
    return;
  }
  std::vector<TraceTarget> chosen = targets;
  if (options.max_targets > 0 && targets.size() > options.max_targets) {
    chosen.clear();
    const size_t start = std::hash<std::string>{}(options.spread) % targets.size();
    for (size_t i = 0; i < options.max_targets; ++i) chosen.push_back(targets[(start + i) % targets.size()]);
  }
  for (const TraceRail& r : rails) {
    for (const TraceTarget& t : chosen) {
      for (int i = 0; i < options.source_ports; ++i)
        out.traces.push_back(tracer.Trace(r, t, options.first_port + i, options));
    }
  }
}

}  // namespace lockstep::agent::audit
