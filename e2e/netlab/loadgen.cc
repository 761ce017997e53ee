// netlab-loadgen: background load and one-way-delay probes for the netlab
// namespace fabric (see README.md beside this file).
//
//   send  UDP blaster: paced at --rate while ON, silent while OFF; ON/OFF
//         lengths fixed or exponential with the given means (seeded); one or
//         more flows (consecutive source ports, so ECMP can spread them);
//         always bounded by --duration.
//   sink  counts datagrams per flow: packets, bytes, sequence gaps (loss),
//         reordering, and one-way delay from the sender's user-space send
//         time to the kernel RX software timestamp (same host clock).
//   owd   one process opens a socket in namespace A and one in namespace B
//         and probes A->B and B->A alternately; both ends are stamped by
//         the kernel (SO_TIMESTAMPING TX/RX software stamps), and since all
//         namespaces share one clock the one-way delays are exact.
//
// Every mode takes --ns NAME (or --a-ns/--b-ns for owd): the process joins
// /run/netns/NAME itself, so no `ip netns exec` is needed. Results go to stdout
// as one JSON object (owd: also a human table on stderr unless --quiet).
// Single-threaded; no dependencies beyond libc and CLI11 (header-only).

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

constexpr uint32_t kMagic = 0x4e4c4731;  // "NLG1"
constexpr double kMaxDuration = 3600;    // seconds; every mode is bounded

// Header at the start of every datagram we send (network byte order not
// needed: sender and receiver always run on the same host).
struct Header {
  uint32_t magic;
  uint32_t flow;
  uint64_t seq;
  int64_t send_ns;  // CLOCK_REALTIME just before sendmsg (user space)
};

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int64_t NowNs(clockid_t id = CLOCK_REALTIME) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
int64_t Mono() { return NowNs(CLOCK_MONOTONIC); }

void SleepUntilMono(int64_t t) {
  timespec ts{static_cast<time_t>(t / 1'000'000'000), static_cast<long>(t % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR && !g_stop) {
  }
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "netlab-loadgen: %s\n", msg.c_str());
  std::exit(2);
}
[[noreturn]] void DieErrno(const std::string& what) { Die(what + ": " + std::strerror(errno)); }

// ---- command line ---------------------------------------------------------

struct Args {
  std::string mode;
  std::map<std::string, std::string> kv;
  bool Has(const std::string& k) const { return kv.count(k) != 0; }
  std::string Str(const std::string& k, const std::string& def = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
  double Num(const std::string& k, double def) const {
    auto it = kv.find(k);
    if (it == kv.end()) return def;
    char* end = nullptr;
    double v = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end != '\0') Die("--" + k + ": not a number: " + it->second);
    return v;
  }
};

// One option of a mode: its name without "--", the default the mode applies
// when it is absent (shown in --help; "" = none), and its help.
struct OptionDoc {
  const char* name;
  const char* shown_default;
  const char* help;
};

