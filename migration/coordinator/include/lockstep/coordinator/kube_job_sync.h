// KubeJobSync: the coordinator's side of the job's pods and of its
// TrainingJob in Kubernetes mode (docs/migration.md, "Triggers and status in
// Kubernetes"). One worker thread, about once a poll interval:
//   1. lists the job's pods (label lockstep.dev/job=<job>);
//   2. pod annotations lockstep.dev/migrate (DecideTriggers) become migration
//      requests through Coordinator::Apply, the path POST /v1/migrations takes;
//   3. rank labels are patched onto the pods that hold ranks, migrated-away
//      pods are retired and deleted once they left (DecidePodUpkeep);
//   4. the TrainingJob's status keys generation, migrations and lastMigration
//      are written with a JSON merge patch on the status subresource when
//      they change (API errors retried with backoff), and an Event
//      RankMigrated is recorded on it per migration completed while running.
// Every API call happens on the worker thread, never under the coordinator's
// lock: the worker only takes Coordinator::Snapshot() and calls Apply().
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/coordinator/coordinator.h"
#include "lockstep/coordinator/kube_adapters.h"
#include "lockstep/kube/backoff.h"
#include "lockstep/kube/event_recorder.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/migration/kube_triggers.h"

namespace lockstep::coordinator {

struct KubeJobSyncOptions {
  std::string job{};           // pods labelled lockstep.dev/job=<job>
  std::string ns{};            // the job's namespace
  std::string training_job{};  // the TrainingJob whose status and Events are written ("": none)
  std::chrono::milliseconds poll_interval{1000};
  double leave_grace_s = 30;  // a migrated-away pod still running this long after it was replaced is deleted
  kube::BackoffPolicy backoff{std::chrono::milliseconds(500), std::chrono::seconds(30), 2.0, 0.2};
};

class KubeJobSync {
 public:
  // REQUIRES: api, coordinator and clock outlive it; `registry` and `events`
  // may be null (no metrics; no Events) and else outlive it too.
  KubeJobSync(kube::KubeApi& api, Coordinator& coordinator, Clock& clock, KubeJobSyncOptions options,
              metrics::Registry* registry = nullptr, kube::EventRecorder* events = nullptr);
  ~KubeJobSync();  // stops the worker
  KubeJobSync(const KubeJobSync&) = delete;
  KubeJobSync& operator=(const KubeJobSync&) = delete;

  void Start();  // the worker thread; without it RunOnce() does the work (tests)
  void Stop();
  // Runs a round now (the pods or the coordinator's state changed).
  void Wake() { loop_.Wake(); }
  // One round: list the pods, triggers, upkeep, status and Events.
  void RunOnce();

  // For tests: migrations asked for by annotations, unknown values seen,
  // status patches written, RankMigrated Events recorded.
  uint64_t Requested() const { return requested_.load(); }
  uint64_t Unknown() const { return unknown_.load(); }
  uint64_t StatusWrites() const { return status_writes_.load(); }
  uint64_t EventsRecorded() const { return events_recorded_.load(); }
  // The status keys the job should have now (generation, migrations, lastMigration).
  static kube::Json StatusPatch(const migration::JobState& s);

 private:
  void Triggers(const std::vector<migration::PodView>& pods);
  void Upkeep(const std::vector<migration::PodView>& pods);
  void WriteStatus(const migration::JobState& s);
  void RecordEvents(const migration::JobState& s);
  double Now() const;

  kube::KubeApi& api_;
  Coordinator& coordinator_;
  Clock& clock_;
  const KubeJobSyncOptions options_;
  kube::EventRecorder* events_;
  metrics::Family* trigger_requests_ = nullptr;
  metrics::Family* trigger_unknown_ = nullptr;
  metrics::Family* status_failures_ = nullptr;

  // Worker state (RunOnce is called by one thread at a time).
  std::mutex run_mu_;
  std::set<migration::TriggerKey> remembered_;         // GUARDED_BY(run_mu_)
  bool list_failed_ = false;                           // GUARDED_BY(run_mu_)
  std::map<std::string, std::string> pod_failures_;    // GUARDED_BY(run_mu_): pod -> last error logged
  std::optional<kube::Json> status_written_;           // GUARDED_BY(run_mu_)
  kube::Backoff status_backoff_;                       // GUARDED_BY(run_mu_)
  MonoTime status_due_{};                              // GUARDED_BY(run_mu_)
  bool status_failed_ = false;                         // GUARDED_BY(run_mu_)
  bool moves_seen_ = false;                            // GUARDED_BY(run_mu_): the first round passed
  std::set<std::pair<int64_t, int>> moves_announced_;  // GUARDED_BY(run_mu_): (generation, rank)
  std::optional<kube::Json> job_object_;               // GUARDED_BY(run_mu_): the TrainingJob, for Events
  std::atomic<uint64_t> requested_{0}, unknown_{0}, status_writes_{0}, events_recorded_{0};
  WorkerLoop loop_;
};

}  // namespace lockstep::coordinator
