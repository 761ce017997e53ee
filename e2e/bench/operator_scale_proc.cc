#include "operator_scale_proc.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace lockstep::bench {
namespace {

std::string Join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// The environment for a child: this process's, with `env` overriding. Built
// before fork() so the child only calls async-signal-safe functions.
std::vector<std::string> ChildEnv(const EnvVars& env) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (!env.count(kv.substr(0, kv.find('=')))) out.push_back(std::move(kv));
  }
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> v;
  for (const auto& a : strings) v.push_back(const_cast<char*>(a.c_str()));
  v.push_back(nullptr);
  return v;
}

// In the child after fork(): only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(const std::vector<char*>& argv, const std::vector<char*>& envp, int out_fd,
                            int err_fd, bool new_session) {
  if (new_session) ::setsid();
  int in = ::open("/dev/null", O_RDONLY);
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  if (out_fd >= 0) ::dup2(out_fd, STDOUT_FILENO);
  if (err_fd >= 0) ::dup2(err_fd, STDERR_FILENO);
  ::execvpe(argv[0], argv.data(), envp.data());
  _exit(127);
}

}  // namespace

Result<std::string> RunCommand(const std::vector<std::string>& argv, const EnvVars& env,
                               const std::string& stderr_log) {
  if (argv.empty()) return InvalidArgument("RunCommand: empty argv");
  int err_fd = ::open(stderr_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err_fd < 0) return Internal("open " + stderr_log + ": " + std::strerror(errno));
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(err_fd);
    return Internal(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> env_strings = ChildEnv(env);
  std::vector<char*> cargv = CStrings(argv), cenv = CStrings(env_strings);
  pid_t pid = ::fork();
  if (pid == 0) ExecChild(cargv, cenv, pipe_fds[1], err_fd, /*new_session=*/false);
  ::close(pipe_fds[1]);
  ::close(err_fd);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) { out.append(buf, static_cast<size_t>(n)); continue; }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return Unavailable("`" + Join(argv) + "` exited with " + std::to_string(code) + "; see " + stderr_log);
  }
  return out;
}

Result<pid_t> SpawnProcess(const std::vector<std::string>& argv, const std::string& log) {
  if (argv.empty()) return InvalidArgument("SpawnProcess: empty argv");
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("open " + log + ": " + std::strerror(errno));
  std::vector<std::string> env_strings = ChildEnv({});
  std::vector<char*> cargv = CStrings(argv), cenv = CStrings(env_strings);
  pid_t pid = ::fork();
  if (pid == 0) ExecChild(cargv, cenv, fd, fd, /*new_session=*/true);
  ::close(fd);
  if (pid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  return pid;
}

bool ChildRunning(pid_t pid) {
  int status = 0;
  pid_t r = ::waitpid(pid, &status, WNOHANG);
  return r == 0;
}

void StopProcess(pid_t pid, std::chrono::seconds grace) {
  if (pid <= 0 || !ChildRunning(pid)) return;
  ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!ChildRunning(pid)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

Result<ProcSample> SampleProcess(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::ifstream stat_file(dir + "/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return NotFound("process " + std::to_string(pid) + " is gone");
  // Fields after "comm)": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15).
  std::istringstream fields(stat.substr(paren + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::strtoull(f.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(f.c_str(), nullptr, 10);
  }
  ProcSample s;
  s.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::ifstream status_file(dir + "/status");
  std::string line;
  while (std::getline(status_file, line)) {
    auto kb = [&](const char* key) { return std::strtod(line.c_str() + std::strlen(key), nullptr) / 1024.0; };
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mb = kb("VmRSS:");
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_mb = kb("VmHWM:");
  }
  return s;
}

}  // namespace lockstep::bench
