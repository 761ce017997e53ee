// nccl-harness: loads a NCCL network plugin with dlopen and drives it exactly
// as NCCL's proxy does (init, devices, getProperties, listen, handle exchange
// out of band, non-blocking connect/accept polled to completion, regMr,
// windows of isend/irecv with tags, test, close), running a ring all-reduce
// between N processes and checking every element of the result.
//
//   nccl-harness --plugin build/ci/nccl/libnccl-net-lockstep.so --ranks 4
//     --rails 127.0.0.1,127.0.0.2,127.0.0.3 [--api v10] [--elems N] [--iters K]
//     [--msg-bytes B] [--window W] [--cut-streams C] [--seed S] [--timeout-s T]
//     [--run-timeout-s R]  (T bounds each step: longer is a hang; R the whole
//     run, default T + 10)
//
// Placement (netlab runs): --netns NS0,NS1,... puts rank r into network
// namespace NS[r mod n] (/run/netns/<name>) before it loads the plugin;
// --agent-sockets P0,P1,... gives rank r LOCKSTEP_NCCL_AGENT_SOCKET=P[r mod n]
// (each host's node agent); --rails agent leaves LOCKSTEP_NCCL_RAILS unset
// (the agent's rails); --job NAME sets LOCKSTEP_JOB. --timeline-dir DIR:
// each rank writes DIR/rank<r>.tsv, one line per iteration (index, start in
// Unix seconds, duration in ms). Log lines start with the Unix time.
//
// --cut-streams C: rank 0 shuts down C of its TCP streams (chosen at random,
// at random moments) during the run; the result must still be exact. Keep C
// below the streams per connection (a connection with no stream left fails).
// --pattern alltoall: an all-to-all instead (each rank sends an equal
// segment to every other rank over a connection of its own) with every
// received element checked.
// Prints one JSON line per rank and exits 0 only if every rank verified its
// result within the timeout. Real NCCL needs a GPU; this is what CI runs.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "net_api.h"
#include "stream_cutter.h"

namespace {

using lockstep::nccl::harness::NetApi;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string plugin;
  std::string api = "v10";
  std::string rails = "127.0.0.1";
  int ranks = 2;
  size_t elems = 1 << 20;  // uint64 elements per rank
  int iters = 3;
  size_t msg_bytes = 256 * 1024;
  int window = 8;
  int cut_streams = 0;
  uint64_t seed = 1;
  int timeout_s = 60;     // per step (a ring step, an all-to-all): longer is a hang
  int run_timeout_s = 0;  // the whole run (0: timeout_s + 10)
  std::vector<std::string> netns{}, agent_sockets{};
  std::string job;
  std::string timeline_dir;
  bool alltoall = false;  // --pattern alltoall (else ring all-reduce)
  // Handles each rank publishes: one listener for the ring, one per peer for all-to-all.
  int listeners() const { return alltoall ? ranks : 1; }
};

double UnixSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

int g_rank = -1;
int g_warnings = 0;

void Logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN && level != NCCL_LOG_INFO) return;
  if (level == NCCL_LOG_WARN) ++g_warnings;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::fprintf(stderr, "%ld.%03ld [rank %d] %s %s\n", static_cast<long>(ts.tv_sec), ts.tv_nsec / 1000000, g_rank,
               level == NCCL_LOG_WARN ? "WARN" : "INFO", buf);
}

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "[rank %d] FAILED: %s\n", g_rank, m.c_str());
  std::exit(1);
}

void Check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) Die(std::string(what) + " returned " + std::to_string(r));
}

uint64_t Value(uint64_t seed, int iter, int rank, size_t i) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(iter) * 0xbf58476d1ce4e5b9ull +
               static_cast<uint64_t>(rank) * 0x94d049bb133111ebull + i;
  x ^= x >> 31;
  x *= 0xd6e9c1ad3c1a2f5bull;
  return x ^ (x >> 29);
}

