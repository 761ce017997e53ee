#include "lockstep/migration/api.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "lockstep/migration/state_json.h"

namespace lockstep::migration {
namespace {

using nlohmann::json;

// A JSON object body, or an error that says what is wrong with it.
Result<json> Object(const std::string& body, const char* call) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument(std::string(call) + ": the body is not valid JSON");
  if (!j.is_object()) return InvalidArgument(std::string(call) + ": the body must be a JSON object");
  return j;
}

Status String(const json& j, const char* call, const char* key, std::string& out, bool required = true) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!required) return Status::Ok();
    return InvalidArgument(std::string(call) + ": \"" + key + "\" is missing");
  }
  if (!it->is_string()) return InvalidArgument(std::string(call) + ": \"" + key + "\" must be a string");
  out = it->get<std::string>();
  if (required && out.empty()) return InvalidArgument(std::string(call) + ": \"" + key + "\" is empty");
  if (out.size() > 4096) return InvalidArgument(std::string(call) + ": \"" + key + "\" is longer than 4096 bytes");
  return Status::Ok();
}

Status Int(const json& j, const char* call, const char* key, int64_t lo, int64_t hi, int64_t& out,
           bool required = true) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!required) return Status::Ok();
    return InvalidArgument(std::string(call) + ": \"" + key + "\" is missing");
  }
  if (!it->is_number_integer()) return InvalidArgument(std::string(call) + ": \"" + key + "\" must be an integer");
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return InvalidArgument(std::string(call) + ": \"" + key + "\" must be between " + std::to_string(lo) + " and " +
                           std::to_string(hi) + " (got " + std::to_string(v) + ")");
  }
  out = v;
  return Status::Ok();
}

Status Bool(const json& j, const char* call, const char* key, bool& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();  // optional: the default stays
  if (!it->is_boolean()) return InvalidArgument(std::string(call) + ": \"" + key + "\" must be true or false");
  out = it->get<bool>();
  return Status::Ok();
}

#define LS_TRY(expr)                            \
  do {                                          \
    Status _s = (expr);                         \
    if (!_s.ok()) return _s.error();            \
  } while (0)

constexpr int64_t kMaxI = int64_t{1} << 53;

}  // namespace

Result<Registered> ParseRegister(const std::string& body) {
  const char* call = "register";
  auto j = Object(body, call);
  if (!j.ok()) return j.error();
  Registered r;
  std::string role;
  int64_t rank = -1, port = 0, pid = 0;
  LS_TRY(String(*j, call, "member", r.member));
  LS_TRY(String(*j, call, "role", role));
  if (role != "rank" && role != "spare") {
    return InvalidArgument("register: \"role\" must be \"rank\" or \"spare\" (got \"" + role + "\")");
  }
  r.role = role == "rank" ? Role::kRank : Role::kSpare;
  LS_TRY(Int(*j, call, "rank", 0, 65535, rank, false));
  if (r.role == Role::kSpare && rank >= 0) rank = -1;  // a spare has no rank; it may still ask (ignored)
  r.rank = static_cast<int>(rank);
  LS_TRY(String(*j, call, "host", r.host));
  LS_TRY(Int(*j, call, "store_port", 1, 65535, port));
  LS_TRY(Int(*j, call, "pid", 1, 0x7fffffff, pid));
  r.store_port = static_cast<int>(port);
  r.pid = static_cast<int>(pid);
  // Optional (Kubernetes): the member's pod, for the pod fencer and probe.
  LS_TRY(String(*j, call, "pod_name", r.pod_name, false));
  LS_TRY(String(*j, call, "pod_uid", r.pod_uid, false));
  if (r.pod_name.size() > 253 || !std::all_of(r.pod_name.begin(), r.pod_name.end(), [](unsigned char c) {
        return std::islower(c) || std::isdigit(c) || c == '-' || c == '.';
      })) {
    return InvalidArgument("register: \"pod_name\" must be a Kubernetes object name (lowercase letters, digits, "
                           "'-' and '.', at most 253 characters; got \"" + r.pod_name + "\")");
  }
  if (r.pod_uid.size() > 128) return InvalidArgument("register: \"pod_uid\" is longer than 128 bytes");
  if (!r.pod_uid.empty() && r.pod_name.empty()) {
    return InvalidArgument("register: \"pod_uid\" is given without \"pod_name\"");
  }
  return r;
}

