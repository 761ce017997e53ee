// RunChecks: a node's facts in, its checks out (one Check per id and
// subject), each with its local verdict and the rule that compares it with
// the pool. Pure: no IO. The ids are listed in docs/fleet-audit.md.
#pragma once

#include <vector>

#include "lockstep/audit/check.h"
#include "lockstep/audit/node_facts.h"

namespace lockstep::audit {

struct CheckOptions {
  // Modules whose absence fails the node outright (others are compared with
  // the pool: one node without a module its pool has loaded fails).
  std::vector<std::string> required_modules{};
  // Whether rails were configured (then a missing rail NIC is a failure;
  // discovered rails cannot be missing).
  bool rails_configured = false;
};

std::vector<Check> RunChecks(const NodeFacts& facts, const CheckOptions& options = {});

}  // namespace lockstep::audit
