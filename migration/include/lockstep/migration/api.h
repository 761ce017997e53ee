// The coordinator's HTTP API as pure functions (docs/migration.md, "HTTP
// API"): request bodies parsed into events (malformed -> InvalidArgument with
// a message that names the field), and reply bodies computed from a JobState.
// No I/O; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lockstep/common/result.h"
#include "lockstep/migration/event.h"
#include "lockstep/migration/job_state.h"

namespace lockstep::migration {

Result<Registered> ParseRegister(const std::string& body);
Result<Heartbeat> ParseHeartbeat(const std::string& body);
Result<Report> ParseReport(const std::string& body);
Result<MigrationRequested> ParseMigration(const std::string& body);
// The `member` parameter of a query string ("member=m0&x=y"), URL-decoded.
Result<std::string> MemberFromQuery(const std::string& query);

// GET /v1/plan?member=M[&wait_ms=N&generation=G]: a long poll when wait_ms > 0
// (docs/migration.md, "Long poll"): the coordinator may hold the request until
// the member's plan is news for a caller that last formed generation G
// (PlanIsNews), or N ms passed.
struct PlanQuery {
  std::string member;
  int64_t wait_ms = 0;          // 0: answer at once (the plain poll)
  int64_t known_generation = -1;  // G: the generation the caller last formed (-1: none)
};
inline constexpr int64_t kMaxPlanWaitMs = 60'000;  // larger wait_ms values are a 400
Result<PlanQuery> ParsePlanQuery(const std::string& query);
// A plan the caller has to act on: `exit`, or `train` in a generation newer
// than the one it last formed. Everything else (`wait`, the generation it is
// already in) leaves it waiting.
bool PlanIsNews(const nlohmann::json& plan, int64_t known_generation);

// GET /v1/plan for a known member.
nlohmann::json PlanReply(const JobState& s, const std::string& member);
// POST /v1/heartbeat for a known member.
nlohmann::json HeartbeatReply(const JobState& s, const std::string& member);
// POST /v1/register of `member`: {generation, role, rank?}. role is "spare" for
// a process that asked for a rank a live member holds (it joins as a spare).
nlohmann::json RegisterReply(const JobState& s, const std::string& member);
// GET /v1/migrations (one element: the migration with that id).
nlohmann::json MigrationsReply(const JobState& s);
nlohmann::json MigrationReply(const JobState& s, const std::string& id);

// HTTP status for an error: 400 invalid, 404 not found, 409 conflict, else 500.
int HttpStatus(const Error& e);
// {"error": message}
std::string ErrorBody(const Error& e);

}  // namespace lockstep::migration
