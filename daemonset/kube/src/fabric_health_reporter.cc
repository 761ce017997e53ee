#include "lockstep/agent/kube/fabric_health_reporter.h"

#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::agent {

const char* OutcomeName(FabricHealthReporter::Outcome o) {
  switch (o) {
    case FabricHealthReporter::Outcome::kNotDue: return "not_due";
    case FabricHealthReporter::Outcome::kWritten: return "written";
    case FabricHealthReporter::Outcome::kUnchanged: return "unchanged";
    case FabricHealthReporter::Outcome::kNotFound: return "not_found";
    case FabricHealthReporter::Outcome::kConflict: return "conflict";
    case FabricHealthReporter::Outcome::kError: return "error";
  }
  return "unknown";
}

FabricHealthReporter::FabricHealthReporter(kube::KubeApi& api, Clock& clock, Source source, ReporterOptions options,
                                           metrics::Registry& registry)
    : api_(api),
      clock_(clock),
      source_(std::move(source)),
      options_(std::move(options)),
      backoff_(options_.backoff, options_.seed),
      reports_(registry.Counter("lockstep_agent_health_reports_total",
                                "FabricHealth status reports by result (written, unchanged, not_found, conflict, "
                                "error)",
                                {"result"})) {
  for (auto o : {Outcome::kWritten, Outcome::kUnchanged, Outcome::kNotFound, Outcome::kConflict, Outcome::kError}) {
    reports_.Inc({OutcomeName(o)}, 0);
  }
}

FabricHealthReporter::Outcome FabricHealthReporter::Tick() {
  const MonoTime now = clock_.Monotonic();
  if (now < retry_at_) return Outcome::kNotDue;  // backing off
  AgentReport report = source_();
  const std::string reason = Assess(report).reason;
  // A changed Ready reason or rail condition is written at once, unless we
  // wrote less than `interval` ago: then at the end of that interval. So a
  // flapping fabric costs at most one write per interval.
  const bool state_changed = written_signature_ != ReportSignature(report);
  const bool rate_limited = last_write_ && now - *last_write_ < options_.interval;
  if (now < next_report_ && (!state_changed || rate_limited)) return Outcome::kNotDue;

  Outcome o = Report(report, now);
  reports_.Inc({OutcomeName(o)});
  switch (o) {
    case Outcome::kWritten:
    case Outcome::kUnchanged:
      if (last_outcome_ != Outcome::kWritten && last_outcome_ != Outcome::kUnchanged) {
        log::Info("reporting to FabricHealth", {{"node", options_.node_name}, {"ready_reason", reason}});
      }
      backoff_.Reset();
      next_report_ = now + options_.interval;
      break;
    case Outcome::kNotFound:
      if (last_outcome_ != Outcome::kNotFound) {
        log::Info("FabricHealth not found; the operator creates it for nodes its FabricPolicy selects. Retrying",
                  {{"node", options_.node_name}});
      }
      backoff_.Reset();
      next_report_ = retry_at_ = now + options_.interval;
      break;
    case Outcome::kConflict:
    case Outcome::kError:
    case Outcome::kNotDue: {
      Nanos delay = backoff_.Next();
      retry_at_ = now + delay;
      break;
    }
  }
  last_outcome_ = o;
  return o;
}

FabricHealthReporter::Outcome FabricHealthReporter::Report(const AgentReport& report, MonoTime now) {
  const kube::Gvr& gvr = kube::gvr::kFabricHealths;
  const std::string signature = ReportSignature(report);
  for (int attempt = 0; attempt <= options_.max_conflicts; ++attempt) {
    if (!current_) {
      auto got = api_.Get(gvr, "", options_.node_name);
      if (!got.ok()) {
        if (got.code() == ErrorCode::kNotFound) return Outcome::kNotFound;
        log::Warn("cannot read FabricHealth; backing off", {{"node", options_.node_name},
                                                            {"error", got.error().ToString()}});
        return Outcome::kError;
      }
      current_ = std::move(*got);
    }
    static const kube::Json kNull;
    const kube::Json* old = kube::FindPath(*current_, {"status"});
    const kube::Json& old_status = old ? *old : kNull;
    kube::Json status = BuildStatus(old_status, report, kube::FormatRfc3339(clock_.Wall()));
    if (last_write_ && now - *last_write_ < options_.heartbeat && !ChangedBeyondReportTime(old_status, status)) {
      return Outcome::kUnchanged;
    }
    auto written = api_.MergePatch(gvr, "", options_.node_name, StatusPatch(*current_, status), "status");
    if (written.ok()) {
      current_ = std::move(*written);
      last_write_ = now;
      written_signature_ = signature;
      return Outcome::kWritten;
    }
    current_.reset();  // re-read before the next attempt
    if (written.code() == ErrorCode::kConflict) continue;
    if (written.code() == ErrorCode::kNotFound) return Outcome::kNotFound;
    log::Warn("cannot write FabricHealth status; backing off",
              {{"node", options_.node_name}, {"error", written.error().ToString()}});
    return Outcome::kError;
  }
  log::Warn("FabricHealth status kept conflicting; backing off",
            {{"node", options_.node_name}, {"attempts", std::to_string(options_.max_conflicts + 1)}});
  return Outcome::kConflict;
}

}  // namespace lockstep::agent
