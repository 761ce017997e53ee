// netlab's subcommands. Each returns the process exit code, or an error that
// main prints as "netlab: MESSAGE" (exit 1).
#pragma once

#include "lockstep/common/result.h"
#include "netlab/cli.h"

namespace lockstep::netlab {

// Changing the fabric (commands.cc).
Result<int> CmdUp(const Args& a);
Result<int> CmdDown(const Args& a);
Result<int> CmdLink(const Args& a);
Result<int> CmdShape(const Args& a);

// Looking at it, and running things in it (queries.cc).
Result<int> CmdPath(const Args& a);
Result<int> CmdCounters(const Args& a);
Result<int> CmdShow(const Args& a);
Result<int> CmdList(const Args& a);
Result<int> CmdExec(const Args& a);
Result<int> CmdLoadgen(const Args& a);

}  // namespace lockstep::netlab
