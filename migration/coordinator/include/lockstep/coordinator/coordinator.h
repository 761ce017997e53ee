// Coordinator: the runtime around the pure Decide() (lockstep/migration): the
// HTTP API of docs/migration.md, a tick that turns time passing, reaped spare
// processes and gone local pids into events, and the actions' side effects
// (fence, start a spare, log, metrics, state file).
//
// Every entry point takes one mutex, runs Decide(), performs the actions and
// releases it; nothing in it waits on the network. The state is saved by a
// saver thread (StartSaver(), which Start() calls) outside that mutex: each
// change hands the saver the newest snapshot, which replaces one not written
// yet (the newest wins; one writer, so an older snapshot is never written
// after a newer one), and a failed save is retried with backoff until a newer
// one replaces it. A slow or hanging store (the API server behind the state
// ConfigMap) so never holds up heartbeats. A generation's plan is handed out
// only once the snapshot that decided it was saved (or its save failed: the
// job goes on), so a restarted coordinator never finds members in a
// generation its state does not know. Without the saver thread (tests that
// tick by hand, and before Start()) each change is saved at once, under the
// mutex. The one handler that waits
// is a long poll of GET /v1/plan (wait_ms): it sleeps on a condition variable,
// without the mutex, until the member's plan is news or its time is up, and
// holds one of the HTTP server's threads meanwhile; at most
// max_held_plan_polls are held at once (the server needs that many threads
// beyond the ones that serve everything else), further ones are answered at
// once. Thread-safe. The ports it is given must outlive it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/common/clock.h"
#include "lockstep/common/http_server.h"
#include "lockstep/common/metrics.h"
#include "lockstep/coordinator/adapters.h"
#include "lockstep/coordinator/ports.h"
#include "lockstep/migration/decide.h"

namespace lockstep::coordinator {

struct CoordinatorOptions {
  std::chrono::milliseconds tick_interval{100};  // a local process exit wakes the loop at once (pidfd)
  bool pid_check = true;  // ask the probe about members (pids on this host, or every pod)
  // Long polls of GET /v1/plan held at once (0: none, every poll is answered at
  // once). Each holds an HTTP server thread: give the server this many more.
  int max_held_plan_polls = 0;
  // The longest a poll is held (also at most half the heartbeat timeout, so a
  // member that only polls stays alive). Below the server's request timeout.
  std::chrono::milliseconds max_plan_wait{2000};
  // Rank pods belong to a job controller that restarts a dead container in
  // place and recreates a deleted pod at its index (Kubeflow): a member whose
  // container terminated or restarted in a pod that stays is not fenced (its
  // process is gone; deleting the pod would only spend one of the Job's
  // backoffLimit failures). The process the pod runs next asks for the rank
  // again and joins as a spare.
  bool keep_restarted_pods = false;
  // With keep_restarted_pods: a member decided dead before the probe saw its pod
  // (a peer's collective error, then "heartbeating but no report": the kubelet
  // reports a killed container a few seconds late) is fenced only after this long,
  // and not at all if the probe sees its container terminated or restarted in a pod
  // that stays meanwhile, or a new process registers from its pod. Its replacement
  // does not wait: generations already reject the old process. A member still
  // running at the end of it (hung) is fenced then. The pending fence is in the
  // state (Member::fence_due): a restarted coordinator defers it again for the time
  // it had left (at least 3 s, for the probe's first look) and judges it the same way.
  std::chrono::milliseconds restart_grace{10000};
};

struct CoordinatorPorts {
  const Clock* clock = nullptr;
  Fencer* fencer = nullptr;
  SpareLauncher* launcher = nullptr;  // null: spares are never started
  ProcessProbe* probe = nullptr;      // null: no pid checks
  StateStore* store = nullptr;        // null: nothing persisted
  const LocalHosts* local = nullptr;
  metrics::Registry* registry = nullptr;
};

class Coordinator {
 public:
  // `restored`: the state was loaded from the store (Begin() applies a Restarted event).
  Coordinator(migration::JobState initial, bool restored, CoordinatorPorts ports, CoordinatorOptions options = {});
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Registers the /v1/... and /metrics, /healthz, /readyz handlers. REQUIRES: before server.Start().
  void AddHandlers(HttpServer& server);
  // One tick: reap spares, check local pids, then Decide(Tick).
  void Tick();
  // Applies Restarted (when restored) or saves the initial state. Idempotent;
  // Start() calls it. Call it once the spare launcher knows the API's address.
  void Begin();
  // Begin(), then the saver and the tick thread (every options.tick_interval).
  // Stop() joins them and saves the state.
  void Start();
  // The saver thread alone (Start() calls it; tests that tick by hand). Idempotent.
  void StartSaver();
  // Blocks until every snapshot handed to the saver was written or its save
  // failed once, or `limit` passes; true if so (tests).
  bool WaitSaved(std::chrono::milliseconds limit) const;
  // Answers every held plan poll now and holds no more. Call it before the
  // HTTP server's Stop() (which joins the threads the held polls sit on).
  void Drain();
  void Stop();

