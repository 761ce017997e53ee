#include "netlab/links.h"

#include <chrono>
#include <map>

#include "netlab/lab.h"
#include "netlab/napi.h"
#include "netlab/parse.h"
#include "netlab/routes.h"
#include "netlab/shell.h"

namespace lockstep::netlab {
namespace {

Status TakeLinkDown(const Link& lk, bool silent, const std::string& one_way, const SetAdmin& set_admin,
                    LabState& state) {
  if (silent) {
    for (const auto& [ns, line] : SilentCommands(lk, true, one_way)) {
      if (auto r = IpBatch(ns, {line}, true); !r.ok()) return r.error();
    }
    state.links[lk.name] = one_way.empty() ? "silent" : "silent-" + one_way;
    return Status::Ok();
  }
  // Admin-down the upper end: the host (or leaf) sees carrier loss, as when a
  // cable or a switch port dies.
  if (Status s = set_admin(lk.b, false); !s.ok()) return s;
  state.links[lk.name] = "down";
  return Status::Ok();
}

Status BringLinkUp(const Link& lk, bool clear_silent, const SetAdmin& set_admin, LabState& state) {
  if (clear_silent) {
    for (const auto& [ns, line] : SilentCommands(lk, false)) {
      if (auto r = IpBatch(ns, {line}, false); !r.ok()) return r.error();
    }
  }
  for (const Endpoint* e : {&lk.a, &lk.b}) {
    if (Status s = set_admin(*e, true); !s.ok()) return s;
  }
  state.links.erase(lk.name);
  return Status::Ok();
}

}  // namespace

Status SetAdminWithIp(const Endpoint& e, bool up) {
  auto r = IpBatch(e.ns, {"link set " + e.ifname + (up ? " up" : " down")}, true);
  return r.ok() ? Status::Ok() : Status(r.error());
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Result<std::vector<std::string>> ChangeLinks(const std::string& name, const std::vector<std::string>& names,
                                             const LinkChange& c, const SetAdmin& set_admin, ChangeTimes& times) {
  auto lock = FileLock::Acquire(JoinPath(LabDir(name), ".lock"));
  if (!lock.ok()) return lock.error();
  auto lab = LoadLab(name);
  if (!lab.ok()) return lab.error();
  const Topology& t = lab->topo;
  LabState& state = lab->state;
  // A veth that was admin-down comes back with a new napi thread at
  // SCHED_OTHER: note the threads before, raise the new ones after.
  const bool renapi = !c.down && state.napi_threads;
  const auto napi_before = renapi ? NapiThreads() : std::map<int, std::string>{};
  bool was_down = false;
  std::vector<std::string> ifnames;
  times.asked = WallSeconds();
  for (const auto& n : names) {
    const Link* lk = FindLink(t, n);
    if (lk == nullptr) return NotFound("no link " + Quoted(n) + " in the lab any more");
    was_down = was_down || !LinkUp(state, n);
    ifnames.insert(ifnames.end(), {lk->a.ifname, lk->b.ifname});
    Status s = c.down ? TakeLinkDown(*lk, c.silent, c.one_way, set_admin, state) : BringLinkUp(*lk, c.clear_silent, set_admin, state);
    if (!s.ok()) return s.error();
  }
  times.changed = times.converged = WallSeconds();
  if (renapi) {
    const auto moved = RaiseNewNapiThreads(napi_before, ifnames);
    if (!moved.ok()) return moved.error();
    if (*moved == 0 && was_down) Log("warning: no new napi thread for " + Join(names, ", ") + " after up");
  }
  if (c.down) {
    if (Status s = SaveState(name, state); !s.ok()) return s.error();
    if (c.silent) return std::vector<std::string>{};
    SleepSeconds(c.delay_s);
    auto warnings = Converge(t, state, false);
    times.converged = WallSeconds();
    return warnings;
  }
  if (Status s = WaitCarrier(t, names); !s.ok()) return s.error();
  SleepSeconds(c.delay_s);
  auto warnings = Converge(t, state, false);
  times.converged = WallSeconds();
  if (!warnings.ok()) return warnings.error();
  if (Status s = SaveState(name, state); !s.ok()) return s.error();
  return warnings;
}

}  // namespace lockstep::netlab
