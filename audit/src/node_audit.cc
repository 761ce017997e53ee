#include "lockstep/audit/node_audit.h"

#include "lockstep/audit/audit_json.h"

namespace lockstep::audit {

nlohmann::json CompletedNodeAuditStatus(const std::vector<Check>& checks, const std::string& completion_time) {
  const Counts n = CountVerdicts(checks);
  return {{"phase", "Completed"},
          {"completionTime", completion_time},
          {"verdict", VerdictName(OverallVerdict(checks))},
          {"passed", n.passed},
          {"failed", n.failed},
          {"notPresent", n.not_present},
          {"checks", ChecksToJson(checks)}};
}

nlohmann::json ErrorNodeAuditStatus(const std::string& error, const std::string& completion_time) {
  return {{"phase", "Error"}, {"completionTime", completion_time}, {"error", error.substr(0, 4096)}};
}

}  // namespace lockstep::audit
