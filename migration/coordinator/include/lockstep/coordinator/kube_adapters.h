// Kubernetes adapters of the coordinator's ports (ports.h), on the KubeApi port
// (lockstep/kube/kube_api.h), for `lockstep-coordinator --kube`:
//   KubeSpareLauncher    spare pods from a Pod template: <job>-spare-<n>-<suffix>,
//                        labels lockstep.dev/job and lockstep.dev/role=spare, no owner
//                        references and none of the job controller's labels; reports
//                        spare pods that Failed, Succeeded or were deleted
//   KubePodFencer        deletes a member's pod with grace period 0 and a uid
//                        precondition (a newer pod of the same name is never deleted)
//   KubePodProbe         a member whose pod is gone, replaced, Failed, being deleted,
//                        or whose container terminated or restarted, is dead (the
//                        last two: the pod stays, PodStays())
//   ConfigMapStateStore  the state text in a ConfigMap under key state.json
//
// The coordinator calls its ports with its lock held, so the launcher, the
// fencer and the probe never call the API server there: each has one worker
// thread that does the calls (creations and deletions retried with jittered
// exponential backoff; pods listed at most every poll interval), and the port
// methods only queue work or read what the worker found. The state store is
// synchronous (a Get and an Update, a few bounded retries on conflicts and
// transient errors); the coordinator calls it from its saver thread, outside
// its lock (coordinator.h), and hands a generation's plan out once it is saved.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/api/pod_contract.h"
#include "lockstep/coordinator/ports.h"
#include "lockstep/kube/backoff.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::coordinator {

inline constexpr const char* kJobLabel = api::kJobLabel;  // lockstep/api/pod_contract.h
inline constexpr const char* kRoleLabel = api::kRoleLabel;
inline constexpr const char* kStateKey = "state.json";

// True for errors worth retrying (the API server or the network, throttling,
// quota): not for a refused object (400/422), AlreadyExists or a precondition.
bool Transient(const Error& e);

