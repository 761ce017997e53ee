// Local adapters of the coordinator's ports (ports.h):
//   LocalSignalFencer  SIGKILL to a member's pid on this host
//   NoFencer           fencing only marks the member dead
//   ShellSpareLauncher runs --spare-command through /bin/sh -c, with
//                      LOCKSTEP_COORDINATOR in its environment; reaps it
//   ProcProcessProbe   /proc/<pid>/stat: gone or state Z = dead
//   FileStateStore     a JSON file, written to a temporary file and renamed
// Thread-compatible: the coordinator calls them under its lock.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lockstep/coordinator/ports.h"

namespace lockstep::coordinator {

// True for hosts that name this machine: loopback addresses, "localhost",
// this host's name, the addresses of its interfaces (this network namespace's),
// and `extra` (--local-host: e.g. addresses inside test network namespaces).
class LocalHosts {
 public:
  explicit LocalHosts(std::vector<std::string> extra = {});
  bool Contains(const std::string& host) const { return hosts_.count(host) > 0; }

 private:
  std::set<std::string> hosts_;
};

class LocalSignalFencer final : public Fencer {
 public:
  explicit LocalSignalFencer(const LocalHosts& local) : local_(local) {}
  Status Fence(const MemberRef& m) override;

 private:
  const LocalHosts& local_;
};

class NoFencer final : public Fencer {
 public:
  Status Fence(const MemberRef&) override { return Status::Ok(); }
};

class ShellSpareLauncher final : public SpareLauncher {
 public:
  // `coordinator_url`: http://host:port, set as LOCKSTEP_COORDINATOR.
  ShellSpareLauncher(std::string command, std::string coordinator_url);
  ~ShellSpareLauncher() override;  // does not kill what it started
  // REQUIRES: before the first Launch() (the URL is known once the API listens).
  void SetCoordinatorUrl(std::string url) { url_ = std::move(url); }
  Result<SpareHandle> Launch() override;
  std::vector<Exited> Reap() override;

 private:
  std::string command_, url_;
  std::set<int> children_;
};

// Watches local processes through pidfds (Linux >= 5.3): one poll() per check, no
// /proc parsing, and immune to pid reuse once the pidfd is open. Falls back to
// reading /proc/<pid>/stat where pidfd_open is not available. Not thread-safe: the
// coordinator calls it from its tick thread only.
class ProcProcessProbe final : public ProcessProbe {
 public:
  ProcProcessProbe() = default;
  ProcProcessProbe(const ProcProcessProbe&) = delete;
  ProcProcessProbe& operator=(const ProcProcessProbe&) = delete;
  ~ProcProcessProbe() override;
  std::optional<std::string> Gone(const MemberRef& m) override { return Gone(m.pid); }
  std::optional<std::string> Gone(int pid);
  // poll() on the pidfds asked about since the last Wait: a process exit wakes the
  // coordinator's tick loop at once, so the tick itself can be slow.
  void Wait(std::chrono::milliseconds timeout) override;

 private:
  struct Watched {
    int fd = -1;
    bool asked = false;         // Gone() was called since the last Wait()
  };
  std::map<int, Watched> pidfds_;  // pid -> pidfd, opened on the first check
  bool no_pidfd_ = false;          // pidfd_open is not supported here
};

class FileStateStore final : public StateStore {
 public:
  explicit FileStateStore(std::string path) : path_(std::move(path)) {}
  Status Save(const std::string& text) override;
  Result<std::optional<std::string>> Load() override;

 private:
  std::string path_;
};

}  // namespace lockstep::coordinator
