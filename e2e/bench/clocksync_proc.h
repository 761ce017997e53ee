// Processes, logging and interruptible sleeps for the clock-sync testbed.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace lockstep::bench {

// A fatal error: main() tears down and exits 1.
struct Fatal : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// SIGINT / SIGTERM arrived: main() tears down and exits 130.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

void Log(const std::string& msg);  // "[clocksync HH:MM:SS] msg" on stderr
void SetLogTag(const char* tag);    // replaces "clocksync" in Log lines (a static string)
[[noreturn]] void Die(const std::string& msg);

// SIGINT / SIGTERM set a flag that Sleep() and CheckInterrupted() turn into Interrupted.
void InstallSignalHandlers();
void CheckInterrupted();
void Sleep(double seconds);  // throws Interrupted
double Now();                // CLOCK_MONOTONIC, seconds

struct RunResult {
  int rc = -1;  // exit code; 128+N for signal N; -1 if it could not start
  std::string out, err;
};
// Runs argv (PATH lookup) to completion, capturing stdout and stderr.
RunResult RunCapture(const std::vector<std::string>& argv);

// A child process started by Spawn; not copied, reaped on demand.
class Child {
 public:
  Child() = default;
  // Starts argv with stdout and stderr to `log_path` (truncated), stdin /dev/null.
  static Child Spawn(const std::vector<std::string>& argv, const std::string& log_path);

  pid_t pid() const { return pid_; }
  bool Alive();                // false once it exited (reaps it)
  int ExitCode() const { return rc_; }
  void Signal(int sig);        // no-op once exited
  bool WaitFor(double seconds);  // true if it exited within the time (not interruptible)
  void Stop(double grace_s);   // SIGTERM, then SIGKILL after grace_s

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int rc_ = -1;
};

std::string ReadFile(const std::string& path);  // "" if unreadable
void WriteFile(const std::string& path, const std::string& data);  // Die on error

}  // namespace lockstep::bench