Result<Heartbeat> ParseHeartbeat(const std::string& body) {
  const char* call = "heartbeat";
  auto j = Object(body, call);
  if (!j.ok()) return j.error();
  Heartbeat h;
  LS_TRY(String(*j, call, "member", h.member));
  LS_TRY(Int(*j, call, "generation", -1, kMaxI, h.generation));
  LS_TRY(Int(*j, call, "step", 0, kMaxI, h.step));
  LS_TRY(String(*j, call, "state", h.state));
  if (h.state != "training" && h.state != "waiting" && h.state != "done") {
    return InvalidArgument("heartbeat: \"state\" must be \"training\", \"waiting\" or \"done\" (got \"" + h.state +
                           "\")");
  }
  LS_TRY(Bool(*j, call, "state_intact", h.state_intact));
  LS_TRY(Bool(*j, call, "in_collective", h.in_collective));
  LS_TRY(Int(*j, call, "restored_step", 0, kMaxI, h.restored_step, false));
  return h;
}

Result<Report> ParseReport(const std::string& body) {
  const char* call = "report";
  auto j = Object(body, call);
  if (!j.ok()) return j.error();
  Report r;
  LS_TRY(String(*j, call, "member", r.member));
  LS_TRY(Int(*j, call, "generation", 0, kMaxI, r.generation));
  LS_TRY(Int(*j, call, "committed_step", 0, kMaxI, r.committed_step));
  LS_TRY(String(*j, call, "reason", r.reason));
  if (r.reason != "error" && r.reason != "pause") {
    return InvalidArgument("report: \"reason\" must be \"error\" or \"pause\" (got \"" + r.reason + "\")");
  }
  LS_TRY(String(*j, call, "error", r.error, false));
  LS_TRY(Bool(*j, call, "state_intact", r.state_intact));
  LS_TRY(Int(*j, call, "restored_step", 0, kMaxI, r.restored_step, false));
  return r;
}

Result<MigrationRequested> ParseMigration(const std::string& body) {
  const char* call = "migrations";
  auto j = Object(body, call);
  if (!j.ok()) return j.error();
  MigrationRequested m;
  int64_t rank = -1;
  LS_TRY(Int(*j, call, "rank", 0, 65535, rank));
  m.rank = static_cast<int>(rank);
  LS_TRY(String(*j, call, "kind", m.kind));
  if (m.kind != "planned" && m.kind != "preemptive") {
    return InvalidArgument("migrations: \"kind\" must be \"planned\" or \"preemptive\" (got \"" + m.kind + "\")");
  }
  LS_TRY(String(*j, call, "reason", m.reason, false));
  if (m.reason.empty()) m.reason = "requested through the API";
  return m;
}

namespace {

// The URL-decoded value of `key` in a query string (none: absent).
std::optional<std::string> QueryParam(const std::string& query, const std::string& key) {
  const std::string prefix = key + "=";
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    if (kv.rfind(prefix, 0) == 0) {
      std::string raw = kv.substr(prefix.size()), out;
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '%' && i + 2 < raw.size() + 0 && std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
          out += static_cast<char>(std::stoi(raw.substr(i + 1, 2), nullptr, 16));
          i += 2;
        } else {
          out += raw[i] == '+' ? ' ' : raw[i];
        }
      }
      return out;
    }
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return std::nullopt;
}

// An optional integer query parameter in [lo, hi]; absent leaves `out` alone.
Status QueryInt(const std::string& query, const char* key, int64_t lo, int64_t hi, int64_t& out) {
  auto v = QueryParam(query, key);
  if (!v) return Status::Ok();
  const std::string& s = *v;
  size_t i = s.size() > 1 && s[0] == '-' ? 1 : 0;
  bool digits = i < s.size() && s.size() - i <= 18;
  for (size_t k = i; digits && k < s.size(); ++k) digits = std::isdigit(static_cast<unsigned char>(s[k])) != 0;
  const int64_t x = digits ? std::stoll(s) : 0;
  if (!digits || x < lo || x > hi) {
    return InvalidArgument(std::string("plan: the query parameter \"") + key + "\" must be an integer between " +
                           std::to_string(lo) + " and " + std::to_string(hi) + " (got \"" + s + "\")");
  }
  out = x;
  return Status::Ok();
}

}  // namespace

Result<std::string> MemberFromQuery(const std::string& query) {
  auto v = QueryParam(query, "member");
  if (v && !v->empty()) return *v;
  return InvalidArgument("plan: the query parameter \"member\" is missing (GET /v1/plan?member=ID)");
}

Result<PlanQuery> ParsePlanQuery(const std::string& query) {
  auto member = MemberFromQuery(query);
  if (!member.ok()) return member.error();
  PlanQuery q;
  q.member = *member;
  LS_TRY(QueryInt(query, "wait_ms", 0, kMaxPlanWaitMs, q.wait_ms));
  LS_TRY(QueryInt(query, "generation", -1, kMaxI, q.known_generation));
  return q;
}

bool PlanIsNews(const json& plan, int64_t known_generation) {
  const auto action = plan.find("action");
  if (action == plan.end() || !action->is_string()) return false;
  if (*action == "exit") return true;
  if (*action != "train") return false;
  const auto g = plan.find("generation");
  return g != plan.end() && g->is_number_integer() && g->get<int64_t>() > known_generation;
}

