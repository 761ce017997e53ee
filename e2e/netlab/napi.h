// Threaded NAPI for `up --napi-threads`: the lab's veths forward in kernel
// threads of their own ("napi/<dev>-<id>"), at SCHED_FIFO 1. A veth that goes
// admin-down loses its napi thread; on up the kernel starts a new one at
// SCHED_OTHER, so every `link ... up` of such a lab puts the new threads back
// at SCHED_FIFO 1 (else paths through a flapped link lose packets for tens of
// ms at a time while the machine is busy).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lockstep/common/result.h"
#include "netlab/topology.h"

namespace lockstep::netlab {

// pid -> name ("napi/h1r0-259") of every threaded-NAPI kernel thread.
std::map<int, std::string> NapiThreads();

// GRO and threaded NAPI on every veth of the lab, and SCHED_FIFO 1 for the
// napi threads that appeared. An error when none appeared.
Status ThreadNapi(const Topology& t);

// After interfaces came back up: SCHED_FIFO 1 for the napi threads that are
// not in `before` and belong to one of `ifnames` (a name is unique only in
// its namespace, so a thread must also be new). Returns how many it moved.
Result<int> RaiseNewNapiThreads(const std::map<int, std::string>& before, const std::vector<std::string>& ifnames);

}  // namespace lockstep::netlab
