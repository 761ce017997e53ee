// Action: what the runtime must do after a decision. Fence kills a member
// (its sockets close, so its peers' collectives fail at once); RequestSpare
// starts one spare process; Notice is a decision to log (and count in
// metrics); Terminal says the job cannot continue. Plain values.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace lockstep::migration {

struct Fence {
  std::string member;
  std::string host;
  int pid = 0;
  std::string reason;
};

struct RequestSpare {
  std::string reason;
};

// what: member_dead | failure_detected | generation_decided | generation_complete |
//       waiting_for_spare | migration_requested | migration_pausing | migration_done |
//       migration_failed | spare_launch_failed | spare_launches_stopped | terminal
struct Notice {
  std::string what;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string Field(const std::string& key) const {
    for (const auto& [k, v] : fields) if (k == key) return v;
    return {};
  }
};

struct Terminal {
  std::string reason;
};

using Action = std::variant<Fence, RequestSpare, Notice, Terminal>;
using Actions = std::vector<Action>;

}  // namespace lockstep::migration
