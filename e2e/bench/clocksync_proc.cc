#include "clocksync_proc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

namespace lockstep::bench {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void OnSignal(int) { g_interrupted = 1; }

void NanoSleep(double seconds) {
  if (seconds <= 0) return;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - static_cast<double>(ts.tv_sec)) * 1e9);
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR && !g_interrupted) {
  }
}

std::vector<char*> CArgs(const std::vector<std::string>& argv) {
  std::vector<char*> v;
  for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
  v.push_back(nullptr);
  return v;
}

// In the child after fork(): only async-signal-safe calls until exec.
[[noreturn]] void Exec(const std::vector<char*>& argv, int out_fd, int err_fd) {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGPIPE, SIG_DFL);
  int in = ::open("/dev/null", O_RDONLY);
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  ::execvp(argv[0], argv.data());
  _exit(127);
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Reads both pipes until both are closed.
void Drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* dst[2] = {&out, &err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      } else {
        dst[k]->append(buf, static_cast<size_t>(n));
      }
    }
  }
}

}  // namespace

namespace {
const char* g_log_tag = "clocksync";
}  // namespace

void SetLogTag(const char* tag) { g_log_tag = tag; }

void Log(const std::string& msg) {
  std::time_t t = std::time(nullptr);
  char ts[16];
  std::strftime(ts, sizeof ts, "%H:%M:%S", std::localtime(&t));
  std::cerr << "[" << g_log_tag << " " << ts << "] " << msg << std::endl;
}

void Die(const std::string& msg) { throw Fatal(msg); }

void InstallSignalHandlers() {
  struct sigaction sa{};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

void CheckInterrupted() {
  if (g_interrupted) throw Interrupted();
}

void Sleep(double seconds) {
  double end = Now() + seconds;
  for (;;) {
    CheckInterrupted();
    double left = end - Now();
    if (left <= 0) return;
    NanoSleep(left < 0.1 ? left : 0.1);
  }
}

double Now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

RunResult RunCapture(const std::vector<std::string>& argv) {
  RunResult r;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return r;
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return r;
  }
  std::vector<char*> args = CArgs(argv);
  pid_t pid = ::fork();
  if (pid == 0) Exec(args, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    r.err = std::string("fork: ") + std::strerror(errno);
    return r;
  }
  Drain(out[0], err[0], r.out, r.err);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.rc = DecodeStatus(status);
  if (r.rc == 127 && r.err.empty()) r.err = "cannot run " + argv[0];
  return r;
}

Child Child::Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) Die(log_path + ": " + std::strerror(errno));
  std::vector<char*> args = CArgs(argv);
  pid_t pid = ::fork();
  if (pid == 0) Exec(args, log, log);
  ::close(log);
  if (pid < 0) Die(std::string("fork: ") + std::strerror(errno));
  Child c;
  c.pid_ = pid;
  return c;
}

bool Child::Alive() {
  if (pid_ < 0 || exited_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    rc_ = DecodeStatus(status);
  }
  return !exited_;
}

void Child::Signal(int sig) {
  if (Alive()) ::kill(pid_, sig);
}

bool Child::WaitFor(double seconds) {
  double end = Now() + seconds;
  while (Alive()) {
    if (Now() >= end) return false;
    NanoSleep(0.02);
  }
  return true;
}

void Child::Stop(double grace_s) {
  Signal(SIGTERM);
  if (!WaitFor(grace_s)) {
    Signal(SIGKILL);
    WaitFor(5);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
  if (!f.good()) Die("cannot write " + path);
}

}  // namespace lockstep::bench
