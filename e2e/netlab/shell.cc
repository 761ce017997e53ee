#include "netlab/shell.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "netlab/parse.h"

namespace lockstep::netlab {
namespace {

volatile sig_atomic_t g_interrupt_pending = 0;
volatile sig_atomic_t g_interrupt_seen = 0;

void OnInterrupt(int) {
  g_interrupt_pending = 1;
  g_interrupt_seen = 1;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

bool WriteAll(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno != EINTR) return false;
    if (n > 0) done += size_t(n);
  }
  return true;
}

std::string ReadFrom(int fd) {
  std::string s;
  char buf[65536];
  for (off_t off = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return s;
    s.append(buf, size_t(n));
    off += n;
  }
}

// In the child after fork(): only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(const std::vector<char*>& argv, const std::string& failed, int in, int out, int err) {
  ::dup2(in, STDIN_FILENO);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(err, STDERR_FILENO);
  ::execvp(argv[0], argv.data());
  (void)!::write(STDERR_FILENO, failed.data(), failed.size());
  _exit(127);
}

// "net.ipv4.ip_forward" -> "/proc/sys/net/ipv4/ip_forward".
std::string SysctlPath(const std::string& name) {
  std::string path = "/proc/sys/" + name;
  std::replace(path.begin(), path.end(), '.', '/');
  return path;
}

Status WriteSysctls(const Sysctls& values) {
  for (const auto& [name, value] : values) {
    const std::string path = SysctlPath(name);
    const Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (fd.get() < 0 || !WriteAll(fd.get(), value + "\n")) return Internal(Errno(path));
  }
  return Status::Ok();
}

}  // namespace

void Log(const std::string& message) { std::fprintf(stderr, "netlab: %s\n", message.c_str()); }

void CatchInterrupts() {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
}

bool InterruptSeen() { return g_interrupt_seen != 0; }

namespace {

// A command started by Start, its stdout and stderr going to memory files.
struct Started {
  pid_t pid;
  Fd out, err;
};

Result<Started> Start(const std::vector<std::string>& argv, const std::string& input) {
  // stdin, stdout and stderr are memory files: no pipe can fill up or break.
  const Fd in(::memfd_create("netlab-stdin", MFD_CLOEXEC));
  Fd out(::memfd_create("netlab-stdout", MFD_CLOEXEC));
  Fd err(::memfd_create("netlab-stderr", MFD_CLOEXEC));
  if (in.get() < 0 || out.get() < 0 || err.get() < 0) return Internal(Errno("memfd_create"));
  if (!WriteAll(in.get(), input) || ::lseek(in.get(), 0, SEEK_SET) != 0) return Internal(Errno("write stdin"));
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const std::string failed = "netlab: cannot run " + argv[0] + "\n";
  const pid_t pid = ::fork();
  if (pid < 0) return Internal(Errno("fork"));
  if (pid == 0) ExecChild(cargv, failed, in.get(), out.get(), err.get());
  return Started{pid, std::move(out), std::move(err)};
}

// Waits for a started command; an error only if it could not be waited for
// or Ctrl-C came meanwhile.
Result<RunResult> Finish(const Started& s) {
  int status = 0;
  while (::waitpid(s.pid, &status, 0) < 0) {
    if (errno != EINTR) return Internal(Errno("waitpid"));
  }
  if (g_interrupt_pending) {
    g_interrupt_pending = 0;
    return Internal("interrupted");
  }
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return RunResult{rc, ReadFrom(s.out.get()), ReadFrom(s.err.get())};
}

std::vector<std::string> IpArgv(const std::string& ns) {
  std::vector<std::string> argv = {"ip"};
  if (!ns.empty()) argv.insert(argv.end(), {"-n", ns});
  argv.insert(argv.end(), {"-force", "-batch", "-"});
  return argv;
}

// A finished `ip -batch`: its error lines; with check, a failed batch is an error.
Result<std::vector<std::string>> BatchErrors(const std::string& ns, const RunResult& r, bool check) {
  std::vector<std::string> errors;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) {
    if (!Strip(line).empty()) errors.push_back(line);
  }
  if (r.rc != 0 && check) {
    const std::vector<std::string> first(errors.begin(), errors.begin() + long(std::min<size_t>(errors.size(), 12)));
    return Internal("ip batch in " + (ns.empty() ? "root" : ns) + " failed:\n  " + Join(first, "\n  "));
  }
  return errors;
}

}  // namespace