// The modes' options; values land in Args::kv as text (absent when not
// given), checked where the mode reads them.
Args Parse(int argc, char** argv) {
  CLI::App app{"netlab-loadgen: paced UDP load, a sink that scores it, and one-way delay probes, each inside "
               "a network namespace (--ns). Prints one JSON line.",
               "netlab-loadgen"};
  app.require_subcommand(1);
  std::map<std::string, std::string> text;  // option -> value (stable addresses for CLI11)
  bool quiet = false;
  std::map<std::string, std::vector<OptionDoc>> modes = {
      {"send",
       {{"to", "", "IP:PORT to send to (required; port default 9000)"},
        {"bind", "0.0.0.0", "source IP"},
        {"sport", "0", "source port (0: any); with --flows, the first of N"},
        {"flows", "1", "source ports P..P+N-1, round-robin"},
        {"rate", "10mbit", "bits/s while ON; suffixes k,m,g or kbit,mbit,gbit (x1000)"},
        {"size", "1200", "UDP payload bytes"},
        {"on-ms", "10", "ON period (mean with --pattern exp)"},
        {"off-ms", "0", "OFF period; mean offered load = rate * on / (on + off)"},
        {"pattern", "fixed", "fixed or exp (exponential ON/OFF lengths)"},
        {"seed", "1", "for --pattern exp"},
        {"duration", "10", "seconds (at most 3600)"},
        {"ns", "", "network namespace to run in"}}},
      {"sink",
       {{"bind", "", "IP:PORT to receive on (required; port default 9000)"},
        {"duration", "10", "seconds (at most 3600)"},
        {"ns", "", "network namespace to run in"}}},
      {"owd",
       {{"a", "", "IP[:PORT] of end A (required)"},
        {"b", "", "IP[:PORT] of end B (required)"},
        {"a-ns", "", "A's network namespace"},
        {"b-ns", "", "B's network namespace"},
        {"count", "1000", "probes per direction"},
        {"interval-us", "1000", "between probes, on a fixed timetable"},
        {"size", "64", "UDP payload bytes"},
        {"warmup", "5", "probes sent first and not scored"},
        {"timeout-ms", "200", "a probe not back by then is lost"},
        {"samples", "", "write every sample to FILE"}}},
  };
  const std::map<std::string, std::string> about = {
      {"send", "paced UDP at --rate while ON, silent while OFF"},
      {"sink", "packets, bytes, flows, loss, reordering and one-way delay of what send sent"},
      {"owd", "one-way delays A->B and B->A from kernel software timestamps (one clock)"}};
  std::map<std::string, CLI::App*> subs;
  for (const auto& [mode, options] : modes) {
    CLI::App* sub = app.add_subcommand(mode, about.at(mode));
    for (const auto& o : options) {
      CLI::Option* opt = sub->add_option(std::string("--") + o.name, text[o.name], o.help);
      if (*o.shown_default != '\0') opt->default_str(o.shown_default);
    }
    if (mode == "owd") sub->add_flag("--quiet", quiet, "no human table on stderr");
    subs[mode] = sub;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
  Args a;
  for (const auto& [mode, sub] : subs) {
    if (sub->parsed()) a.mode = mode;
  }
  for (const auto& o : modes.at(a.mode)) {
    if (subs.at(a.mode)->get_option(std::string("--") + o.name)->count() > 0) a.kv[o.name] = text.at(o.name);
  }
  if (quiet) a.kv["quiet"] = "1";
  return a;
}

double ParseRate(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) Die("bad rate: " + s);
  std::string u = end;
  for (auto& c : u) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (u.size() > 3 && u.substr(u.size() - 3) == "bit") u.resize(u.size() - 3);
  if (u.size() > 3 && u.substr(u.size() - 3) == "bps") u.resize(u.size() - 3);
  if (u.empty()) return v;
  if (u == "k") return v * 1e3;
  if (u == "m") return v * 1e6;
  if (u == "g") return v * 1e9;
  Die("bad rate unit: " + s);
}

sockaddr_in ParseEndpoint(const std::string& s, uint16_t default_port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  std::string host = s;
  uint16_t port = default_port;
  auto colon = s.rfind(':');
  if (colon != std::string::npos) {
    host = s.substr(0, colon);
    long p = std::strtol(s.c_str() + colon + 1, nullptr, 10);
    if (p < 0 || p > 65535) Die("bad port in " + s);
    port = static_cast<uint16_t>(p);
  }
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) Die("bad IPv4 address: " + host);
  a.sin_port = htons(port);
  return a;
}

std::string ToString(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
}

double Duration(const Args& a) {
  double d = a.Num("duration", 10);
  if (!(d > 0)) Die("--duration must be > 0");
  return std::min(d, kMaxDuration);
}

// ---- namespaces and sockets --------------------------------------------------

int g_home_ns = -1;

// Moves the calling thread into /run/netns/NAME ("" = the namespace we started in).
void EnterNs(const std::string& name) {
  if (g_home_ns < 0) {
    g_home_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (g_home_ns < 0) DieErrno("open /proc/self/ns/net");
  }
  int fd = g_home_ns;
  if (!name.empty()) {
    std::string path = name.find('/') == std::string::npos ? "/run/netns/" + name : name;
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) DieErrno("open " + path);
  }
  if (setns(fd, CLONE_NEWNET) != 0) DieErrno("setns " + (name.empty() ? std::string("home") : name));
  if (fd != g_home_ns) close(fd);
}

int UdpSocket(const sockaddr_in& bind_to, bool timestamps) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) DieErrno("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (timestamps) {
    unsigned flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
                     SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) != 0) DieErrno("SO_TIMESTAMPING");
  }
  if (bind(fd, reinterpret_cast<const sockaddr*>(&bind_to), sizeof bind_to) != 0) {
    DieErrno("bind " + ToString(bind_to));
  }
  return fd;
}

