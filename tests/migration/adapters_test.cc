// The coordinator's process adapters against real processes: the pidfd probe
// (alive, exited but not reaped, reaped, never existed) and the spare launcher's
// clean signal state (the coordinator blocks SIGTERM to sigwait it; a spare
// must not inherit that).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "lockstep/coordinator/adapters.h"

namespace {

using namespace std::chrono_literals;
using lockstep::coordinator::ProcProcessProbe;
using lockstep::coordinator::ShellSpareLauncher;

pid_t Sleeper() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}

}  // namespace

TEST_CASE("the process probe tells live, exited (zombie), reaped and unknown pids apart") {
  ProcProcessProbe probe;
  pid_t a = Sleeper();
  REQUIRE(a > 0);
  CHECK_FALSE(probe.Gone(a).has_value());
  CHECK_FALSE(probe.Gone(a).has_value());  // the second check polls the same pidfd
  ::kill(a, SIGKILL);
  // Not reaped: a zombie, which still answers kill(pid, 0), counts as gone.
  // waitid(WNOWAIT) returns once the child has exited and leaves it unreaped.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(a), &info, WEXITED | WNOWAIT) == 0);
  CHECK(probe.Gone(a).has_value());
  CHECK(::kill(a, 0) == 0);
  ::waitpid(a, nullptr, 0);
  CHECK(probe.Gone(a).has_value());          // reaped
  CHECK(probe.Gone(0) == "has no valid pid");
  pid_t b = Sleeper();                       // a fresh pid stays alive while checked
  for (int i = 0; i < 20; ++i) CHECK_FALSE(probe.Gone(b).has_value());
  ::kill(b, SIGKILL);
  ::waitpid(b, nullptr, 0);
}

TEST_CASE("a spare starts with an empty signal mask even when the coordinator blocks SIGTERM") {
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  REQUIRE(::pthread_sigmask(SIG_BLOCK, &term, &old) == 0);
  char path[] = "/tmp/lockstep-adapters-test-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  // SigBlk of the spare's shell, as /proc shows it.
  ShellSpareLauncher launcher(std::string("grep SigBlk /proc/self/status > ") + path, "http://127.0.0.1:1");
  auto pid = launcher.Launch();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  REQUIRE(pid.ok());
  int st = 0;
  REQUIRE(::waitpid(pid->pid, &st, 0) == pid->pid);
  char buf[128] = {};
  FILE* f = std::fopen(path, "r");
  REQUIRE(f != nullptr);
  REQUIRE(std::fgets(buf, sizeof buf, f) != nullptr);
  std::fclose(f);
  ::unlink(path);
  CHECK(std::string(buf) == "SigBlk:\t0000000000000000\n");
}

TEST_CASE("the probe's Wait returns when a watched process exits, not at its timeout") {
  ProcProcessProbe probe;
  pid_t a = Sleeper();
  REQUIRE(a > 0);
  REQUIRE_FALSE(probe.Gone(a).has_value());  // watched from now on
  // The kill should land while Wait() blocks (a real process, a real pidfd and
  // real time: no clock to fake here); an earlier kill still passes the checks.
  std::thread killer([a] {
    std::this_thread::sleep_for(50ms);
    ::kill(a, SIGKILL);
  });
  auto t0 = std::chrono::steady_clock::now();
  probe.Wait(std::chrono::milliseconds(60'000));
  auto waited = std::chrono::steady_clock::now() - t0;
  killer.join();
  CHECK(waited < 30s);  // woken by the exit (the timeout is 60 s)
  CHECK(probe.Gone(a).has_value());
  ::waitpid(a, nullptr, 0);
  // A pid not asked about between two waits is no longer watched: a later Wait with
  // nothing watched simply sleeps its (short) timeout.
  pid_t b = Sleeper();
  REQUIRE_FALSE(probe.Gone(b).has_value());
  probe.Wait(1ms);
  probe.Wait(1ms);  // b was not asked about: forgotten (its pidfd closed)
  ::kill(b, SIGKILL);
  ::waitpid(b, nullptr, 0);
  CHECK(probe.Gone(b).has_value());  // asking again: gone (reaped)
}