Result<RunResult> Run(const std::vector<std::string>& argv, const std::string& input) {
  const auto started = Start(argv, input);
  if (!started.ok()) return started.error();
  return Finish(*started);
}

Result<std::string> RunChecked(const std::vector<std::string>& argv) {
  auto r = Run(argv);
  if (!r.ok()) return r.error();
  if (r->rc != 0) {
    const std::string why = Strip(r->err).empty() ? Strip(r->out) : Strip(r->err);
    return Internal(Join(argv, " ") + " failed: " + why);
  }
  return std::move(r->out);
}

Result<std::vector<std::string>> IpBatch(const std::string& ns, const std::vector<std::string>& lines, bool check) {
  if (lines.empty()) return std::vector<std::string>{};
  const auto r = Run(IpArgv(ns), Join(lines, "\n") + "\n");
  if (!r.ok()) return r.error();
  return BatchErrors(ns, *r, check);
}

Result<std::vector<std::vector<std::string>>> IpBatches(const std::vector<NsBatch>& batches, bool check) {
  constexpr size_t kAtOnce = 16;  // `ip` processes running together
  std::vector<std::vector<std::string>> out(batches.size());
  for (size_t from = 0; from < batches.size(); from += kAtOnce) {
    const size_t to = std::min(batches.size(), from + kAtOnce);
    std::vector<std::pair<size_t, Started>> running;
    Status failed = Status::Ok();
    for (size_t i = from; i < to && failed.ok(); ++i) {
      if (batches[i].lines.empty()) continue;
      auto s = Start(IpArgv(batches[i].ns), Join(batches[i].lines, "\n") + "\n");
      if (s.ok()) {
        running.emplace_back(i, std::move(*s));
      } else {
        failed = s.error();
      }
    }
    for (const auto& [i, s] : running) {  // every started one is waited for, even after a failure
      const auto r = Finish(s);
      if (!r.ok()) {
        if (failed.ok()) failed = r.error();
        continue;
      }
      auto errors = BatchErrors(batches[i].ns, *r, check);
      if (!errors.ok()) {
        if (failed.ok()) failed = errors.error();
        continue;
      }
      out[i] = std::move(*errors);
    }
    if (!failed.ok()) return failed.error();
  }
  return out;
}

Status SetSysctls(const std::string& ns, const Sysctls& values) {
  const Fd home(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  const Fd target(::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC));
  if (home.get() < 0) return Internal(Errno("open /proc/self/ns/net"));
  if (target.get() < 0) return Internal(Errno("open /run/netns/" + ns));
  if (::setns(target.get(), CLONE_NEWNET) != 0) return Internal(Errno("setns " + ns));
  Status st = WriteSysctls(values);
  if (::setns(home.get(), CLONE_NEWNET) != 0) {
    // Every later command would run in the lab's namespace: stop here.
    std::perror("netlab: setns back to the root namespace");
    std::abort();
  }
  if (!st.ok()) return Internal("sysctl in " + ns + ": " + st.error().message);
  return st;
}

bool KernelHasSysctl(const std::string& name) {
  struct stat st {};
  return ::stat(SysctlPath(name).c_str(), &st) == 0;
}

std::vector<std::string> ListNetns() {
  std::vector<std::string> out;
  const auto r = Run({"ip", "netns", "list"});
  if (!r.ok()) return out;
  std::istringstream lines(r->out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name;
    if (words >> name) out.push_back(name);
  }
  return out;
}

