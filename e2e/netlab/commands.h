// netlab's subcommands. Each returns the process exit code, or an error that
// main prints as "netlab: MESSAGE" (exit 1).
#pragma once

#include <string>
#include <vector>

#include "lockstep/common/result.h"
#include "netlab/cli.h"
#include "netlab/state.h"
#include "netlab/topology.h"

namespace lockstep::netlab {

// Changing the fabric (commands.cc).
Result<int> CmdUp(const Args& a);
Result<int> CmdDown(const Args& a);
Result<int> CmdLink(const Args& a);
Result<int> CmdShape(const Args& a);

// `link ... flap` (flap_train.cc): the whole train in this process; `before`
// is the lab's state when it was asked.
Result<int> RunFlapTrain(const Args& a, const Topology& t, const LabState& before,
                         const std::vector<std::string>& names);

// Looking at it, and running things in it (queries.cc).
Result<int> CmdPath(const Args& a);
Result<int> CmdCounters(const Args& a);
Result<int> CmdShow(const Args& a);
Result<int> CmdList(const Args& a);
Result<int> CmdExec(const Args& a);
Result<int> CmdLoadgen(const Args& a);

}  // namespace lockstep::netlab
