#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

std::string ToString(const PathKey& key) {
  return key.peer + "/rail" + std::to_string(key.rail) + "/path" + std::to_string(key.index);
}

const char* ToString(PathState state) {
  switch (state) {
    case PathState::kUnknown: return "unknown";
    case PathState::kUp: return "up";
    case PathState::kSuspect: return "suspect";
    case PathState::kDown: return "down";
    case PathState::kRecovering: return "recovering";
  }
  return "unknown";
}

std::vector<PathKey> EnumeratePaths(int rails, const std::vector<std::string>& peers, int paths_per_rail) {
  std::vector<PathKey> out;
  for (const std::string& peer : peers) {
    for (int r = 0; r < rails; ++r) {
      for (int i = 0; i < paths_per_rail; ++i) out.push_back(PathKey{r, peer, i});
    }
  }
  return out;
}

}  // namespace lockstep::fabric