sockaddr_in LocalAddr(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return a;
}

int64_t ToNs(const timespec& ts) { return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec; }

int64_t RxStamp(msghdr& msg) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
      scm_timestamping ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      return ToNs(ts.ts[0]);
    }
  }
  return 0;
}

// Reads one TX stamp from the error queue: {OPT_ID, ns}, or nullopt if empty.
std::optional<std::pair<uint32_t, int64_t>> ReadTxStamp(int fd) {
  alignas(cmsghdr) char control[512];
  char data[64];
  iovec iov{data, sizeof data};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return std::nullopt;
  int64_t t = 0;
  std::optional<uint32_t> id;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
      scm_timestamping ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      t = ToNs(ts.ts[0]);
    } else if (c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) {
      sock_extended_err ee;
      std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
      if (ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && ee.ee_info == SCM_TSTAMP_SND) id = ee.ee_data;
    }
  }
  if (!id || t == 0) return std::pair<uint32_t, int64_t>{UINT32_MAX, 0};  // not a TX stamp: skip
  return std::pair<uint32_t, int64_t>{*id, t};
}

// ---- send --------------------------------------------------------------------

int Send(const Args& a) {
  if (!a.Has("to")) Die("send: --to IP:PORT is required");
  EnterNs(a.Str("ns"));
  sockaddr_in to = ParseEndpoint(a.Str("to"), 9000);
  sockaddr_in from = ParseEndpoint(a.Str("bind", "0.0.0.0"), 0);
  int flows = static_cast<int>(a.Num("flows", 1));
  int sport = static_cast<int>(a.Num("sport", 0));
  if (flows < 1 || flows > 1024) Die("--flows must be 1..1024");
  if (sport < 0 || sport + flows - 1 > 65535) Die("--sport out of range");
  double rate = ParseRate(a.Str("rate", "10mbit"));
  int size = static_cast<int>(a.Num("size", 1200));
  if (size < static_cast<int>(sizeof(Header)) || size > 65000) Die("--size must be 32..65000");
  double on_ms = a.Num("on-ms", 10), off_ms = a.Num("off-ms", 0);
  if (on_ms <= 0 || off_ms < 0) Die("--on-ms must be > 0, --off-ms >= 0");
  std::string pattern = a.Str("pattern", "fixed");
  if (pattern != "fixed" && pattern != "exp") Die("--pattern must be fixed or exp");
  std::mt19937_64 rng(static_cast<uint64_t>(a.Num("seed", 1)));
  double duration = Duration(a);

  std::vector<int> fds;
  for (int f = 0; f < flows; ++f) {
    sockaddr_in b = from;
    b.sin_port = htons(sport == 0 ? 0 : static_cast<uint16_t>(sport + f));
    int fd = UdpSocket(b, false);
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) DieErrno("connect " + ToString(to));
    int sndbuf = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    fds.push_back(fd);
  }
  std::vector<char> buf(static_cast<size_t>(size), 0);
  std::vector<uint64_t> seq(static_cast<size_t>(flows), 0);
  auto draw = [&](double mean_ms) -> int64_t {
    if (mean_ms <= 0) return 0;
    double ms = pattern == "exp" ? std::exponential_distribution<double>(1.0 / mean_ms)(rng) : mean_ms;
    return static_cast<int64_t>(ms * 1e6);
  };

  const double ns_per_pkt = rate > 0 ? size * 8.0 * 1e9 / rate : 1e18;
  const int64_t start = Mono(), end = start + static_cast<int64_t>(duration * 1e9);
  uint64_t sent = 0, bytes = 0, errors = 0, periods = 0;
  int64_t on_ns_total = 0;
  int next_flow = 0;
  // The schedule is absolute: ON periods start where the previous OFF period
  // ends, and packet pacing carries over from one ON period to the next, so
  // the rate is exact whatever the period lengths (and --off-ms 0 is a
  // steady stream).
  double next_due = static_cast<double>(start);
  int64_t t = start;
  while (!g_stop && t < end) {
    const int64_t on_end = std::min(end, t + std::max<int64_t>(draw(on_ms), 1'000'000));
    ++periods;
    next_due = std::max(next_due, static_cast<double>(t));
    while (!g_stop && next_due < static_cast<double>(on_end)) {
      int64_t due = static_cast<int64_t>(next_due);
      if (due > Mono() + 50'000) {  // sleep only when the next packet is >50 us away
        SleepUntilMono(due);
        continue;
      }
      Header h{kMagic, static_cast<uint32_t>(next_flow), seq[static_cast<size_t>(next_flow)]++, NowNs()};
      std::memcpy(buf.data(), &h, sizeof h);
      ssize_t n = ::send(fds[static_cast<size_t>(next_flow)], buf.data(), buf.size(), 0);
      if (n < 0) {
        ++errors;  // ECONNREFUSED (no sink yet), ENOBUFS, unreachable: keep pacing
      } else {
        ++sent;
        bytes += static_cast<uint64_t>(n);
      }
      next_due += ns_per_pkt;
      next_flow = (next_flow + 1) % flows;
    }
    on_ns_total += on_end - t;
    t = on_end + draw(off_ms);
    if (t > on_end) SleepUntilMono(std::min(end, t));
  }
  double elapsed = static_cast<double>(Mono() - start) / 1e9;
  std::printf(
      "{\"mode\":\"send\",\"to\":\"%s\",\"flows\":%d,\"first_sport\":%u,\"packets\":%llu,\"bytes\":%llu,"
      "\"errors\":%llu,\"on_periods\":%llu,\"elapsed_s\":%.3f,\"on_fraction\":%.3f,\"mean_bps\":%.0f,"
      "\"on_rate_bps\":%.0f}\n",
      ToString(to).c_str(), flows, ntohs(LocalAddr(fds[0]).sin_port), static_cast<unsigned long long>(sent),
      static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(errors),
      static_cast<unsigned long long>(periods), elapsed, static_cast<double>(on_ns_total) / 1e9 / elapsed,
      static_cast<double>(bytes) * 8 / elapsed, rate);
  return 0;
}

