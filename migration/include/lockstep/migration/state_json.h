// JSON form of JobState: the state file (written on every change, loaded at
// start) and the body of GET /v1/state. Loading validates what Decide()
// relies on (ranks in range, members of generations known), so a damaged file
// is an error, not a crash. Pure; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lockstep/common/result.h"
#include "lockstep/migration/job_state.h"

namespace lockstep::migration {

nlohmann::json StateToJson(const JobState& s);
Result<JobState> StateFromJson(const nlohmann::json& j);
Result<JobState> StateFromString(const std::string& text);

// JSON of one migration as GET /v1/migrations shows it.
nlohmann::json MigrationToJson(const Migration& m);

}  // namespace lockstep::migration
