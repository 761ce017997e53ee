// The back-end network checks over the real fabric (issue 26 §1.4, second
// half), from NodeFacts::network. Pure; RunChecks calls it.
//
//   backend.connectivity[rail<r>/<peer>]  abs: the fabric agent's path is up
//                                          (or suspect); down/recovering fail;
//                                          unknown is NotPresent
//   backend.latency_p50|p99[rail<r>/<peer>]  slow, column rail<r>: the path's
//                                          one-way delay (us) against every
//                                          pair of that rail in the pool
//   backend.route[rail<r>/<peer>@<target>] info: the hops per TTL over the
//                                          ECMP source ports ("a > {b,c} > d"),
//                                          number = distinct paths
//   backend.rail_leaf[rail<r>@<leaf>]      majority, column <leaf>: the rail
//                                          most of that leaf's ports serve
//   backend.spines[rail<r>]                majority: spines seen by the rail's
//                                          cross-leaf traces
//   backend.rail_leaves                    majority: whether the node's rails
//                                          sit on distinct leaves
// A path's failures towards a peer whose own link is at fault are attributed
// to that peer by JudgePools (pool.h).
#pragma once

#include <vector>

#include "lockstep/audit/check.h"
#include "lockstep/audit/node_facts.h"

namespace lockstep::audit {

void NetworkChecks(const NodeFacts& facts, std::vector<Check>& out);

}  // namespace lockstep::audit