// ---- statistics ----------------------------------------------------------------

struct Summary {
  size_t n = 0;
  double min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

Summary Summarize(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {  // nearest rank
    size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
  };
  s.min = v.front();
  s.max = v.back();
  s.p50 = q(0.5);
  s.p90 = q(0.9);
  s.p99 = q(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

std::string SummaryJson(const Summary& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"n\":%zu,\"min_us\":%.2f,\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"max_us\":%.2f,"
                "\"mean_us\":%.2f}",
                s.n, s.min, s.p50, s.p90, s.p99, s.max, s.mean);
  return buf;
}

// ---- sink ----------------------------------------------------------------------

int Sink(const Args& a) {
  if (!a.Has("bind")) Die("sink: --bind IP:PORT is required");
  EnterNs(a.Str("ns"));
  sockaddr_in at = ParseEndpoint(a.Str("bind"), 9000);
  int fd = UdpSocket(at, true);
  int rcvbuf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  const int64_t end = Mono() + static_cast<int64_t>(Duration(a) * 1e9);
  struct Flow {
    uint64_t packets = 0, next = 0, lost = 0, reordered = 0;
  };
  std::map<std::pair<uint64_t, uint32_t>, Flow> flows;  // (sender addr:port, flow id)
  uint64_t packets = 0, bytes = 0, foreign = 0;
  std::vector<double> owd_us;
  int64_t first_ns = 0, last_ns = 0;
  std::vector<char> buf(65536);
  while (!g_stop) {
    int64_t left = end - Mono();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left / 1'000'000 + 1, 200))) <= 0) continue;
    for (int i = 0; i < 1024; ++i) {
      alignas(cmsghdr) char control[256];
      sockaddr_in src{};
      iovec iov{buf.data(), buf.size()};
      msghdr msg{};
      msg.msg_name = &src;
      msg.msg_namelen = sizeof src;
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
      if (n < 0) break;
      int64_t rx = RxStamp(msg);
      if (rx == 0) rx = NowNs();
      ++packets;
      bytes += static_cast<uint64_t>(n);
      if (first_ns == 0) first_ns = rx;
      last_ns = rx;
      Header h{};
      if (n < static_cast<ssize_t>(sizeof h)) {
        ++foreign;
        continue;
      }
      std::memcpy(&h, buf.data(), sizeof h);
      if (h.magic != kMagic) {
        ++foreign;
        continue;
      }
      uint64_t key = (uint64_t{src.sin_addr.s_addr} << 16) | src.sin_port;
      Flow& f = flows[{key, h.flow}];
      ++f.packets;
      if (h.seq >= f.next) {
        f.lost += h.seq - f.next;
        f.next = h.seq + 1;
      } else {
        ++f.reordered;
        if (f.lost > 0) --f.lost;
      }
      if (owd_us.size() < 2'000'000) owd_us.push_back(static_cast<double>(rx - h.send_ns) / 1e3);
    }
  }
  uint64_t lost = 0, reordered = 0;
  for (auto& [k, f] : flows) {
    lost += f.lost;
    reordered += f.reordered;
  }
  double span = static_cast<double>(last_ns - first_ns) / 1e9;
  std::printf(
      "{\"mode\":\"sink\",\"bind\":\"%s\",\"packets\":%llu,\"bytes\":%llu,\"flows\":%zu,\"lost\":%llu,"
      "\"reordered\":%llu,\"foreign\":%llu,\"active_s\":%.3f,\"mean_bps\":%.0f,\"owd_user_tx\":%s}\n",
      ToString(LocalAddr(fd)).c_str(), static_cast<unsigned long long>(packets),
      static_cast<unsigned long long>(bytes), flows.size(), static_cast<unsigned long long>(lost),
      static_cast<unsigned long long>(reordered), static_cast<unsigned long long>(foreign), span,
      span > 0 ? static_cast<double>(bytes) * 8 / span : 0.0, SummaryJson(Summarize(owd_us)).c_str());
  return 0;
}

