// tcp-resume: how long a TCP stream stalls when its path is cut and the route
// actuator moves the route to the other rail, depending on where rto_min is
// set. A measurement, not a test.
//
//   build/dev/e2e/bench/tcp-resume [--trials 5] [--detect-ms 50] [--warmup-ms 300]
//
// Root. It builds four network namespaces (host A, host B, router R0 for path
// 0, router R1 for path 1), each host with a host address on lo and rails
// rail0/rail1, and pins each host's route to the other's host address to rail0
// with NetlinkRouteActuator. A paced TCP stream (8 KiB per ms) runs from A to
// B. The cut is silent: R0's link to B goes down and R0 drops the traffic (a
// blackhole, no ICMP; A's rail0 stays up). `--detect-ms` later (what the
// agent's detection would take) both hosts' pins are replaced onto rail1, and
// the receiver's clock says when data flows again. Arms, alternating:
//   pinned_rto_min_10ms   the route in use and the new one have rto_min 10ms
//   kernel_default_200ms  no rto_min anywhere (Linux: 200 ms)
//   unpinned_then_10ms    only the route the move installs has rto_min 10ms
//                         (a stream on the static ECMP route, then pinned)
//   sysctl_rto_min_10ms   no metric; net.ipv4.tcp_rto_min_us=10000 on host A
// Every namespace is deleted at the end. Prints one line per trial, a summary
// per arm, and one JSON line.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lockstep/agent/net/netlink_route_actuator.h"

namespace lockstep::bench {
namespace {

using namespace std::chrono_literals;
using agent::NetlinkRouteActuator;
using agent::OwnedRoute;
using Clock = std::chrono::steady_clock;

int64_t NowNs() { return Clock::now().time_since_epoch().count(); }

void Sh(const std::string& cmd) {
  if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) throw std::runtime_error("failed: " + cmd);
}

uint32_t A(const char* text) { return agent::ParseIpv4(text).value(); }

// Runs f() on a new thread inside network namespace `ns`.
template <typename F>
auto Inside(const std::string& ns, F f) -> decltype(f()) {
  std::optional<decltype(f())> result;
  std::thread t([&] {
    int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0) result.emplace(f());
    if (fd >= 0) ::close(fd);
  });
  t.join();
  if (!result) throw std::runtime_error("cannot enter network namespace " + ns);
  return std::move(*result);
}

