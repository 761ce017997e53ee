// netlab: an emulated leaf-spine fabric made of Linux network namespaces.
// `netlab --help` and README.md beside this file describe it.

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "netlab/cli.h"
#include "netlab/commands.h"
#include "netlab/shell.h"

namespace {

using lockstep::netlab::Args;
using lockstep::Result;

Result<int> Dispatch(const Args& a) {
  using Command = Result<int> (*)(const Args&);
  static const std::map<std::string, Command> commands = {
      {"up", lockstep::netlab::CmdUp},           {"down", lockstep::netlab::CmdDown},
      {"link", lockstep::netlab::CmdLink},       {"shape", lockstep::netlab::CmdShape},
      {"path", lockstep::netlab::CmdPath},       {"counters", lockstep::netlab::CmdCounters},
      {"show", lockstep::netlab::CmdShow},       {"list", lockstep::netlab::CmdList},
      {"exec", lockstep::netlab::CmdExec},       {"loadgen", lockstep::netlab::CmdLoadgen},
  };
  return commands.at(a.command)(a);
}

}  // namespace

int main(int argc, char** argv) {
  using lockstep::netlab::ParseOutcome;
  const ParseOutcome parsed = lockstep::netlab::ParseCommandLine({argv + 1, argv + argc});
  if (parsed.kind == ParseOutcome::kHelp) {
    std::fputs(parsed.text.c_str(), stdout);
    return 0;
  }
  if (parsed.kind == ParseOutcome::kUsageError) {
    std::fputs(parsed.text.c_str(), stderr);
    return 2;
  }
  if (::geteuid() != 0) {
    lockstep::netlab::Log("needs root (network namespaces)");
    return 2;
  }
  lockstep::netlab::CatchInterrupts();
  const Result<int> rc = Dispatch(parsed.args);
  if (!rc.ok()) lockstep::netlab::Log(rc.error().message);
  if (lockstep::netlab::InterruptSeen()) {  // die of SIGINT, as the shell expects
    std::fflush(stdout);
    ::signal(SIGINT, SIG_DFL);
    ::raise(SIGINT);
  }
  return rc.ok() ? *rc : 1;
}
