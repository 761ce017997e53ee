// Changing a lab's links: down (loud or silent) and up, then its routes
// re-converge, as `netlab link` and flap trains do it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lockstep/common/result.h"
#include "netlab/topology.h"

namespace lockstep::netlab {

struct LinkChange {
  bool down = true;
  bool silent = false;       // down: blackhole, carrier and routes stay
  std::string one_way = {};  // silent: "up" or "down" drops only that direction; "" both
  double delay_s = 0;        // wait this long before rerouting (BFD/BGP reaction time)
  bool clear_silent = true;  // up: also forget the silent neighbour entries
};

// Sets an end's interface admin up or down: `ip link set` by default, or a
// netlink socket kept open (flap trains).
using SetAdmin = std::function<Status(const Endpoint& e, bool up)>;
Status SetAdminWithIp(const Endpoint& e, bool up);

// When a change happened, in wall-clock seconds: the links changed between
// asked (just before the first change) and changed (just after the last);
// converged is when the routes were recomputed.
struct ChangeTimes {
  double asked = 0, changed = 0, converged = 0;
};

// Under the lab lock: changes the named links, waits for carrier (up), waits
// delay_s, re-converges the routes and saves state.json; after an up in a
// lab made with --napi-threads, the links' new napi threads get SCHED_FIFO 1
// again. Returns the routing warnings.
Result<std::vector<std::string>> ChangeLinks(const std::string& lab, const std::vector<std::string>& names,
                                             const LinkChange& c, const SetAdmin& set_admin, ChangeTimes& times);

// Wall-clock seconds (what benchmarks timestamp their logs with).
double WallSeconds();

}  // namespace lockstep::netlab
