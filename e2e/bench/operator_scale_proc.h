// Processes for the operator-scale benchmark: running a command to completion
// (e2e/cluster/up, helm, kubectl), starting a long-lived child in its own
// session (the operator), stopping it by pid, and sampling its CPU time and
// memory from /proc. Linux only. Functions are thread-compatible: call them
// from the benchmark's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::bench {

using EnvVars = std::map<std::string, std::string>;

// Runs argv[0] (looked up in PATH) with `env` added to this process's
// environment, waits for it, and returns its stdout. stderr is appended to
// `stderr_log`. A non-zero exit is an Error naming the command and the log.
Result<std::string> RunCommand(const std::vector<std::string>& argv, const EnvVars& env,
                               const std::string& stderr_log);

// Starts argv in a new session (so it has its own process group) with stdin
// from /dev/null and stdout+stderr appended to `log`. Returns its pid; the
// caller reaps it with StopProcess.
Result<pid_t> SpawnProcess(const std::vector<std::string>& argv, const std::string& log);

// True while `pid` (a child of this process) has not exited; reaps it if it has.
bool ChildRunning(pid_t pid);

// TERM to `pid`, then KILL after `grace`; waits until it has been reaped.
void StopProcess(pid_t pid, std::chrono::seconds grace);

// One sample of a process's resource use.
struct ProcSample {
  double cpu_seconds = 0;  // utime + stime
  double rss_mb = 0;       // VmRSS
  double hwm_mb = 0;       // VmHWM (peak RSS)
};
Result<ProcSample> SampleProcess(pid_t pid);

}  // namespace lockstep::bench
