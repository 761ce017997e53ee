// lockstep-agent: parse the command line and dispatch. See commands.h.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "lockstep/agent/app/nccl_install.h"
#include "lockstep/agent/audit/audit_command.h"
#include "lockstep/agent/gpu/gpu_status_command.h"

int main(int argc, char** argv) {
  using namespace lockstep::agent;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "gpu-status") return gpu::GpuStatusMain({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "audit") return audit::AuditMain({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "install-nccl-plugin") return InstallNcclPluginMain({args.begin() + 1, args.end()});
  auto cl = ParseCommandLine(args);
  if (!cl.ok()) {
    std::fprintf(stderr, "lockstep-agent: %s\n", cl.error().message.c_str());
    return kExitUsage;
  }
  switch (cl->command) {
    case CommandLine::Command::kHelp:
      std::fputs(Usage().c_str(), stdout);
      return kExitOk;
    case CommandLine::Command::kVersion:
      std::printf("lockstep-agent %s\n", kAgentVersion);
      return kExitOk;
    case CommandLine::Command::kClockStatus:
      return ClockStatusCommand(*cl);
    case CommandLine::Command::kFabricStatus:
      return FabricStatusCommand(*cl);
    case CommandLine::Command::kRun:
      return RunAgent(*cl);
  }
  return kExitUsage;
}