// ---- owd -------------------------------------------------------------------------

struct Side {
  std::string ns;
  sockaddr_in addr{};
  int fd = -1;
  uint32_t next_tx_id = 0;             // SOF_TIMESTAMPING_OPT_ID counts sends per socket from 0
  std::map<uint32_t, size_t> id_to_probe;  // OPT_ID -> probe index (sent by this side)
  std::vector<int64_t> tx_ns, rx_ns;   // per probe index: sent by this side / received by it
};

// Drains both queues of one side: TX stamps of its own probes, and probes it received.
void Drain(Side& s, std::vector<char>& buf) {
  while (auto st = ReadTxStamp(s.fd)) {
    auto it = s.id_to_probe.find(st->first);
    if (it != s.id_to_probe.end()) {
      s.tx_ns[it->second] = st->second;
      s.id_to_probe.erase(it);
    }
  }
  for (;;) {
    alignas(cmsghdr) char control[256];
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(s.fd, &msg, MSG_DONTWAIT);
    if (n < 0) return;
    Header h{};
    if (n < static_cast<ssize_t>(sizeof h)) continue;
    std::memcpy(&h, buf.data(), sizeof h);
    if (h.magic == kMagic && h.seq < s.rx_ns.size()) s.rx_ns[h.seq] = RxStamp(msg);
  }
}

