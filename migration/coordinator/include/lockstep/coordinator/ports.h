// Ports of the migration coordinator's runtime: how it fences a member, starts
// a spare, checks a member's process and keeps its state. Adapters: local ones
// in adapters.h (SIGKILL, /bin/sh spares, pidfds, a file), Kubernetes ones in
// kube_adapters.h (pod deletion, spare pods, pod status, a ConfigMap); fakes
// for tests in tests/support/. Implementations are called with the
// coordinator's lock held and must not block for long (a kill, a fork; network
// calls go to a worker thread), except the StateStore, which the coordinator's
// saver thread calls without it (and only under it before Start()).
// Thread-compatible unless an adapter says otherwise.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::coordinator {

// The member a fencer or probe acts on: its process (host, pid) and, in
// Kubernetes, its pod (name and uid as it registered them; empty elsewhere).
struct MemberRef {
  std::string member;
  std::string host;
  int pid = 0;
  std::string pod_name;
  std::string pod_uid;
};

// Kills a member so that its sockets close (its peers' collectives then fail
// at once) and it can never act again.
class Fencer {
 public:
  virtual ~Fencer() = default;
  virtual Status Fence(const MemberRef& m) = 0;
};

// What a launcher started: a local process (pid) or a pod (its name).
struct SpareHandle {
  int pid = 0;
  std::string pod;
  std::string ToString() const { return pod.empty() ? "pid " + std::to_string(pid) : "pod " + pod; }
};

// Starts spare training processes and reports the ones that ended.
class SpareLauncher {
 public:
  struct Exited {
    SpareHandle spare;
    std::string how;  // "exited with status 1", "killed by signal 9", "pod Failed"
  };
  virtual ~SpareLauncher() = default;
  // Starts one spare; returns its pid (local) or pod name (Kubernetes).
  virtual Result<SpareHandle> Launch() = 0;
  // Launched processes that ended since the last call (reaped).
  virtual std::vector<Exited> Reap() = 0;
};

// Liveness of a member's process: a pid on this host, or a pod.
class ProcessProbe {
 public:
  virtual ~ProcessProbe() = default;
  // nullopt while the process runs (or nothing is known yet); else how it is
  // gone ("gone", "zombie", "pod deleted").
  virtual std::optional<std::string> Gone(const MemberRef& m) = 0;
  // True: only members on this host (LocalHosts) are asked about (a pid check).
  // False: every alive member is (a pod check).
  virtual bool LocalOnly() const { return true; }
  // True when the last Gone() for `m` was about its container (terminated or
  // restarted in place) in a pod that stays: the process is gone, the pod will
  // run the next one (see CoordinatorOptions::keep_restarted_pods). Default: false.
  virtual bool PodStays(const MemberRef& m) {
    (void)m;
    return false;
  }
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
