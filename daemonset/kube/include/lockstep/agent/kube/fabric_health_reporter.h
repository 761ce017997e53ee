// FabricHealthReporter: writes this node's FabricHealth status (and only
// that object) with a merge patch on the status subresource.
//
//  - Due every `interval`, and at once when the Ready reason, a rail or the
//    GPUHealthy condition (ReportSignature) differs from the one last
//    written, but never more than one write per `interval`: a change within `interval`
//    of the last write waits for the end of it (paths that flap every
//    second on 10,000 nodes cost each node one write per interval).
//  - Read-modify-write: the status is built on the object as last read or
//    written (BuildStatus keeps the operator's fields and conditions) and sent
//    with its resourceVersion; 409 Conflict re-reads and retries (up to
//    max_conflicts times).
//  - A write that would change nothing but lastReportTime is skipped unless
//    `heartbeat` has passed since our last write.
//  - NotFound: the operator has not created the object yet; retried after
//    `interval`. Other API errors back off (jittered exponential, seeded).
//    Nothing here throws or ends the process.
//  - Metrics: lockstep_agent_health_reports_total{result=written|unchanged|
//    not_found|conflict|error}.
//
// Thread-compatible: Tick() from one thread. Time comes from the injected
// Clock, so tests drive it with a FakeClock and a FakeKubeApi.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "lockstep/agent/kube/health_status.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/backoff.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::agent {

struct ReporterOptions {
  std::string node_name;
  Nanos interval = std::chrono::seconds(10);
  Nanos heartbeat = std::chrono::seconds(30);
  kube::BackoffPolicy backoff{std::chrono::seconds(1), std::chrono::seconds(60), 2.0, 0.2};
  int max_conflicts = 5;
  uint64_t seed = 1;
};

class FabricHealthReporter {
 public:
  enum class Outcome { kNotDue, kWritten, kUnchanged, kNotFound, kConflict, kError };
  using Source = std::function<AgentReport()>;

  // REQUIRES: api, clock and registry outlive the reporter.
  FabricHealthReporter(kube::KubeApi& api, Clock& clock, Source source, ReporterOptions options,
                       metrics::Registry& registry);

  // Reports if due (see above). Returns what happened.
  Outcome Tick();

  // The object as last read or written (nullopt before the first read).
  const std::optional<kube::Json>& current() const { return current_; }

 private:
  Outcome Report(const AgentReport& report, MonoTime now);

  kube::KubeApi& api_;
  Clock& clock_;
  Source source_;
  const ReporterOptions options_;
  kube::Backoff backoff_;
  metrics::Family& reports_;
  std::optional<kube::Json> current_;
  std::optional<std::string> written_signature_;  // ReportSignature of our last write
  std::optional<MonoTime> last_write_;
  MonoTime next_report_{};
  MonoTime retry_at_{};
  Outcome last_outcome_ = Outcome::kNotDue;
};

const char* OutcomeName(FabricHealthReporter::Outcome o);

}  // namespace lockstep::agent