// A thread that runs `body` every `period` (sooner after Wake()) until Stop().
class WorkerLoop {
 public:
  WorkerLoop() = default;
  WorkerLoop(const WorkerLoop&) = delete;
  WorkerLoop& operator=(const WorkerLoop&) = delete;
  ~WorkerLoop() { Stop(); }
  // body returns how long to sleep before the next run (at most `period`).
  void Start(std::chrono::milliseconds period, std::function<std::chrono::milliseconds()> body);
  void Wake();
  void Stop();
  bool running() const { return thread_.joinable(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, woken_ = false;
  std::thread thread_;
};

struct KubeSpareOptions {
  std::string job{};              // a DNS label (it names pods and is a label value)
  std::string ns{};               // where spare pods go
  kube::Json pod_template{};      // a corev1 Pod (metadata.name, status and owner references are dropped)
  std::string coordinator_url{};  // LOCKSTEP_COORDINATOR of the spares
  std::string suffix{};           // "": 5 random [a-z0-9] characters (differs per coordinator run)
  std::chrono::milliseconds poll_interval{1000};
  kube::BackoffPolicy backoff{std::chrono::milliseconds(200), std::chrono::seconds(30), 2.0, 0.2};
};

class KubeSpareLauncher final : public SpareLauncher {
 public:
  // Checks the job name and the template (a Pod with at least one container).
  static Status Check(const KubeSpareOptions& options);
  // REQUIRES: Check(options) ok; `api` outlives the launcher.
  KubeSpareLauncher(kube::KubeApi& api, KubeSpareOptions options);
  ~KubeSpareLauncher() override;  // stops the worker; the pods stay
  // REQUIRES: before the first Launch() (the URL is known once the API listens).
  void SetCoordinatorUrl(std::string url);
  // Adopts the job's spare pods left by an earlier coordinator (their end is
  // reported like that of launched ones), then starts the worker thread.
  // Without Start(), RunOnce() does the work (tests).
  void Start();
  // Names the pod and queues its creation; returns at once with the name.
  // The worker creates it, retrying transient API errors with backoff for as
  // long as they last (such a spare stays "starting", it is not a failed
  // start); a refused pod (invalid template, name taken) is reported by
  // Reap() as "not created: ...", which counts as a failed start.
  Result<SpareHandle> Launch() override;
  // Spare pods that Failed or Succeeded, were deleted, or were refused.
  std::vector<Exited> Reap() override;
  // The pod Launch() creates under `name`.
  kube::Json SparePod(const std::string& name) const;
  // One round of the worker: due creations, then the list of spare pods if
  // the poll interval passed (or `force_list`).
  void RunOnce(bool force_list = false);
  // Pods queued for creation (not created yet).
  size_t Pending() const;
  // Runs a round now (the job's pods changed).
  void Wake() { loop_.Wake(); }

 private:
  struct PendingPod {
    std::string name;
    kube::Json pod;
    kube::Backoff backoff;
    std::chrono::steady_clock::time_point due;
    bool failed_before = false;  // a transient error was logged
  };
  std::chrono::milliseconds Round();

  kube::KubeApi& api_;
  KubeSpareOptions options_;
  std::string suffix_;
  mutable std::mutex mu_;
  int counter_ = 0;                                    // GUARDED_BY(mu_)
  std::deque<PendingPod> pending_;                     // GUARDED_BY(mu_)
  std::set<std::string> created_;                      // GUARDED_BY(mu_): created, not reported ended
  std::vector<Exited> exited_;                         // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point last_list_{};  // worker only
  bool list_failed_ = false;                           // worker only
  WorkerLoop loop_;
};

struct KubeFencerOptions {
  std::string ns{};
  kube::BackoffPolicy backoff{std::chrono::milliseconds(200), std::chrono::seconds(10), 2.0, 0.2};
};

class KubePodFencer final : public Fencer {
 public:
  // REQUIRES: `api` outlives the fencer.
  KubePodFencer(kube::KubeApi& api, KubeFencerOptions options);
  ~KubePodFencer() override;
  void Start();  // the worker thread; without it RunOnce() does the work (tests)
  // Queues the deletion of the member's pod (by name and uid; without a pod
  // name, the pod whose status.podIP is the member's host) and returns at
  // once. The worker deletes it with grace period 0 and the uid as a
  // precondition, retrying other errors with backoff; NotFound and a uid
  // mismatch (a newer pod of the same name) end it.
  Status Fence(const MemberRef& m) override;
  void RunOnce();
  size_t Pending() const;
  // How each fence ended, in order ("deleted pod p", "pod p already gone", ...).
  std::vector<std::string> Results() const;

 private:
  struct Task {
    MemberRef member;
    kube::Backoff backoff;
    std::chrono::steady_clock::time_point due;
  };
  std::chrono::milliseconds Round();
  // true: done (with `result`); false: retry.
  bool Attempt(const MemberRef& m, std::string& result);

  kube::KubeApi& api_;
  KubeFencerOptions options_;
  mutable std::mutex mu_;
  std::deque<Task> tasks_;            // GUARDED_BY(mu_)
  std::vector<std::string> results_;  // GUARDED_BY(mu_)
  WorkerLoop loop_;
};

class KubePodProbe final : public ProcessProbe {
 public:
  // REQUIRES: `api` outlives the probe. With a `label_selector` the poll lists
  // only the pods it selects (the job's, from PodCache: no API request) and
  // reads a member's pod that is not among them with a Get (a pod without the
  // job's label, or not in the cache yet); without one it lists the namespace.
  KubePodProbe(kube::KubeApi& api, std::string ns,
               std::chrono::milliseconds poll_interval = std::chrono::milliseconds(1000),
               std::string label_selector = "");
  ~KubePodProbe() override;
  void Start();  // the worker thread; without it RunOnce() does the work (tests)
  // What the last poll found for this member's pod (nullopt: alive, or not
  // polled yet). Members not asked about between two polls are forgotten.
  std::optional<std::string> Gone(const MemberRef& m) override;
  bool LocalOnly() const override { return false; }
  // The last verdict for `m` was its container terminated or restarted while
  // the pod is not Failed, Succeeded, being deleted, gone or replaced.
  bool PodStays(const MemberRef& m) override;
  // One poll: one List of the namespace's (or the selected) pods.
  void RunOnce();
  // Polls now (the pods changed).
  void Wake() { loop_.Wake(); }

 private:
  struct Watched {
    MemberRef ref;
    bool asked = true;
    std::optional<std::string> gone;
    std::map<std::string, int64_t> restarts;  // container -> restartCount when first seen
    bool pod_stays = false;                   // `gone` is about a container of a pod that stays
  };
  // How the pod shows the member dead, or nullopt.
  static std::optional<std::string> Verdict(Watched& w, const kube::Json* pod);

  kube::KubeApi& api_;
  std::string ns_;
  std::chrono::milliseconds poll_interval_;
  std::string label_selector_;
  std::mutex mu_;
  std::map<std::string, Watched> watched_;  // GUARDED_BY(mu_): by member id
  bool list_failed_ = false;                // worker only
  WorkerLoop loop_;
};

struct ConfigMapStoreOptions {
  std::string ns{};
  std::string name{};
  std::string job{};                          // labels the ConfigMap lockstep.dev/job
  int attempts = 5;                           // per Save/Load, for conflicts and transient errors
  std::chrono::milliseconds retry_delay{50};  // doubled per attempt
  // No retry starts after this much time in one Save/Load (a generation's plan
  // waits for its save; each request is bounded by the client's timeout).
  std::chrono::milliseconds deadline{2000};
};

class ConfigMapStateStore final : public StateStore {
 public:
  // REQUIRES: `api` outlives the store.
  ConfigMapStateStore(kube::KubeApi& api, ConfigMapStoreOptions options);
  // Creates the ConfigMap when absent, else updates it at the resourceVersion
  // last seen (a conflict re-reads it and tries again).
  Status Save(const std::string& text) override;
  // nullopt: no ConfigMap, or no state.json key in it.
  Result<std::optional<std::string>> Load() override;

 private:
  kube::KubeApi& api_;
  ConfigMapStoreOptions options_;
  std::mutex mu_;
  std::optional<kube::Json> last_;  // GUARDED_BY(mu_): the ConfigMap as last read or written
};

}  // namespace lockstep::coordinator
