// bulk-stream: one TCP bulk transfer between two hosts of a netlab fabric, for
// the `fabric` benchmark (see README.md beside this file).
//
//   sink  listens on --bind IP:PORT, accepts connections, and writes one JSON
//         line per 10 ms interval to --log: {"t": wall seconds at the end of
//         the interval, "bytes": bytes received in it}. Intervals with no
//         bytes are written too, so a stall shows as a run of zeros.
//   send  connects from --bind IP (port 0) to --to IP:PORT and writes as fast
//         as TCP lets it until --duration or SIGTERM. On a socket error it
//         prints the error and exits 1 (the kernel's own retransmission
//         timeout applies: minutes, so a dead path shows as a stall first).
//
// Run inside a namespace with `ip netns exec`. Both end with one JSON summary
// line on stdout. Single-threaded; no dependencies beyond libc and CLI11 (header-only).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

constexpr double kMaxDuration = 3600;
constexpr int64_t kIntervalNs = 10'000'000;  // 10 ms

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int64_t NowNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "bulk-stream: %s\n", msg.c_str());
  std::exit(2);
}

struct Args {
  std::string mode;  // "sink" or "send"
  std::string bind, to, log;
  double duration = 60;  // seconds, (0, kMaxDuration]
};

Args Parse(int argc, char** argv) {
  Args a;
  CLI::App app{"bulk-stream: one TCP bulk transfer between two hosts of a netlab fabric. Run inside a namespace "
               "(ip netns exec NS bulk-stream ...).",
               "bulk-stream"};
  app.require_subcommand(1);
  const auto duration = [&a](CLI::App* sub) {
    sub->add_option("--duration", a.duration, "seconds")
        ->check(CLI::Range(0.001, kMaxDuration))
        ->capture_default_str();
  };
  CLI::App* sink = app.add_subcommand("sink", "accept connections on --bind, log bytes per 10 ms to --log");
  sink->add_option("--bind", a.bind, "IP:PORT to listen on")->required();
  sink->add_option("--log", a.log, "JSON lines {t, bytes}, one per 10 ms interval")->required();
  duration(sink);
  CLI::App* send = app.add_subcommand("send", "connect to --to and write as fast as TCP lets it");
  send->add_option("--to", a.to, "IP:PORT of the sink")->required();
  send->add_option("--bind", a.bind, "source IP (port 0)");
  duration(send);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
  a.mode = sink->parsed() ? "sink" : "send";
  return a;
}

sockaddr_in Addr(const std::string& ip_port, bool need_port) {
  const auto colon = ip_port.rfind(':');
  const std::string ip = colon == std::string::npos ? ip_port : ip_port.substr(0, colon);
  if (need_port && colon == std::string::npos) Die("expected IP:PORT, got " + ip_port);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(colon == std::string::npos ? 0 : uint16_t(std::atoi(ip_port.c_str() + colon + 1)));
  if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) Die("not an IPv4 address: " + ip);
  return sa;
}

int Sink(const Args& a) {
  const std::string log_path = a.log;
  if (log_path.empty()) Die("sink needs --log FILE");
  FILE* log = std::fopen(log_path.c_str(), "w");
  if (log == nullptr) Die("cannot write " + log_path + ": " + std::strerror(errno));
  const int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in sa = Addr(a.bind, true);
  if (bind(ls, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) Die(std::string("bind: ") + std::strerror(errno));
  if (listen(ls, 8) != 0) Die(std::string("listen: ") + std::strerror(errno));
  std::vector<pollfd> fds = {{ls, POLLIN, 0}};
  const int64_t start = NowNs(CLOCK_MONOTONIC);
  const int64_t end = start + int64_t(a.duration * 1e9);
  int64_t next = start + kIntervalNs, bytes = 0, total = 0, intervals = 0;
  int conns = 0;
  std::vector<char> buf(1 << 16);
  while (!g_stop) {
    const int64_t now = NowNs(CLOCK_MONOTONIC);
    while (now >= next) {  // close every interval that has ended, empty or not
      std::fprintf(log, "{\"t\":%.6f,\"bytes\":%lld}\n", double(NowNs(CLOCK_REALTIME) - (now - next)) / 1e9,
                   static_cast<long long>(bytes));
      if (++intervals % 10 == 0) std::fflush(log);
      total += bytes;
      bytes = 0;
      next += kIntervalNs;
    }
    if (now >= end) break;
    poll(fds.data(), fds.size(), int((next - now) / 1'000'000) + 1);
    if (fds[0].revents & POLLIN) {
      const int c = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c >= 0) {
        fds.push_back({c, POLLIN, 0});
        ++conns;
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buf.data(), buf.size());
      if (n > 0) {
        bytes += n;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(fds[i].fd);
        fds[i].fd = -1;
      }
    }
    std::erase_if(fds, [](const pollfd& p) { return p.fd < 0; });
  }
  std::fclose(log);
  std::printf("{\"mode\":\"sink\",\"bind\":\"%s\",\"connections\":%d,\"bytes\":%lld,\"intervals\":%lld}\n",
              a.bind.c_str(), conns, static_cast<long long>(total + bytes), static_cast<long long>(intervals));
  return 0;
}

int Send(const Args& a) {
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (!a.bind.empty()) {
    const sockaddr_in local = Addr(a.bind, false);
    if (bind(s, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) {
      Die(std::string("bind: ") + std::strerror(errno));
    }
  }
  const sockaddr_in to = Addr(a.to, true);
  if (connect(s, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    Die("connect " + a.to + ": " + std::strerror(errno));
  }
  sockaddr_in me{};
  socklen_t len = sizeof me;
  getsockname(s, reinterpret_cast<sockaddr*>(&me), &len);
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &me.sin_addr, ip, sizeof ip);
  std::fprintf(stderr, "bulk-stream: connected %s:%u -> %s\n", ip, ntohs(me.sin_port), a.to.c_str());
  const int64_t end = NowNs(CLOCK_MONOTONIC) + int64_t(a.duration * 1e9);
  const timeval tv{0, 100'000};  // wake up to check the deadline while blocked
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::vector<char> buf(1 << 16, 'x');
  long long sent = 0;
  std::string error;
  while (!g_stop && NowNs(CLOCK_MONOTONIC) < end) {
    const ssize_t n = send(s, buf.data(), buf.size(), MSG_NOSIGNAL);
    if (n > 0) {
      sent += n;
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      error = std::strerror(errno);
      break;
    }
  }
  close(s);
  std::printf("{\"mode\":\"send\",\"from\":\"%s\",\"sport\":%u,\"to\":\"%s\",\"bytes\":%lld,\"error\":\"%s\"}\n", ip,
              ntohs(me.sin_port), a.to.c_str(), sent, error.c_str());
  return error.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  struct sigaction sa{};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return a.mode == "sink" ? Sink(a) : Send(a);
}
