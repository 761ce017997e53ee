// A lab on this machine: its directory under $NETLAB_ROOT, locks, the JSON
// files, and building, converging and deleting its namespaces.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"
#include "netlab/state.h"
#include "netlab/topology.h"

namespace lockstep::netlab {

// $NETLAB_ROOT, default /run/netlab.
std::string NetlabRoot();
std::string LabDir(const std::string& name);
std::string JoinPath(const std::string& dir, const std::string& file);

// An exclusive flock on a file (created, with its directory), held until destroyed.
class FileLock {
 public:
  static Result<FileLock> Acquire(const std::string& path);
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

struct Lab {
  Topology topo;
  LabState state;
};

// topology.json and state.json (a missing state.json means all links up).
Result<Lab> LoadLab(const std::string& name);

// Writes JSON (indent 2, trailing newline) through a temporary file.
Status SaveJson(const std::string& path, const nlohmann::ordered_json& j);
Status SaveState(const std::string& name, const LabState& s);

// index -> lab name, for every lab directory with a readable topology.json.
std::map<int, std::string> UsedIndexes();

// Creates the namespaces, sysctls, veths, addresses and routes.
Status BuildLab(const Topology& t);

// Waits (up to 3 s) until both ends of every named link have carrier.
Status WaitCarrier(const Topology& t, const std::vector<std::string>& links);

// Brings every namespace's routes to the desired state. Returns warnings;
// with strict, a failed route is an error instead.
Result<std::vector<std::string>> Converge(const Topology& t, const LabState& s, bool strict);

// Kills processes left in the lab's namespaces, deletes the namespaces (and
// so their veths) and the lab directory. Works on a half-built lab and on one
// that is already gone. Returns the namespaces deleted.
Result<std::vector<std::string>> Teardown(const std::string& name);

}  // namespace lockstep::netlab
