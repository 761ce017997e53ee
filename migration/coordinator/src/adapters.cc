#include "lockstep/coordinator/adapters.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <spawn.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

extern char** environ;

namespace lockstep::coordinator {

LocalHosts::LocalHosts(std::vector<std::string> extra) : hosts_(extra.begin(), extra.end()) {
  for (const char* h : {"127.0.0.1", "localhost", "::1", "0.0.0.0"}) hosts_.insert(h);
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && name[0]) hosts_.insert(name);
  // Every address of this host's interfaces (in this network namespace).
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr) continue;
      char buf[INET6_ADDRSTRLEN] = {};
      if (a->ifa_addr->sa_family == AF_INET) {
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
      } else if (a->ifa_addr->sa_family == AF_INET6) {
        ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, buf, sizeof buf);
      }
      if (buf[0]) hosts_.insert(buf);
    }
    ::freeifaddrs(list);
  }
}

Status LocalSignalFencer::Fence(const MemberRef& m) {
  const std::string& member = m.member;
  const std::string& host = m.host;
  const int pid = m.pid;
  if (!local_.Contains(host)) {
    return Unavailable("cannot fence member " + member + ": host " + host + " is not this machine (only marked dead)");
  }
  if (pid <= 1) return InvalidArgument("cannot fence member " + member + ": bad pid " + std::to_string(pid));
  if (::kill(pid, SIGKILL) != 0 && errno != ESRCH) {
    return Internal("kill(" + std::to_string(pid) + ", SIGKILL) for member " + member + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

ShellSpareLauncher::ShellSpareLauncher(std::string command, std::string coordinator_url)
    : command_(std::move(command)), url_(std::move(coordinator_url)) {}

ShellSpareLauncher::~ShellSpareLauncher() = default;

Result<SpareHandle> ShellSpareLauncher::Launch() {
  if (command_.empty()) return InvalidArgument("no --spare-command: cannot start a spare");
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "LOCKSTEP_COORDINATOR=", 21) != 0) env_strings.push_back(*e);
  }
  env_strings.push_back("LOCKSTEP_COORDINATOR=" + url_);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  // A simple command is exec'd, so the pid we reap is the spare's own (the one
  // it registers with). A compound one runs under the shell's pid.
  bool simple = command_.find_first_of(";&|\n`(){}<>") == std::string::npos;
  std::string script = simple ? "exec " + command_ : command_;
  char sh[] = "/bin/sh", dash_c[] = "-c";
  char* argv[] = {sh, dash_c, script.data(), nullptr};
  // The coordinator ignores SIGPIPE; the spare gets the default back.
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  sigset_t none;  // the coordinator blocks SIGTERM/SIGINT (it sigwaits them); not the spare
  sigemptyset(&none);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, "/bin/sh", nullptr, &attr, argv, envp.data());
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0) return Internal(std::string("starting the spare command: posix_spawn: ") + std::strerror(rc));
  children_.insert(pid);
  return SpareHandle{static_cast<int>(pid), ""};
}

std::vector<SpareLauncher::Exited> ShellSpareLauncher::Reap() {
  std::vector<Exited> out;
  for (auto it = children_.begin(); it != children_.end();) {
    int st = 0;
    pid_t r = ::waitpid(*it, &st, WNOHANG);
    if (r == 0) { ++it; continue; }
    std::string how = r < 0                ? "gone (not our child any more)"
                      : WIFEXITED(st)      ? "exited with status " + std::to_string(WEXITSTATUS(st))
                      : WIFSIGNALED(st)    ? "killed by signal " + std::to_string(WTERMSIG(st))
                                           : "ended";
    out.push_back({SpareHandle{*it, ""}, how});
    it = children_.erase(it);
  }
  return out;
}

namespace {

std::optional<std::string> GoneByProc(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!f || !std::getline(f, line)) return std::string("is gone");
  // pid (comm) S ...: the state follows the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  char state = line[close + 2];
  if (state == 'Z' || state == 'X' || state == 'x') return std::string("exited (zombie)");
  return std::nullopt;
}

}  // namespace

ProcProcessProbe::~ProcProcessProbe() {
  for (const auto& [pid, w] : pidfds_) ::close(w.fd);
}

std::optional<std::string> ProcProcessProbe::Gone(int pid) {
  if (pid <= 0) return std::string("has no valid pid");
  if (no_pidfd_) return GoneByProc(pid);
  auto it = pidfds_.find(pid);
  if (it == pidfds_.end()) {
    long fd = ::syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) {
      if (errno == ESRCH) return std::string("is gone");
      no_pidfd_ = true;  // ENOSYS (old kernel), EPERM (seccomp): read /proc instead
      return GoneByProc(pid);
    }
    it = pidfds_.emplace(pid, Watched{static_cast<int>(fd), false}).first;
  }
  it->second.asked = true;
  // A pidfd polls readable once its process has exited (zombie or reaped).
  pollfd p{it->second.fd, POLLIN, 0};
  int n = ::poll(&p, 1, 0);
  if (n == 0) return std::nullopt;
  if (n < 0) return GoneByProc(pid);
  ::close(it->second.fd);
  pidfds_.erase(it);
  return std::string("exited");
}

void ProcProcessProbe::Wait(std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  for (auto it = pidfds_.begin(); it != pidfds_.end();) {
    if (!it->second.asked) {  // no longer a live member: stop watching it
      ::close(it->second.fd);
      it = pidfds_.erase(it);
      continue;
    }
    it->second.asked = false;
    fds.push_back(pollfd{it->second.fd, POLLIN, 0});
    ++it;
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(timeout);
    return;
  }
  ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));  // EINTR: an early tick
}

Status FileStateStore::Save(const std::string& text) {
  std::string tmp = path_ + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("writing state file " + tmp + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return Unavailable("writing state file " + tmp + ": " + std::strerror(e));
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    return Unavailable("renaming " + tmp + " to " + path_ + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<std::optional<std::string>> FileStateStore::Load() {
  std::ifstream f(path_);
  if (!f) {
    if (errno == ENOENT) return std::optional<std::string>();
    struct stat st{};
    if (::stat(path_.c_str(), &st) != 0) return std::optional<std::string>();
    return Unavailable("cannot read state file " + path_ + ": " + std::strerror(errno));
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return std::optional<std::string>(ss.str());
}

}  // namespace lockstep::coordinator