json PlanReply(const JobState& s, const std::string& member) {
  const Member* m = s.Find(member);
  const Generation* g = s.current();
  json j{{"generation", s.generation()}, {"world_size", s.config.world_size}};
  if (!m) {
    j["action"] = "wait";
    j["reason"] = "unknown member";
    return j;
  }
  if (m->status != MemberStatus::kAlive) {
    j["action"] = "exit";
    j["reason"] = m->gone_reason;
    return j;
  }
  if (s.phase == Phase::kTerminal) {
    j["action"] = "exit";
    j["reason"] = "the job failed: " + s.terminal_reason;
    return j;
  }
  if (s.phase == Phase::kFinished) {
    j["action"] = "exit";
    j["reason"] = "the job finished";
    return j;
  }
  int rank = s.RankOf(member);
  if (s.phase == Phase::kAssembling || !g) {
    int have = 0;
    for (const auto& [id, o] : s.members) have += o.status == MemberStatus::kAlive && o.role == Role::kRank ? 1 : 0;
    j["action"] = "wait";
    j["reason"] = m->role == Role::kSpare ? "spare in the pool; generation 0 is not formed yet"
                                           : "waiting for ranks to register: " + std::to_string(have) + " of " +
                                                 std::to_string(s.config.world_size);
    return j;
  }
  if (rank < 0) {
    j["action"] = "wait";
    j["reason"] = "spare in the pool";
    return j;
  }
  if (s.phase == Phase::kCollecting) {
    // The generation failed: nobody forms it or goes on in it (a member still at its
    // store gives up at once instead of waiting out its timeout).
    j["action"] = "wait";
    j["reason"] = "generation " + std::to_string(g->number) + " ended (" + s.transition.cause + ")" +
                  (m->report_generation == g->number ? "; waiting for the other ranks to report" : "; report");
    return j;
  }
  if (s.phase == Phase::kPausing) {
    if (m->report_generation == g->number) {
      j["action"] = "wait";
      j["reason"] = "generation " + std::to_string(g->number) + " ended (" + s.transition.cause +
                    "); waiting for the other ranks to report";
      return j;
    }
  }
  if (s.phase == Phase::kWaitingSpare) {
    j["action"] = "wait";
    j["reason"] = s.waiting_reason;
    return j;
  }
  j["action"] = "train";
  j["rank"] = rank;
  j["members"] = g->members;
  j["store"] = {{"host", g->store_host}, {"port", g->store_port}, {"prefix", g->store_prefix}};
  j["src_rank"] = g->src_rank;
  j["resume_step"] = g->resume_step;
  j["reason"] = g->cause;
  return j;
}

json HeartbeatReply(const JobState& s, const std::string& member) {
  const Member* m = s.Find(member);
  json j{{"generation", s.generation()}, {"directive", "none"}};
  if (!m) return j;
  if (m->status != MemberStatus::kAlive || s.phase == Phase::kTerminal || s.phase == Phase::kFinished) {
    j["directive"] = "exit";
    j["reason"] = m->status != MemberStatus::kAlive ? m->gone_reason
                  : s.phase == Phase::kFinished   ? std::string("the job finished")
                                                  : "the job failed: " + s.terminal_reason;
    return j;
  }
  if (s.phase == Phase::kPausing && s.RankOf(member) >= 0) {
    j["directive"] = "pause";
    j["pause_at_step"] = s.transition.pause_at_step;
  }
  if (s.phase == Phase::kCollecting && s.RankOf(member) >= 0 && m->report_generation != s.generation()) {
    // The generation failed: a member waiting in a collective behind a peer that will
    // never arrive abandons it and reports, instead of waiting out its timeout.
    j["directive"] = "abort";
    j["reason"] = "generation " + std::to_string(s.generation()) + " ended (" + s.transition.cause + ")";
  }
  return j;
}

json RegisterReply(const JobState& s, const std::string& member) {
  json j{{"generation", s.generation()}};
  if (const Member* m = s.Find(member)) {
    j["role"] = RoleName(m->role);
    if (m->role == Role::kRank && m->requested_rank >= 0) j["rank"] = m->requested_rank;
  }
  return j;
}

json MigrationsReply(const JobState& s) {
  json a = json::array();
  for (const auto& m : s.migrations) a.push_back(MigrationToJson(m));
  return a;
}

json MigrationReply(const JobState& s, const std::string& id) {
  for (const auto& m : s.migrations) {
    if (m.id == id) return json{{"id", m.id}, {"state", m.state}};
  }
  return json::object();
}

int HttpStatus(const Error& e) {
  switch (e.code) {
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kConflict:
    case ErrorCode::kAlreadyExists: return 409;
    default: return 500;
  }
}

std::string ErrorBody(const Error& e) { return json{{"error", e.message}}.dump() + "\n"; }

}  // namespace lockstep::migration