std::vector<int> NetnsPids(const std::string& ns) {
  std::vector<int> pids;
  const auto r = Run({"ip", "netns", "pids", ns});
  if (!r.ok()) return pids;
  std::istringstream words(r->out);
  for (std::string w; words >> w;) {
    if (w.find_first_not_of("0123456789") == std::string::npos) pids.push_back(std::stoi(w));
  }
  return pids;
}

std::map<std::string, bool> Carriers(const std::string& ns) {
  std::map<std::string, bool> out;
  const auto r = Run({"ip", "-n", ns, "-j", "link", "show"});
  if (!r.ok() || r->rc != 0) return out;
  const auto links = nlohmann::json::parse(r->out, nullptr, /*allow_exceptions=*/false);
  if (!links.is_array()) return out;
  for (const auto& l : links) {
    const auto flags = l.value("flags", nlohmann::json::array());
    out[l.value("ifname", "")] = std::find(flags.begin(), flags.end(), "LOWER_UP") != flags.end();
  }
  return out;
}

void SleepSeconds(double seconds) {
  if (seconds <= 0) return;
  timespec ts{};
  ts.tv_sec = time_t(seconds);
  ts.tv_nsec = long((seconds - std::floor(seconds)) * 1e9);
  ::nanosleep(&ts, nullptr);
}

bool KernelHasLinkKind(const std::string& ns, const std::string& kind) {
  const auto added = Run({"ip", "-n", ns, "link", "add", "nlprobe0", "type", kind});
  if (!added.ok() || added->rc != 0) return false;
  (void)Run({"ip", "-n", ns, "link", "del", "nlprobe0"});
  return true;
}

NetnsRtnl::~NetnsRtnl() {
  for (const auto& [ns, fd] : fds_) ::close(fd);
}

Status NetnsRtnl::Open(const std::string& ns) {
  if (fds_.contains(ns)) return Status::Ok();
  const Fd home(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  const Fd target(::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC));
  if (home.get() < 0) return Internal(Errno("open /proc/self/ns/net"));
  if (target.get() < 0) return Internal(Errno("open /run/netns/" + ns));
  if (::setns(target.get(), CLONE_NEWNET) != 0) return Internal(Errno("setns " + ns));
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  const int socket_errno = errno;
  if (::setns(home.get(), CLONE_NEWNET) != 0) {
    std::perror("netlab: setns back to the root namespace");
    std::abort();
  }
  if (fd < 0) return Internal("netlink socket in " + ns + ": " + std::strerror(socket_errno));
  fds_[ns] = fd;
  return Status::Ok();
}

Status NetnsRtnl::SetAdmin(const std::string& ns, const std::string& ifname, bool up) {
  if (Status s = Open(ns); !s.ok()) return s;
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return InvalidArgument("bad interface name " + Quoted(ifname));
  const int fd = fds_.at(ns);
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
    char attrs[RTA_SPACE(IFNAMSIZ)];
  } req{};
  const uint32_t seq = ++seq_;
  rtattr* name = reinterpret_cast<rtattr*>(req.attrs);
  name->rta_type = IFLA_IFNAME;
  name->rta_len = static_cast<unsigned short>(RTA_LENGTH(ifname.size() + 1));
  std::memcpy(RTA_DATA(name), ifname.c_str(), ifname.size() + 1);
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(ifinfomsg)) + RTA_ALIGN(name->rta_len);
  req.nh.nlmsg_type = RTM_SETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  req.nh.nlmsg_seq = seq;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_flags = up ? IFF_UP : 0;
  req.ifi.ifi_change = IFF_UP;
  const std::string what = "link " + ifname + (up ? " up" : " down") + " in " + ns;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  while (::sendto(fd, &req, req.nh.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    if (errno != EINTR) return Internal(Errno(what + ": netlink send"));
  }
  alignas(nlmsghdr) char buf[8192];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal(Errno(what + ": netlink receive"));
    int len = int(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_seq != seq || h->nlmsg_type != NLMSG_ERROR) continue;  // a late answer to an earlier request
      const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      if (err->error == 0) return Status::Ok();
      return Internal(what + ": " + std::strerror(-err->error));
    }
  }
}

}  // namespace lockstep::netlab
