#include "netlab/napi.h"

#include <sched.h>

#include <filesystem>
#include <fstream>

#include "netlab/shell.h"

namespace lockstep::netlab {
namespace {

Status SetFifo(int pid) {
  const sched_param param{.sched_priority = 1};
  if (::sched_setscheduler(pid, SCHED_FIFO, &param) != 0) {
    return Internal("SCHED_FIFO for napi thread " + std::to_string(pid));
  }
  return Status::Ok();
}

}  // namespace

std::map<int, std::string> NapiThreads() {
  std::map<int, std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm(e.path() / "comm");
    std::string name;
    if (std::getline(comm, name) && name.rfind("napi/", 0) == 0) out[std::stoi(pid)] = name;
  }
  return out;
}

Status ThreadNapi(const Topology& t) {
  const auto before = NapiThreads();
  for (const auto& lk : t.links) {
    for (const Endpoint* e : {&lk.a, &lk.b}) {
      if (auto r = RunChecked({"ip", "netns", "exec", e->ns, "ethtool", "-K", e->ifname, "tso", "off", "gro", "on"});
          !r.ok()) {
        return r.error();
      }
      auto r = Run({"ip", "netns", "exec", e->ns, "tee", "/sys/class/net/" + e->ifname + "/threaded"}, "1\n");
      if (!r.ok()) return r.error();
      if (r->rc != 0) return Internal("threaded NAPI on " + e->ns + "/" + e->ifname + ": " + r->err);
    }
  }
  int moved = 0;
  for (const auto& [pid, name] : NapiThreads()) {
    if (before.contains(pid)) continue;
    if (Status s = SetFifo(pid); !s.ok()) return s;
    ++moved;
  }
  if (moved == 0) return Internal("--napi-threads: no napi kernel thread appeared (kernel without threaded NAPI?)");
  Log("lab " + t.name + ": " + std::to_string(moved) + " napi threads at SCHED_FIFO 1");
  return Status::Ok();
}

Result<int> RaiseNewNapiThreads(const std::map<int, std::string>& before, const std::vector<std::string>& ifnames) {
  int moved = 0;
  for (const auto& [pid, name] : NapiThreads()) {
    if (before.contains(pid)) continue;
    bool ours = false;
    for (const auto& ifname : ifnames) ours = ours || name.rfind("napi/" + ifname + "-", 0) == 0;
    if (!ours) continue;
    if (Status s = SetFifo(pid); !s.ok()) return s.error();
    ++moved;
  }
  return moved;
}

}  // namespace lockstep::netlab
