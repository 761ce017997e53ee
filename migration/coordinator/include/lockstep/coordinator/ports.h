// Ports of the migration coordinator's runtime: how it fences a member, starts
// a spare, checks a local pid and keeps its state. Adapters: fencers.h,
// shell_spare_launcher.h, proc_process_probe.h, file_state_store.h; fakes for
// tests in tests/support/. Implementations are called with the coordinator's
// lock held and must not block for long (a kill, a fork, a file write).
// Thread-compatible unless an adapter says otherwise.
#pragma once

#include <chrono>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::coordinator {

// Kills a member so that its sockets close (its peers' collectives then fail
// at once) and it can never act again.
class Fencer {
 public:
  virtual ~Fencer() = default;
  virtual Status Fence(const std::string& member, const std::string& host, int pid) = 0;
};

// Starts spare training processes and reports the ones that ended.
class SpareLauncher {
 public:
  struct Exited {
    int pid = 0;
    std::string how;  // "exited with status 1", "killed by signal 9"
  };
  virtual ~SpareLauncher() = default;
  // Starts one spare; returns its pid.
  virtual Result<int> Launch() = 0;
  // Launched processes that ended since the last call (reaped).
  virtual std::vector<Exited> Reap() = 0;
};

// Liveness of a process on this host.
class ProcessProbe {
 public:
  virtual ~ProcessProbe() = default;
  // nullopt while the process runs; else how it is gone ("gone", "zombie").
  virtual std::optional<std::string> Gone(int pid) = 0;
  // Blocks up to `timeout`, returning early when a process asked about by Gone()
  // since the previous Wait() may have exited (the tick loop then checks at once).
  // Processes not asked about since then are forgotten. Default: a plain sleep.
  virtual void Wait(std::chrono::milliseconds timeout) { std::this_thread::sleep_for(timeout); }
};

// Where the job state lives between coordinator restarts.
class StateStore {
 public:
  virtual ~StateStore() = default;
  virtual Status Save(const std::string& text) = 0;
  // nullopt: nothing saved yet.
  virtual Result<std::optional<std::string>> Load() = 0;
};

}  // namespace lockstep::coordinator
