// `lockstep-agent install-nccl-plugin`: copies the NCCL network plugin
// (libnccl-net-lockstep.so) from the agent image into a host directory that
// training pods mount. The agent DaemonSet runs it as an init container (the
// image is FROM scratch: no shell, no cp).
//
// The copy is atomic: the bytes go to a temporary file in the target
// directory, which is synced and renamed over the plugin, so a training
// process that has the old file mapped keeps it and a new one never loads a
// half-written file. A plugin already there with the same bytes is left alone.
#pragma once

#include <string>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::agent {

// Where images/build and images/Containerfile put the plugin in the agent image.
inline constexpr char kNcclPluginImagePath[] = "/usr/local/lib/lockstep/libnccl-net-lockstep.so";
inline constexpr char kNcclPluginFileName[] = "libnccl-net-lockstep.so";

struct NcclInstallOutcome {
  std::string destination;  // DIR/libnccl-net-lockstep.so
  size_t bytes = 0;
  bool unchanged = false;  // the same bytes were already there
};

// Copies `source` to `dir`/libnccl-net-lockstep.so (mode 0644). Errors name
// the file and the system error; nothing is left behind on failure.
Result<NcclInstallOutcome> InstallNcclPlugin(const std::string& source, const std::string& dir);

// The subcommand: install-nccl-plugin [--from FILE] --to DIR. Prints one line
// on success; returns 0 ok, 1 failure, 2 usage.
int InstallNcclPluginMain(const std::vector<std::string>& args);

}  // namespace lockstep::agent
