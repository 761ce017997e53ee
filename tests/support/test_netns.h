// TestNetns: a network namespace a test creates (`ip netns add`, a unique
// name with the PID) and always deletes in its destructor, with helpers to
// run `ip` inside it and to run code inside it on a dedicated thread (setns
// changes only the calling thread's namespace; sockets opened there stay in
// it, so an adapter opened by Inside() can be used from the test's thread).
// Root only: IsRoot() lets a test skip with a clear message. Thread-compatible.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace lockstep::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

inline CommandResult RunCommand(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class TestNetns {
 public:
  static bool IsRoot() { return ::geteuid() == 0; }

  // REQUIRES: IsRoot(). Throws std::runtime_error when `ip netns add` fails.
  explicit TestNetns(const std::string& prefix) {
    static std::atomic<int> counter{0};
    name_ = prefix + std::to_string(::getpid()) + "x" + std::to_string(counter++);
    CommandResult r = RunCommand("ip netns add " + name_);
    if (r.exit_code != 0) throw std::runtime_error("ip netns add " + name_ + ": " + r.out);
    Ip("link set lo up");
  }
  ~TestNetns() { RunCommand("ip netns del " + name_); }
  TestNetns(const TestNetns&) = delete;
  TestNetns& operator=(const TestNetns&) = delete;

  const std::string& name() const { return name_; }

  // Runs `ip -n <name> <args>`.
  CommandResult Ip(const std::string& args) const { return RunCommand("ip -n " + name_ + " " + args); }

  // Runs f() on a new thread inside the namespace and returns its result.
  template <typename F>
  auto Inside(F f) const -> decltype(f()) {
    using R = decltype(f());
    std::optional<R> result;
    std::string error;
    std::thread t([&] {
      int fd = ::open(("/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
        error = "cannot enter network namespace " + name_;
        if (fd >= 0) ::close(fd);
        return;
      }
      ::close(fd);
      result.emplace(f());
    });
    t.join();
    if (!result) throw std::runtime_error(error);
    return std::move(*result);
  }

 private:
  std::string name_;
};

}  // namespace lockstep::testing