  migration::JobState Snapshot() const;
  // Plan polls being held right now (tests).
  int HeldPlanPolls() const;
  // Blocks until exactly `n` plan polls are held, or `limit` passes; true if
  // they were (tests: a poll is held on an HTTP server thread).
  bool WaitHeldPlanPolls(int n, std::chrono::milliseconds limit) const;
  // Applies an event as a handler would (for tests and the binary).
  migration::Outcome Apply(const migration::Event& event);

 private:
  struct PlanWaiter {
    std::string member;
    int64_t known_generation = -1;
    bool ready = false;  // the member's plan became news
  };

  HttpResponse Serve(const HttpRequest& req);
  HttpResponse ServePlan(const HttpRequest& req);
  void WakePlanWaiters();
  migration::Outcome ApplyLocked(const migration::Event& event, bool persist_always);
  void Perform(const migration::Actions& actions, std::vector<migration::Event>& follow_up);
  void Persist();
  void SaverLoop();
  void StopSaver();
  // A save of the snapshot of `generation` ended (ok or not). REQUIRES: mu_ held.
  void SaveEnded(int64_t generation, const Status& s);
  // PlanReply, but a generation whose snapshot is not saved yet is not handed out.
  nlohmann::json PlanFor(const std::string& member) const;
  void UpdateGauges();
  double Now() const;
  // Fences `ref` through the fencer and logs it. REQUIRES: mu_ held.
  void FenceNow(const MemberRef& ref, const std::string& reason, const std::string& job);
  // Deferred fences whose member's pod is seen to stay (skipped) or whose grace is over (fenced).
  void RunDeferredFences();
  // A restored state's fences still deferred (Member::fence_due): deferred again for
  // the grace they had left (at least a few probe polls), or done at once where this
  // coordinator does not defer fences. REQUIRES: mu_ held.
  void RestoreDeferredFences();
  // An alive member other than ref's registered from ref's pod (same uid), or "".
  std::string NextProcessInPod(const MemberRef& ref) const;

  // A fence held back by CoordinatorOptions::restart_grace.
  struct DeferredFence {
    MemberRef ref;
    std::string reason;
    MonoTime due;
  };

  CoordinatorPorts ports_;
  CoordinatorOptions options_;
  const bool restored_;
  bool begun_ = false;  // GUARDED_BY(mu_)
  mutable std::mutex mu_;
  migration::JobState state_;  // GUARDED_BY(mu_)
  std::string last_saved_;     // GUARDED_BY(mu_): the last snapshot saved or handed to the saver
  bool save_failed_ = false;   // GUARDED_BY(mu_): logged once per streak
  // The highest generation whose snapshot was saved (or whose save failed).
  int64_t saved_generation_ = -1;  // GUARDED_BY(mu_)
  // The saver thread (lock order: mu_, then save_mu_; the saver holds neither while it saves).
  mutable std::mutex save_mu_;
  mutable std::condition_variable save_cv_;  // with save_mu_: a snapshot to save, stop, or one saved
  std::optional<std::string> save_next_;     // GUARDED_BY(save_mu_): the newest snapshot not written yet
  int64_t save_next_generation_ = -1;        // GUARDED_BY(save_mu_)
  bool save_busy_ = false;                   // GUARDED_BY(save_mu_): a Save() is running
  bool save_retry_ = false;                  // GUARDED_BY(save_mu_): save_next_ is a failed one, retried at save_due_
  std::chrono::steady_clock::time_point save_due_{};  // GUARDED_BY(save_mu_)
  bool save_stop_ = false;                            // GUARDED_BY(save_mu_)
  bool saver_running_ = false;                        // GUARDED_BY(mu_): changes go to the saver
  std::thread saver_;
  std::vector<DeferredFence> deferred_fences_;  // GUARDED_BY(mu_)
  std::vector<PlanWaiter*> waiters_;  // GUARDED_BY(mu_): held plan polls
  bool draining_ = false;             // GUARDED_BY(mu_)
  std::condition_variable plan_cv_;   // with mu_: a waiter became ready, or draining
  mutable std::condition_variable held_cv_;  // with mu_: waiters_ changed
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // GUARDED_BY(stop_mu_)
  std::thread ticker_;
  metrics::Family* generation_ = nullptr;
  metrics::Family* members_ = nullptr;
  metrics::Family* failures_ = nullptr;
  metrics::Family* migrations_ = nullptr;
  metrics::Family* generations_ = nullptr;
  metrics::Family* recovery_ = nullptr;
  metrics::Family* spares_requested_ = nullptr;
  metrics::Family* terminal_ = nullptr;
  metrics::Family* waiting_spare_ = nullptr;
  metrics::Family* requests_ = nullptr;
};

}  // namespace lockstep::coordinator