// Two hosts, two paths, a router on each; deleted in the destructor.
class Lab {
 public:
  Lab() : p_("trs" + std::to_string(::getpid() % 100000)) {
    try {
      for (const char* n : {"a", "b", "r0", "r1"}) {
        Sh("ip netns add " + Ns(n));
        created_.push_back(Ns(n));
        Sh("ip -n " + Ns(n) + " link set lo up");
        Sh("ip netns exec " + Ns(n) + " sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0");
      }
      for (int r = 0; r < 2; ++r) {
        std::string router = Ns("r" + std::to_string(r)), rs = std::to_string(r), bs = std::to_string(r + 2);
        Sh("ip netns exec " + router + " sysctl -qw net.ipv4.ip_forward=1");
        Link(Ns("a"), "rail" + rs, "10.88." + rs + ".1/24", router, "toa", "10.88." + rs + ".254/24");
        Link(Ns("b"), "rail" + rs, "10.88." + bs + ".2/24", router, "tob", "10.88." + bs + ".254/24");
        Sh("ip -n " + router + " route add 10.88.200.1/32 via 10.88." + rs + ".1");
        Sh("ip -n " + router + " route add 10.88.200.2/32 via 10.88." + bs + ".2");
        // Without a route to a host the router drops silently (no ICMP, which
        // would make TCP revert its backoff, RFC 6069).
        Sh("ip -n " + router + " route add blackhole 10.88.200.0/24");
      }
      Sh("ip -n " + Ns("a") + " addr add 10.88.200.1/32 dev lo");
      Sh("ip -n " + Ns("b") + " addr add 10.88.200.2/32 dev lo");
      for (const char* h : {"a", "b"}) {
        auto opened = Inside(Ns(h), [] { return NetlinkRouteActuator::Open({}); });
        if (!opened.ok()) throw std::runtime_error(opened.error().ToString());
        (h[0] == 'a' ? host_a_ : host_b_) = std::move(*opened);
      }
      cut_fd_ = Inside(Ns("r0"), [] { return ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); });
    } catch (...) {
      Cleanup();
      throw;
    }
  }
  ~Lab() { Cleanup(); }

  std::string Ns(const std::string& n) const { return p_ + n; }

  // Pins A->B and B->A onto rail `rail` (atomic replace).
  void Pin(int rail, std::chrono::milliseconds rto_min) {
    std::string rs = std::to_string(rail);
    OwnedRoute to_b{{A("10.88.200.2"), 32}, {A(("10.88." + rs + ".254").c_str()), "rail" + rs}, A("10.88.200.1"), rto_min};
    OwnedRoute to_a{{A("10.88.200.1"), 32}, {A(("10.88." + std::to_string(rail + 2) + ".254").c_str()), "rail" + rs},
                    A("10.88.200.2"), rto_min};
    for (auto [act, route] : {std::pair{host_a_.get(), to_b}, std::pair{host_b_.get(), to_a}}) {
      Status s = act->Replace(route);
      if (!s.ok()) throw std::runtime_error(s.error().ToString());
    }
  }

  // net.ipv4.tcp_rto_min_us on host A (per namespace; read when a socket is made).
  void SetSysctlRtoMin(int us) {
    Sh("ip netns exec " + Ns("a") + " sysctl -qw net.ipv4.tcp_rto_min_us=" + std::to_string(us));
  }

  // Sets R0's link to B down (the cut) or up again (and its route to B back).
  void SetPath0(bool up) {
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "tob", IFNAMSIZ - 1);
    if (::ioctl(cut_fd_, SIOCGIFFLAGS, &ifr) != 0) throw std::runtime_error("SIOCGIFFLAGS tob");
    ifr.ifr_flags = static_cast<short>(up ? (ifr.ifr_flags | IFF_UP) : (ifr.ifr_flags & ~IFF_UP));
    if (::ioctl(cut_fd_, SIOCSIFFLAGS, &ifr) != 0) throw std::runtime_error("SIOCSIFFLAGS tob");
    if (up) Sh("ip -n " + Ns("r0") + " route replace 10.88.200.2/32 via 10.88.2.2");
  }

 private:
  void Link(const std::string& ns1, const std::string& if1, const std::string& addr1, const std::string& ns2,
            const std::string& if2, const std::string& addr2) {
    Sh("ip link add " + if1 + p_ + " netns " + ns1 + " type veth peer name " + if2 + p_ + " netns " + ns2);
    Sh("ip -n " + ns1 + " link set " + if1 + p_ + " name " + if1);
    Sh("ip -n " + ns2 + " link set " + if2 + p_ + " name " + if2);
    Sh("ip -n " + ns1 + " addr add " + addr1 + " dev " + if1);
    Sh("ip -n " + ns2 + " addr add " + addr2 + " dev " + if2);
    Sh("ip -n " + ns1 + " link set " + if1 + " up");
    Sh("ip -n " + ns2 + " link set " + if2 + " up");
  }
  void Cleanup() {
    host_a_.reset();
    host_b_.reset();
    if (cut_fd_ >= 0) ::close(cut_fd_);
    cut_fd_ = -1;
    for (const std::string& ns : created_) std::system(("ip netns del " + ns + " 2>/dev/null").c_str());
    created_.clear();
  }

  std::string p_;
  std::vector<std::string> created_;
  std::unique_ptr<NetlinkRouteActuator> host_a_, host_b_;
  int cut_fd_ = -1;
};

