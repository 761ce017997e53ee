#include "lockstep/nccl/agent_link.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace lockstep::nccl {

namespace {

constexpr size_t kMaxBuffered = kMaxAgentLine * 128;
constexpr int64_t kMs = 1'000'000;

}  // namespace

int64_t RawNowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

Result<std::optional<AgentLinkOptions>> AgentLinkOptionsFromEnv(const std::function<const char*(const char*)>& env) {
  AgentLinkOptions o;
  if (const char* p = env("LOCKSTEP_NCCL_AGENT_POLL_MS"); p != nullptr && *p != '\0') {
    char* end = nullptr;
    errno = 0;
    const long x = std::strtol(p, &end, 10);
    if (errno != 0 || end == p || *end != '\0' || x < 1 || x > 1000) {
      return InvalidArgument(std::string("LOCKSTEP_NCCL_AGENT_POLL_MS must be an integer between 1 and 1000 (got \"") +
                             p + "\")");
    }
    o.query_every_ms = static_cast<int>(x);
  }
  if (const char* p = env("LOCKSTEP_NCCL_AGENT_SOCKET"); p != nullptr && *p != '\0') {
    if (std::string(p) == "off") return std::optional<AgentLinkOptions>();
    o.socket_path = p;
  }
  const char* job = env("LOCKSTEP_JOB");
  if (job == nullptr || *job == '\0') job = env("LOCKSTEP_NCCL_JOB");
  if (job != nullptr && *job != '\0') {
    o.job.clear();
    for (const char* c = job; *c != '\0' && o.job.size() < 63; ++c) {
      const bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
                      *c == '_' || *c == '.' || *c == '/';
      o.job += ok ? *c : '_';
    }
  }
  return std::optional<AgentLinkOptions>(std::move(o));
}

AgentLink::AgentLink(AgentLinkOptions options, WarnFn info, WarnFn warn)
    : o_(std::move(options)), info_(std::move(info)), warn_(std::move(warn)), state_(std::make_shared<AgentState>()) {}

AgentLink::~AgentLink() {
  if (fd_ >= 0) ::close(fd_);
}

bool AgentLink::Connect() {
  if (o_.socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
    if (!said_absent_) Info("node agent socket path too long: " + o_.socket_path);
    said_absent_ = true;
    return false;
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, o_.socket_path.c_str(), o_.socket_path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    if (!said_absent_) {
      Info("no node agent at " + o_.socket_path + " (" + err +
           "); striping over the configured rails with failover on socket errors only, no path health from the "
           "agent, no fabric time (one-way delays not measured); retrying every " +
           std::to_string(o_.retry_every_ms / 1000) + " s");
      said_absent_ = true;
    }
    return false;
  }
  fd_ = fd;
  in_.clear();
  out_.clear();
  reader_ = AgentStateReader();
  query_outstanding_ = false;
  Queue(FormatAgentLine(AgentLine{"hello", {{"v", "1"}, {"job", o_.job}, {"pid", std::to_string(::getpid())}}}));
  return true;
}

void AgentLink::Drop(const std::string& why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  next_retry_ns_ = RawNowNs() + o_.retry_every_ms * kMs;
  if (connected_.exchange(false)) {
    Info("lost the node agent at " + o_.socket_path + " (" + why +
         "); carrying on without its path health and fabric time, retrying every " +
         std::to_string(o_.retry_every_ms / 1000) + " s");
    said_absent_ = true;
  }
  locked_.store(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = std::make_shared<AgentState>();
  }
  generation_.fetch_add(1);
}

void AgentLink::Queue(const std::string& s) {
  if (out_.size() + s.size() > kMaxBuffered) return;  // the agent is not reading: drop, never block
  out_ += s;
}

void AgentLink::Flush() {
  while (fd_ >= 0 && !out_.empty()) {
    ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      out_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Drop(n < 0 ? std::strerror(errno) : "send returned 0");
  }
}

void AgentLink::Adopt(AgentState s) {
  const bool first = !connected_.exchange(true);
  offset_ns_.store(s.offset_ns);
  locked_.store(s.locked);
  bool changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changed = !(*state_ == s);
    if (changed) state_ = std::make_shared<AgentState>(std::move(s));
  }
  if (changed || first) generation_.fetch_add(1);
  if (first) {
    const AgentState& st = *State();
    Info("node agent at " + o_.socket_path + ": " + std::to_string(st.paths.size()) + " paths, " +
         std::to_string(st.rails.size()) + " rails, host " + Ipv4String(st.host) + ", clock sync " +
         (st.locked ? "locked (chunks stamped in fabric time, error bound " + std::to_string(st.bound_ns) + " ns)"
                    : "not locked (no fabric time yet)") +
         ", job " + o_.job);
    said_absent_ = false;
  }
}

