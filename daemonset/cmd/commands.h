// The lockstep-agent subcommands. Each returns the process exit code:
// 0 ok, 1 runtime failure, 2 usage or configuration error.
#pragma once

#include "lockstep/agent/app/command_line.h"

namespace lockstep::agent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr const char* kAgentVersion = "0.1.0";

int RunAgent(const CommandLine& cl);
int ClockStatusCommand(const CommandLine& cl);
int FabricStatusCommand(const CommandLine& cl);

}  // namespace lockstep::agent