// A paced stream A -> B; the receiver stamps every read.
class Stream {
 public:
  explicit Stream(const Lab& lab) {
    listen_fd_ = Inside(lab.Ns("b"), [] { return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); });
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(A("10.88.200.2"));
    socklen_t len = sizeof sa;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(listen_fd_, 1) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      throw std::runtime_error("receiver: cannot listen");
    }
    send_fd_ = Inside(lab.Ns("a"), [] { return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); });
    if (::connect(send_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0) throw std::runtime_error("sender: connect");
    recv_fd_ = ::accept(listen_fd_, nullptr, nullptr);
    if (recv_fd_ < 0) throw std::runtime_error("receiver: accept");
    receiver_ = std::thread([this] {
      std::vector<char> buf(1 << 16);
      while (::recv(recv_fd_, buf.data(), buf.size(), 0) > 0) {
        std::lock_guard l(mu_);
        reads_.push_back(NowNs());
      }
    });
    sender_ = std::thread([this] {
      std::vector<char> chunk(8192, 'x');
      auto next = Clock::now();
      while (!stop_) {
        if (::send(send_fd_, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
        next += 1ms;
        std::this_thread::sleep_until(next);
      }
    });
  }
  ~Stream() {
    stop_ = true;
    ::shutdown(send_fd_, SHUT_RDWR);
    ::shutdown(recv_fd_, SHUT_RDWR);
    sender_.join();
    receiver_.join();
    for (int fd : {send_fd_, recv_fd_, listen_fd_}) ::close(fd);
  }
  // The first read at or after t_ns; -1 if none.
  int64_t FirstReadAfter(int64_t t_ns) {
    std::lock_guard l(mu_);
    auto it = std::lower_bound(reads_.begin(), reads_.end(), t_ns);
    return it == reads_.end() ? -1 : *it;
  }

 private:
  int listen_fd_ = -1, send_fd_ = -1, recv_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<int64_t> reads_;
  std::thread receiver_, sender_;
};

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  double m = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  return std::round(m * 10) / 10;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  using namespace lockstep::bench;
  CLI::App app{"tcp-resume: TCP stall after a path cut and a route move, rto_min 10 ms vs the kernel default"};
  int trials = 5, detect_ms = 50, warmup_ms = 300;
  app.add_option("--trials", trials, "cuts per arm")->check(CLI::Range(1, 100));
  app.add_option("--detect-ms", detect_ms, "time from the cut to the route move")->check(CLI::Range(0, 5000));
  app.add_option("--warmup-ms", warmup_ms, "streaming before each cut")->check(CLI::Range(50, 10000));
  CLI11_PARSE(app, argc, argv);
  if (::geteuid() != 0) {
    std::fprintf(stderr, "tcp-resume: needs root (creates network namespaces)\n");
    return 2;
  }
  // rto_min of the route the stream uses before the cut and of the route the
  // move installs (0: no metric, the kernel's minimum applies), and host A's
  // net.ipv4.tcp_rto_min_us (the kernel's minimum for new sockets).
  struct Arm {
    const char* name;
    std::chrono::milliseconds before, after;
    int sysctl_rto_min_us;
    std::vector<double> resume_ms;
    int failed = 0;
  };
  std::vector<Arm> arms = {
      {"pinned_rto_min_10ms", 10ms, 10ms, 200000, {}, 0},     // the route in use had rto_min 10ms
      {"kernel_default_200ms", 0ms, 0ms, 200000, {}, 0},      // no rto_min anywhere
      {"unpinned_then_10ms", 0ms, 10ms, 200000, {}, 0},       // rto_min only on the route the move installs
      {"sysctl_rto_min_10ms", 0ms, 0ms, 10000, {}, 0},        // no metric; tcp_rto_min_us=10000 on A
  };
  try {
    Lab lab;
    for (int t = 0; t < trials; ++t) {
      for (Arm& arm : arms) {  // interleaved, so drift in machine load hits both arms alike
        lab.Pin(0, arm.before);
        lab.SetSysctlRtoMin(arm.sysctl_rto_min_us);
        Stream stream(lab);
        std::this_thread::sleep_for(std::chrono::milliseconds(warmup_ms));
        int64_t cut = NowNs();
        lab.SetPath0(false);
        std::this_thread::sleep_until(Clock::time_point(std::chrono::nanoseconds(cut)) +
                                      std::chrono::milliseconds(detect_ms));
        lab.Pin(1, arm.after);
        int64_t moved = NowNs();
        std::this_thread::sleep_for(3s);  // > a 200 ms RTO after two backoffs
        int64_t resumed = stream.FirstReadAfter(moved);
        // Data between the cut (+2 ms for what was already in flight) and the
        // move would mean the cut did not cut: such a trial does not count.
        int64_t leaked = stream.FirstReadAfter(cut + 2'000'000);
        bool stalled = leaked < 0 || leaked >= moved;
        double ms = resumed < 0 ? -1 : std::round((resumed - cut) / 1e5) / 10;
        std::printf("trial %d  %-22s moved after %6.1f ms  resumed after %7.1f ms%s\n", t + 1, arm.name,
                    (moved - cut) / 1e6, ms, stalled ? "" : "  (data flowed before the move: not counted)");
        if (resumed < 0 || !stalled) ++arm.failed;
        else arm.resume_ms.push_back(ms);
        lab.SetPath0(true);
        lab.SetSysctlRtoMin(200000);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tcp-resume: %s\n", e.what());
    return 1;
  }
  nlohmann::json j{{"bench", "tcp-resume"}, {"detect_ms", detect_ms}, {"trials", trials}};
  for (const Arm& arm : arms) {
    std::printf("%-22s resume after cut: median %.1f ms, min %.1f, max %.1f (%d not counted: no resume or no stall)\n", arm.name,
                Median(arm.resume_ms), arm.resume_ms.empty() ? -1 : *std::min_element(arm.resume_ms.begin(), arm.resume_ms.end()),
                arm.resume_ms.empty() ? -1 : *std::max_element(arm.resume_ms.begin(), arm.resume_ms.end()), arm.failed);
    j[arm.name] = {{"resume_ms_median", Median(arm.resume_ms)}, {"resume_ms", arm.resume_ms}, {"failed", arm.failed}};
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