bool WriteAll(int fd, const void* p, size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// One rank: everything NCCL's proxy would do for a ring.
class Rank {
 public:
  Rank(const Options& o, int rank) : o_(o), rank_(rank), rng_(o.seed * 1000 + static_cast<uint64_t>(rank)) {}

  void Run(int to_parent, int from_parent) {
    if (!o_.netns.empty()) {
      const std::string ns = "/run/netns/" + o_.netns[static_cast<size_t>(rank_) % o_.netns.size()];
      const int fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) Die("entering " + ns + ": " + std::strerror(errno));
      close(fd);
    }
    if (!o_.agent_sockets.empty()) {
      setenv("LOCKSTEP_NCCL_AGENT_SOCKET",
             o_.agent_sockets[static_cast<size_t>(rank_) % o_.agent_sockets.size()].c_str(), 1);
    }
    if (!o_.job.empty()) setenv("LOCKSTEP_JOB", o_.job.c_str(), 1);
    if (o_.rails == "agent") {
      unsetenv("LOCKSTEP_NCCL_RAILS");
    } else {
      setenv("LOCKSTEP_NCCL_RAILS", o_.rails.c_str(), 1);
    }
    std::string error;
    if (!net_.Load(o_.plugin, o_.api, &error)) Die(error);
    Check(net_.init(Logger), "init");
    int ndev = 0;
    Check(net_.devices(&ndev), "devices");
    if (ndev < 1) Die("the plugin has no devices");
    ncclNetProperties_v10_t props;
    Check(net_.getProperties(0, &props), "getProperties");
    if ((props.ptrSupport & NCCL_PTR_HOST) == 0) Die("device 0 does not take host memory");
    if (props.maxRecvs < 1) Die("maxRecvs < 1");

    if (o_.alltoall) {
      RunAllToAll(to_parent, from_parent, props);
      return;
    }
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listen_comm = nullptr;
    Check(net_.listen(0, handle, &listen_comm), "listen");
    if (!WriteAll(to_parent, handle, sizeof handle)) Die("handle to parent");
    std::vector<char> all(static_cast<size_t>(o_.ranks) * NCCL_NET_HANDLE_MAXSIZE);
    if (!ReadAll(from_parent, all.data(), all.size())) Die("handles from parent");
    char next_handle[NCCL_NET_HANDLE_MAXSIZE];
    std::memcpy(next_handle, &all[static_cast<size_t>((rank_ + 1) % o_.ranks) * NCCL_NET_HANDLE_MAXSIZE],
                sizeof next_handle);

    // Non-blocking connect and accept, polled together until both are done.
    const auto deadline = Clock::now() + std::chrono::seconds(o_.timeout_s);
    while (send_ == nullptr || recv_ == nullptr) {
      if (send_ == nullptr) Check(net_.connect(0, next_handle, &send_), "connect");
      if (recv_ == nullptr) Check(net_.accept(listen_comm, &recv_), "accept");
      if (Clock::now() > deadline) Die("connect/accept did not complete");
    }

    const size_t n = o_.elems;
    buf_.resize(n);
    tmp_.resize(n);
    Check(net_.regMr(send_, buf_.data(), n * 8, NCCL_PTR_HOST, &send_mh_), "regMr(send)");
    Check(net_.regMr(recv_, buf_.data(), n * 8, NCCL_PTR_HOST, &recv_mh_), "regMr(recv)");
    Check(net_.regMr(recv_, tmp_.data(), n * 8, NCCL_PTR_HOST, &tmp_mh_), "regMr(tmp)");

    double seconds = 0;
    std::vector<double> iter_ms, iter_start;
    for (int iter = 0; iter < o_.iters; ++iter) {
      for (size_t i = 0; i < n; ++i) buf_[i] = Value(o_.seed, iter, rank_, i);
      iter_start.push_back(UnixSeconds());
      const auto start = Clock::now();
      AllReduce();
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      seconds += s;
      iter_ms.push_back(s * 1e3);
      Timeline(iter_ms.size() - 1, iter_start.back(), iter_ms.back());
      for (size_t i = 0; i < n; ++i) {
        uint64_t want = 0;
        for (int r = 0; r < o_.ranks; ++r) want += Value(o_.seed, iter, r, i);
        if (buf_[i] != want) Die("iteration " + std::to_string(iter) + ": element " + std::to_string(i) + " wrong");
      }
    }
    Check(net_.deregMr(send_, send_mh_), "deregMr");
    Check(net_.deregMr(recv_, recv_mh_), "deregMr");
    Check(net_.deregMr(recv_, tmp_mh_), "deregMr");
    Check(net_.closeSend(send_), "closeSend");
    Check(net_.closeRecv(recv_), "closeRecv");
    Check(net_.closeListen(listen_comm), "closeListen");
    const double bytes = 2.0 * (o_.ranks - 1) / o_.ranks * static_cast<double>(n * 8) * o_.iters;
    Report(props.name, props.speed, bytes, seconds, iter_ms, iter_start);
  }

 private:
  struct Pending {
    void* req = nullptr;
    size_t size = 0;
  };

  // One JSON line: bus bandwidth (`bytes` each rank moved), the slowest
  // iteration against the median (a failover's stall shows there) and the
  // rank's CPU time; the timeline file when asked.
  // One line per iteration as it ends (a run that hangs keeps its
  // timeline): its start (Unix seconds) and duration (ms), for stall and
  // time-to-full-throughput around a fault at a known time.
  void Timeline(size_t iter, double start, double ms) {
    if (o_.timeline_dir.empty()) return;
    if (timeline_ == nullptr) {
      timeline_ = std::fopen((o_.timeline_dir + "/rank" + std::to_string(rank_) + ".tsv").c_str(), "w");
      if (timeline_ == nullptr) return;
    }
    std::fprintf(timeline_, "%zu\t%.6f\t%.3f\n", iter, start, ms);
    std::fflush(timeline_);
  }

  void Report(const char* device, int speed, double bytes, double seconds, const std::vector<double>& iter_ms,
              const std::vector<double>& iter_start) {
    (void)iter_start;
    std::vector<double> sorted = iter_ms;
    std::sort(sorted.begin(), sorted.end());
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    std::printf(
        "{\"rank\":%d,\"ok\":true,\"pattern\":\"%s\",\"device\":\"%s\",\"speed_mbps\":%d,\"elems\":%zu,"
        "\"iters\":%d,\"seconds\":%.4f,\"bus_gbps\":%.3f,\"median_iter_ms\":%.2f,\"max_iter_ms\":%.2f,"
        "\"cpu_s\":%.3f,\"cuts\":%d,\"warnings\":%d}\n",
        rank_, o_.alltoall ? "alltoall" : "ring", device, speed, o_.elems, o_.iters, seconds, bytes * 8 / seconds / 1e9,
        sorted[sorted.size() / 2], sorted.back(), cpu, cuts_, g_warnings);
    std::fflush(stdout);
  }

  // All-to-all: rank r holds `elems` elements in `ranks` segments; segment p
  // goes to rank p, and r receives segment r of every peer. One listener per
  // peer (as NCCL listens per connection), so connection p is known to be
  // peer p's; every connection runs at once with its own window.
  void RunAllToAll(int to_parent, int from_parent, const ncclNetProperties_v10_t& props) {
    const int N = o_.ranks;
    const size_t H = NCCL_NET_HANDLE_MAXSIZE;
    std::vector<char> mine(static_cast<size_t>(N) * H, 0);
    std::vector<void*> listens(static_cast<size_t>(N), nullptr);
    for (int p = 0; p < N; ++p) Check(net_.listen(0, &mine[static_cast<size_t>(p) * H], &listens[p]), "listen");
    if (!WriteAll(to_parent, mine.data(), mine.size())) Die("handles to parent");
    std::vector<char> all(static_cast<size_t>(N) * N * H);
    if (!ReadAll(from_parent, all.data(), all.size())) Die("handles from parent");
    std::vector<Peer> peers(static_cast<size_t>(N));
    const auto deadline = Clock::now() + std::chrono::seconds(o_.timeout_s);
    for (bool done = false; !done;) {
      done = true;
      for (int p = 0; p < N; ++p) {
        if (p == rank_) continue;
        Peer& q = peers[p];
        // Peer p's listener for this rank.
        char* h = &all[(static_cast<size_t>(p) * N + static_cast<size_t>(rank_)) * H];
        if (q.send == nullptr) Check(net_.connect(0, h, &q.send), "connect");
        if (q.recv == nullptr) Check(net_.accept(listens[p], &q.recv), "accept");
        done = done && q.send != nullptr && q.recv != nullptr;
      }
      if (Clock::now() > deadline) Die("connect/accept did not complete");
    }
    const size_t seg = o_.elems / static_cast<size_t>(N);
    if (seg == 0) Die("--elems must be at least --ranks for all-to-all");
    buf_.resize(seg * static_cast<size_t>(N));
    tmp_.resize(seg * static_cast<size_t>(N));
    for (int p = 0; p < N; ++p) {
      if (p == rank_) continue;
      Check(net_.regMr(peers[p].send, buf_.data(), buf_.size() * 8, NCCL_PTR_HOST, &peers[p].send_mh), "regMr(send)");
      Check(net_.regMr(peers[p].recv, tmp_.data(), tmp_.size() * 8, NCCL_PTR_HOST, &peers[p].recv_mh), "regMr(recv)");
    }
    double seconds = 0;
    std::vector<double> iter_ms, iter_start;
    for (int iter = 0; iter < o_.iters; ++iter) {
      for (size_t i = 0; i < buf_.size(); ++i) buf_[i] = Value(o_.seed, iter, rank_, i);
      std::fill(tmp_.begin(), tmp_.end(), 0);
      iter_start.push_back(UnixSeconds());
      const auto start = Clock::now();
      AllToAll(peers, seg);
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      seconds += s;
      iter_ms.push_back(s * 1e3);
      Timeline(iter_ms.size() - 1, iter_start.back(), iter_ms.back());
      for (int p = 0; p < N; ++p) {
        for (size_t i = 0; i < seg; ++i) {
          const uint64_t want = Value(o_.seed, iter, p, static_cast<size_t>(rank_) * seg + i);
          if (tmp_[static_cast<size_t>(p) * seg + i] != want) {
            Die("iteration " + std::to_string(iter) + ": element " + std::to_string(i) + " from rank " +
                std::to_string(p) + " wrong");
          }
        }
      }
    }
    for (int p = 0; p < N; ++p) {
      if (p == rank_) continue;
      Check(net_.deregMr(peers[p].send, peers[p].send_mh), "deregMr");
      Check(net_.deregMr(peers[p].recv, peers[p].recv_mh), "deregMr");
      Check(net_.closeSend(peers[p].send), "closeSend");
      Check(net_.closeRecv(peers[p].recv), "closeRecv");
    }
    for (void* l : listens) Check(net_.closeListen(l), "closeListen");
    const double bytes = static_cast<double>(N - 1) * static_cast<double>(seg * 8) * o_.iters;
    Report(props.name, props.speed, bytes, seconds, iter_ms, iter_start);
  }

  struct Peer {
    void* send = nullptr;
    void* recv = nullptr;
    void* send_mh = nullptr;
    void* recv_mh = nullptr;
    size_t sent = 0, received = 0, send_done = 0, recv_done = 0;
    std::deque<Pending> sends, recvs;
  };

  // One all-to-all: every peer's segment out and in, in messages of
  // msg_bytes with tags 0, 1, ..., at most `window` outstanding each way per peer.
  void AllToAll(std::vector<Peer>& peers, size_t seg) {
    const int N = o_.ranks;
    const size_t bytes = seg * 8, m = o_.msg_bytes;
    const size_t nmsg = (bytes + m - 1) / m;
    std::memcpy(&tmp_[static_cast<size_t>(rank_) * seg], &buf_[static_cast<size_t>(rank_) * seg], bytes);
    for (Peer& q : peers) q.sent = q.received = q.send_done = q.recv_done = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(o_.timeout_s);
    size_t left = static_cast<size_t>(N - 1) * 2 * nmsg;
    while (left > 0) {
      if (Clock::now() > deadline) Die("an all-to-all did not complete (hang)");
      bool idle = true;
      for (int p = 0; p < N; ++p) {
        if (p == rank_) continue;
        Peer& q = peers[p];
        auto* rbase = reinterpret_cast<char*>(&tmp_[static_cast<size_t>(p) * seg]);
        auto* sbase = reinterpret_cast<char*>(&buf_[static_cast<size_t>(p) * seg]);
        if (q.recvs.size() < static_cast<size_t>(o_.window) && q.received < nmsg) {
          const size_t off = q.received * m, len = std::min(m, bytes - off);
          void* req = nullptr;
          Check(net_.irecv(q.recv, rbase + off, len, static_cast<int>(q.received), q.recv_mh, &req), "irecv");
          if (req != nullptr) {
            q.recvs.push_back({req, len});
            ++q.received;
            idle = false;
          }
        }
        if (q.sends.size() < static_cast<size_t>(o_.window) && q.sent < nmsg) {
          const size_t off = q.sent * m, len = std::min(m, bytes - off);
          void* req = nullptr;
          Check(net_.isend(q.send, sbase + off, len, static_cast<int>(q.sent), q.send_mh, &req), "isend");
          if (req != nullptr) {
            q.sends.push_back({req, len});
            ++q.sent;
            idle = false;
          }
        }
        if (!q.sends.empty()) {
          int done = 0, size = -1;
          Check(net_.test(q.sends.front().req, &done, &size), "test(send)");
          if (done) {
            if (static_cast<size_t>(size) != q.sends.front().size) Die("send size mismatch");
            q.sends.pop_front();
            --left;
            idle = false;
          }
        }
        if (!q.recvs.empty()) {
          int done = 0, size = -1;
          Check(net_.test(q.recvs.front().req, &done, &size), "test(recv)");
          if (done) {
            if (static_cast<size_t>(size) != q.recvs.front().size) Die("received size mismatch");
            q.recvs.pop_front();
            --left;
            idle = false;
          }
        }
      }
      if (idle) sched_yield();
    }
  }

  size_t SegBegin(int seg) const { return o_.elems * static_cast<size_t>(seg) / static_cast<size_t>(o_.ranks); }

  void AllReduce() {
    const int N = o_.ranks;
    auto mod = [N](int x) { return ((x % N) + N) % N; };
    for (int s = 0; s < N - 1; ++s) {  // reduce-scatter
      const int send_seg = mod(rank_ - s), recv_seg = mod(rank_ - s - 1);
      Exchange(send_seg, recv_seg, tmp_.data(), tmp_mh_);
      for (size_t i = SegBegin(recv_seg); i < SegBegin(recv_seg + 1); ++i) buf_[i] += tmp_[i];
    }
    for (int s = 0; s < N - 1; ++s) {  // all-gather
      const int send_seg = mod(rank_ + 1 - s), recv_seg = mod(rank_ - s);
      Exchange(send_seg, recv_seg, buf_.data(), recv_mh_);
    }
  }

  // Sends segment `send_seg` of buf_ to the next rank and receives segment
  // `recv_seg` from the previous one into `into`, in messages of msg_bytes
  // with tags 0, 1, ..., at most `window` outstanding each way.
  void Exchange(int send_seg, int recv_seg, uint64_t* into, void* into_mh) {
    auto* sbase = reinterpret_cast<char*>(buf_.data() + SegBegin(send_seg));
    const size_t sbytes = (SegBegin(send_seg + 1) - SegBegin(send_seg)) * 8;
    auto* rbase = reinterpret_cast<char*>(into + SegBegin(recv_seg));
    const size_t rbytes = (SegBegin(recv_seg + 1) - SegBegin(recv_seg)) * 8;
    const size_t m = o_.msg_bytes;
    const size_t nsend = sbytes == 0 ? 1 : (sbytes + m - 1) / m, nrecv = rbytes == 0 ? 1 : (rbytes + m - 1) / m;
    size_t sent = 0, received = 0;
    std::deque<Pending> sends, recvs;
    size_t send_done = 0, recv_done = 0;
    bool idle = false;
    const auto deadline = Clock::now() + std::chrono::seconds(o_.timeout_s);
    while (send_done < nsend || recv_done < nrecv) {
      if (Clock::now() > deadline) Die("a ring step did not complete (hang)");
      // Idle: let the peers run, as NCCL's proxy thread yields when it has no
      // progress to make (matters when ranks share cores, as in CI).
      if (idle) sched_yield();
      idle = true;
      if (recvs.size() < static_cast<size_t>(o_.window) && received < nrecv) {
        const size_t off = received * m, len = std::min(m, rbytes - std::min(rbytes, off));
        void* req = nullptr;
        Check(net_.irecv(recv_, rbase + off, len, static_cast<int>(received), into_mh, &req), "irecv");
        if (req != nullptr) {
          recvs.push_back({req, len});
          ++received;
          idle = false;
        }
      }
      if (sends.size() < static_cast<size_t>(o_.window) && sent < nsend) {
        const size_t off = sent * m, len = std::min(m, sbytes - std::min(sbytes, off));
        void* req = nullptr;
        Check(net_.isend(send_, sbase + off, len, static_cast<int>(sent), send_mh_, &req), "isend");
        if (req != nullptr) {
          sends.push_back({req, len});
          ++sent;
          idle = false;
          MaybeCut();
        }
      }
      if (!sends.empty()) {
        int done = 0, size = -1;
        Check(net_.test(sends.front().req, &done, &size), "test(send)");
        if (done) {
          if (static_cast<size_t>(size) != sends.front().size) Die("send size mismatch");
          sends.pop_front();
          ++send_done;
          idle = false;
        }
      }
      if (!recvs.empty()) {
        int done = 0, size = -1;
        Check(net_.test(recvs.front().req, &done, &size), "test(recv)");
        if (done) {
          if (static_cast<size_t>(size) != recvs.front().size) Die("received size mismatch");
          recvs.pop_front();
          ++recv_done;
          idle = false;
        }
      }
    }
  }

  void MaybeCut() {
    if (rank_ != 0 || cuts_ >= o_.cut_streams) return;
    if (std::uniform_int_distribution<int>(0, 15)(rng_) != 0) return;
    std::vector<lockstep::nccl::harness::TcpSocket> socks;
    for (const auto& s : lockstep::nccl::harness::EstablishedTcpSockets()) {
      if (cut_.count(s.local_port) == 0) socks.push_back(s);
    }
    if (socks.empty()) return;
    const auto& s = socks[std::uniform_int_distribution<size_t>(0, socks.size() - 1)(rng_)];
    if (lockstep::nccl::harness::CutStream(s)) {
      cut_.insert(s.local_port);
      ++cuts_;
      std::fprintf(stderr, "[rank %d] cut stream %u -> %u\n", rank_, s.local_port, s.peer_port);
    }
  }

  const Options& o_;
  int rank_;
  std::mt19937_64 rng_;
  NetApi net_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  void* send_mh_ = nullptr;
  void* recv_mh_ = nullptr;
  void* tmp_mh_ = nullptr;
  std::vector<uint64_t> buf_, tmp_;
  int cuts_ = 0;
  std::set<uint16_t> cut_;
  FILE* timeline_ = nullptr;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die("missing value for " + a);
      return argv[++i];
    };
    if (a == "--plugin") o.plugin = next();
    else if (a == "--api") o.api = next();
    else if (a == "--rails") o.rails = next();
    else if (a == "--ranks") o.ranks = std::atoi(next().c_str());
    else if (a == "--elems") o.elems = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--iters") o.iters = std::atoi(next().c_str());
    else if (a == "--msg-bytes") o.msg_bytes = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--window") o.window = std::atoi(next().c_str());
    else if (a == "--cut-streams") o.cut_streams = std::atoi(next().c_str());
    else if (a == "--seed") o.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--timeout-s") o.timeout_s = std::atoi(next().c_str());
    else if (a == "--run-timeout-s") o.run_timeout_s = std::atoi(next().c_str());
    else if (a == "--netns") o.netns = SplitCommas(next());
    else if (a == "--agent-sockets") o.agent_sockets = SplitCommas(next());
    else if (a == "--job") o.job = next();
    else if (a == "--timeline-dir") o.timeline_dir = next();
    else if (a == "--pattern") {
      const std::string p = next();
      if (p != "ring" && p != "alltoall") Die("--pattern must be ring or alltoall");
      o.alltoall = p == "alltoall";
    } else Die("unknown flag " + a);
  }
  if (o.plugin.empty()) Die("--plugin is required");
  if (o.ranks < 2 || o.ranks > 64) Die("--ranks must be 2..64");
  if (o.iters < 1 || o.window < 1 || o.msg_bytes < 8 || o.timeout_s < 1)
    Die("bad --iters/--window/--msg-bytes/--timeout-s");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  std::vector<pid_t> pids;
  std::vector<int> from_child, to_child;
  for (int r = 0; r < o.ranks; ++r) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) Die("pipe");
    pid_t pid = fork();
    if (pid < 0) Die("fork");
    if (pid == 0) {
      g_rank = r;
      close(up[0]);
      close(down[1]);
      for (int fd : from_child) close(fd);
      for (int fd : to_child) close(fd);
      Rank(o, r).Run(up[1], down[0]);
      std::exit(0);
    }
    close(up[1]);
    close(down[0]);
    pids.push_back(pid);
    from_child.push_back(up[0]);
    to_child.push_back(down[1]);
  }
  // The out-of-band exchange (NCCL's bootstrap): every handle to every rank.
  const size_t per_rank = static_cast<size_t>(o.listeners()) * NCCL_NET_HANDLE_MAXSIZE;
  std::vector<char> handles(static_cast<size_t>(o.ranks) * per_rank);
  bool ok = true;
  for (int r = 0; r < o.ranks && ok; ++r)
    ok = ReadAll(from_child[r], &handles[static_cast<size_t>(r) * per_rank], per_rank);
  for (int r = 0; r < o.ranks && ok; ++r) ok = WriteAll(to_child[r], handles.data(), handles.size());
  if (!ok) std::fprintf(stderr, "harness: a rank died before the handle exchange\n");

  // Wait for every rank, bounded: a hang is a failure, not a stuck test.
  const auto deadline = Clock::now() + std::chrono::seconds(o.run_timeout_s > 0 ? o.run_timeout_s : o.timeout_s + 10);
  int failed = 0;
  size_t left = pids.size();
  while (left > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --left;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
      continue;
    }
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "harness: timed out; killing the ranks\n");
      for (pid_t p : pids) kill(p, SIGKILL);
      while (waitpid(-1, nullptr, 0) > 0) {}
      return 1;
    }
    poll(nullptr, 0, 5);
  }
  std::fprintf(stderr, "harness: %d of %d ranks failed%s\n", failed, o.ranks,
               ok ? "" : " (the handle exchange did not complete)");
  return failed == 0 && ok ? 0 : 1;
}