bool AgentLink::ReadLines() {
  char buf[4096];
  while (fd_ >= 0) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      if (in_.size() > kMaxBuffered) {
        Drop("the agent sent more than " + std::to_string(kMaxBuffered) + " bytes without a full reply");
        return false;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    Drop(n == 0 ? "closed by the agent" : std::strerror(errno));
    return false;
  }
  size_t pos;
  while ((pos = in_.find('\n')) != std::string::npos) {
    std::string line = in_.substr(0, pos);
    in_.erase(0, pos + 1);
    Result<std::optional<AgentState>> r = reader_.Feed(line);
    if (!r.ok()) {
      if (warn_) warn_("node agent sent a malformed reply (" + r.error().message + "); dropping the link");
      Drop("malformed reply");
      return false;
    }
    if (r->has_value()) {
      query_outstanding_ = false;
      Adopt(std::move(**r));
    }
  }
  return true;
}

bool AgentLink::Start() {
  std::lock_guard<std::mutex> io(io_mu_);
  if (!Connect()) {
    next_retry_ns_ = RawNowNs() + o_.retry_every_ms * kMs;
    next_due_ns_.store(next_retry_ns_);
    return false;
  }
  Queue("query\n");
  query_outstanding_ = true;
  const int64_t deadline = RawNowNs() + o_.connect_timeout_ms * kMs;
  while (fd_ >= 0 && !connected_.load()) {
    Flush();
    if (fd_ < 0) break;
    const int64_t left = deadline - RawNowNs();
    if (left <= 0) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
      Info("the node agent at " + o_.socket_path + " did not answer within " + std::to_string(o_.connect_timeout_ms) +
           " ms; carrying on without its path health and fabric time, retrying every " +
           std::to_string(o_.retry_every_ms / 1000) + " s");
      said_absent_ = true;
      next_retry_ns_ = RawNowNs() + o_.retry_every_ms * kMs;
      break;
    }
    pollfd p{.fd = fd_, .events = static_cast<short>(POLLIN | (out_.empty() ? 0 : POLLOUT)), .revents = 0};
    ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left / kMs)));
    if (!ReadLines()) break;
  }
  if (!connected_.load() && !said_absent_) {
    Info("the node agent at " + o_.socket_path + " closed the link before answering; carrying on without its path " +
         "health and fabric time, retrying every " + std::to_string(o_.retry_every_ms / 1000) + " s");
    said_absent_ = true;
  }
  const int64_t now = RawNowNs();
  next_query_ns_ = now + o_.query_every_ms * kMs;
  next_report_ns_ = now + o_.report_every_ms * kMs;
  next_due_ns_.store(std::min(next_query_ns_, fd_ >= 0 ? next_query_ns_ : next_retry_ns_));
  return connected_.load();
}

void AgentLink::Poll() {
  const int64_t now = RawNowNs();
  if (now < next_due_ns_.load(std::memory_order_relaxed)) return;
  std::unique_lock<std::mutex> io(io_mu_, std::try_to_lock);
  if (!io.owns_lock()) return;
  if (fd_ < 0) {
    if (now < next_retry_ns_) {
      next_due_ns_.store(next_retry_ns_);
      return;
    }
    next_retry_ns_ = now + o_.retry_every_ms * kMs;
    if (!Connect()) {
      next_due_ns_.store(next_retry_ns_);
      return;
    }
    next_query_ns_ = now;
  }
  if (!ReadLines()) {
    next_due_ns_.store(next_retry_ns_);
    return;
  }
  if (now >= next_query_ns_) {
    if (!query_outstanding_) {
      Queue("query\n");
      query_outstanding_ = true;
    }
    next_query_ns_ = now + o_.query_every_ms * kMs;
  }
  if (now >= next_report_ns_ && connected_.load()) {
    std::string lines;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [conn, streams] : reports_) {
        for (const StreamReport& r : streams) lines += EncodeStreamReport(r);
      }
      for (uint64_t c : closed_) lines += FormatAgentLine(AgentLine{"close", {{"conn", std::to_string(c)}}});
      closed_.clear();
    }
    Queue(lines);
    next_report_ns_ = now + o_.report_every_ms * kMs;
  }
  Flush();
  // A reply is read within a millisecond of its arrival (not at the next
  // query): a down verdict reaches the streams one agent round trip after
  // the query, not a whole interval later.
  int64_t due = fd_ >= 0 ? std::min(next_query_ns_, next_report_ns_) : next_retry_ns_;
  if (fd_ >= 0 && query_outstanding_) due = std::min(due, now + kMs);
  next_due_ns_.store(due);
}

std::shared_ptr<const AgentState> AgentLink::State() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

uint64_t AgentLink::FabricNowNs() const {
  if (!locked_.load(std::memory_order_relaxed)) return 0;
  const int64_t t = RawNowNs() + offset_ns_.load(std::memory_order_relaxed);
  return t > 0 ? static_cast<uint64_t>(t) : 0;
}

void AgentLink::Report(uint64_t conn, bool send, std::vector<StreamReport> streams) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = reports_.find({conn, send});
  if (it == reports_.end() && reports_.size() >= o_.max_connections) return;
  reports_[{conn, send}] = std::move(streams);
}

void AgentLink::Close(uint64_t conn, bool send) {
  std::lock_guard<std::mutex> lock(mu_);
  // The agent forgets both ends on a close line: send it once neither is left.
  if (reports_.erase({conn, send}) > 0 && reports_.count({conn, !send}) == 0 && closed_.size() < o_.max_connections) {
    closed_.push_back(conn);
  }
}

}  // namespace lockstep::nccl