// Probes go out on a fixed timetable whatever happened to earlier ones, so a
// probe stuck in a queue does not stop the sampling (that would bias the
// samples toward idle periods). Stamps are matched afterwards.
int Owd(const Args& a) {
  if (!a.Has("a") || !a.Has("b")) Die("owd: --a IP[:PORT] and --b IP[:PORT] are required");
  Side sa, sb;
  sa.ns = a.Str("a-ns");
  sb.ns = a.Str("b-ns");
  sa.addr = ParseEndpoint(a.Str("a"), 0);
  sb.addr = ParseEndpoint(a.Str("b"), 0);
  EnterNs(sa.ns);
  sa.fd = UdpSocket(sa.addr, true);
  sa.addr = LocalAddr(sa.fd);
  EnterNs(sb.ns);
  sb.fd = UdpSocket(sb.addr, true);
  sb.addr = LocalAddr(sb.fd);
  EnterNs("");
  int count = static_cast<int>(a.Num("count", 1000));
  int warmup = static_cast<int>(a.Num("warmup", 5));
  int size = static_cast<int>(a.Num("size", 64));
  int64_t timeout = static_cast<int64_t>(a.Num("timeout-ms", 200) * 1e6);
  int64_t interval = static_cast<int64_t>(a.Num("interval-us", 1000) * 1000);
  if (count < 1 || warmup < 0 || size < static_cast<int>(sizeof(Header)) || size > 65000 || interval < 1000) {
    Die("bad --count, --warmup, --size or --interval-us");
  }
  if (static_cast<double>(count + warmup) * static_cast<double>(interval) / 1e9 > kMaxDuration) {
    Die("run would exceed 3600 s");
  }
  const size_t total = static_cast<size_t>(count + warmup);
  for (Side* s : {&sa, &sb}) {
    s->tx_ns.assign(total, 0);
    s->rx_ns.assign(total, 0);
  }
  std::vector<char> out(static_cast<size_t>(size), 0), buf(65536);
  int64_t next = Mono();
  const int64_t start = next;
  size_t sent = 0;
  int64_t last_send = start;
  while (!g_stop) {
    int64_t now = Mono();
    if (sent < total && now >= next) {
      for (int k = 0; k < 2; ++k) {
        int dir = static_cast<int>((static_cast<size_t>(k) + sent) & 1);  // alternate which goes first
        Side& tx = dir == 0 ? sa : sb;
        Side& rx = dir == 0 ? sb : sa;
        Header h{kMagic, static_cast<uint32_t>(dir), sent, NowNs()};
        std::memcpy(out.data(), &h, sizeof h);
        if (sendto(tx.fd, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&rx.addr), sizeof rx.addr) >= 0) {
          tx.id_to_probe[tx.next_tx_id++] = sent;
        }
      }
      ++sent;
      last_send = now;
      next = start + static_cast<int64_t>(sent) * interval;
      continue;
    }
    if (sent == total && now - last_send > timeout) break;
    int64_t wait = sent < total ? next - now : last_send + timeout - now;
    pollfd p[2] = {{sa.fd, POLLIN, 0}, {sb.fd, POLLIN, 0}};  // POLLERR (TX stamps) is always reported
    if (wait > 0) poll(p, 2, static_cast<int>(std::min<int64_t>(wait / 1'000'000, 1000)));
    Drain(sa, buf);
    Drain(sb, buf);
    if (wait > 0 && wait < 1'000'000) SleepUntilMono(std::min(next, now + wait));
  }
  Drain(sa, buf);
  Drain(sb, buf);

  FILE* samples = nullptr;
  if (a.Has("samples")) {
    samples = std::fopen(a.Str("samples").c_str(), "w");
    if (samples == nullptr) DieErrno("open " + a.Str("samples"));
    std::fprintf(samples, "dir,seq,tx_ns,rx_ns,owd_ns\n");
  }
  std::vector<double> fwd, rev;
  int lost_fwd = 0, lost_rev = 0;
  for (size_t i = static_cast<size_t>(warmup); i < total; ++i) {
    for (int dir = 0; dir < 2; ++dir) {
      int64_t t = (dir == 0 ? sa : sb).tx_ns[i], r = (dir == 0 ? sb : sa).rx_ns[i];
      if (t == 0 || r == 0) {
        ++(dir == 0 ? lost_fwd : lost_rev);
        continue;
      }
      (dir == 0 ? fwd : rev).push_back(static_cast<double>(r - t) / 1e3);
      if (samples) {
        std::fprintf(samples, "%s,%zu,%lld,%lld,%lld\n", dir == 0 ? "ab" : "ba", i - static_cast<size_t>(warmup),
                     static_cast<long long>(t), static_cast<long long>(r), static_cast<long long>(r - t));
      }
    }
  }
  if (samples) std::fclose(samples);
  Summary f = Summarize(fwd), r = Summarize(rev);
  if (!a.Has("quiet")) {
    std::fprintf(stderr, "%-6s %6s %5s %9s %9s %9s %9s %9s  (us)\n", "dir", "n", "lost", "min", "p50", "p90", "p99",
                 "max");
    for (int d = 0; d < 2; ++d) {
      const Summary& s = d == 0 ? f : r;
      std::fprintf(stderr, "%-6s %6zu %5d %9.2f %9.2f %9.2f %9.2f %9.2f\n", d == 0 ? "a->b" : "b->a", s.n,
                   d == 0 ? lost_fwd : lost_rev, s.min, s.p50, s.p90, s.p99, s.max);
    }
  }
  std::printf(
      "{\"mode\":\"owd\",\"a\":\"%s\",\"b\":\"%s\",\"a_ns\":\"%s\",\"b_ns\":\"%s\",\"size\":%d,"
      "\"a_to_b\":%s,\"b_to_a\":%s,\"lost_a_to_b\":%d,\"lost_b_to_a\":%d}\n",
      ToString(sa.addr).c_str(), ToString(sb.addr).c_str(), sa.ns.c_str(), sb.ns.c_str(), size,
      SummaryJson(f).c_str(), SummaryJson(r).c_str(), lost_fwd, lost_rev);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (a.mode == "send") return Send(a);
  if (a.mode == "sink") return Sink(a);
  return Owd(a);
}
