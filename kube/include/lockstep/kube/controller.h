// Controller: runs a level-based Reconciler over keys from a WorkQueue fed by
// informers (controller-runtime's Controller, minus the magic).
//
//  - For(i): the informer's objects enqueue their own key ("ns/name" or "name").
//    Owns(i, owner): objects enqueue their controller owner's key.
//    Watches(i, map): objects enqueue whatever keys `map` returns.
//    Each takes an optional UpdateFilter (controller-runtime's predicate): an
//    update enqueues only if it returns true for (old, new), so that changes
//    the reconciler never reads (node heartbeats, say) cost nothing.
//  - Workers wait until every registered informer HasSynced() before the first
//    reconcile; a key is reconciled by one worker at a time.
//  - Result: error -> AddRateLimited (409 Conflict is logged quietly: it only
//    means the cache was stale); requeue -> AddRateLimited; requeue_after ->
//    Forget + AddAfter; success -> Forget.
//  - Metrics (labelled by controller name): lockstep_reconcile_total{controller,
//    result=success|error|requeue|requeue_after}, lockstep_reconcile_errors_total,
//    lockstep_reconcile_duration_seconds (histogram), lockstep_workqueue_depth.
//
// Thread-safe: For/Owns/Watches before the informers and the controller start;
// Start/Stop from one owning thread.
//
//   FabricPolicyReconciler r(...);
//   Controller c(r, clock, {.name = "fabricpolicy", .workers = 2, .registry = &registry});
//   c.For(policies);
//   c.Owns(daemonsets, gvr::kFabricPolicies);
//   policies.Start(); daemonsets.Start(); c.Start();
//   ...
//   c.Stop(); policies.Stop(); daemonsets.Stop();
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/common/result.h"
#include "lockstep/kube/informer.h"
#include "lockstep/kube/work_queue.h"

namespace lockstep::kube {

struct ReconcileResult {
  std::optional<Error> error{};         // retry with per-key backoff
  std::optional<Nanos> requeue_after{}; // reconcile again after this (e.g. periodic probe)
  bool requeue = false;               // retry with backoff without counting an error

  static ReconcileResult Done() { return {}; }
  static ReconcileResult Fail(Error e) { return {std::move(e), std::nullopt, false}; }
  static ReconcileResult After(Nanos d) { return {std::nullopt, d, false}; }
};

// Implemented by each reconciler. Level-based: read the cache, converge the
// object named by `key`, return. Never called concurrently for the same key;
// may be called concurrently for different keys (workers > 1).
class Reconciler {
 public:
  virtual ~Reconciler() = default;
  virtual ReconcileResult Reconcile(const std::string& key) = 0;
};

struct ControllerOptions {
  std::string name = "controller";  // metrics label and log field
  int workers = 1;
  metrics::Registry* registry = nullptr;  // optional; must outlive the controller
  // Optional gate checked before each reconcile (e.g. LeaderElector::IsLeader):
  // while false, a key is set aside (not requeued: a standby does no work per
  // key) until GateOpened() puts every held key back in the queue.
  std::function<bool()> gate{};
  Nanos sync_poll = std::chrono::milliseconds(10);  // how often workers check HasSynced
};

class Controller {
 public:
  using KeyMapper = std::function<std::vector<std::string>(const Json& obj)>;
  // true: the update matters. Null: every update does.
  using UpdateFilter = std::function<bool(const Json& old_obj, const Json& new_obj)>;

  // REQUIRES: reconciler and clock outlive the controller.
  Controller(Reconciler& reconciler, Clock& clock, ControllerOptions options);
  ~Controller();  // Stop()s
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // REQUIRES (all three): before informer.Start(); the informer outlives the controller.
  void For(Informer& informer, UpdateFilter filter = nullptr);
  // Enqueues the key of the ownerReference with controller=true whose kind and
  // API group match `owner` (namespaced owners share the child's namespace).
  void Owns(Informer& informer, const Gvr& owner);
  void Watches(Informer& informer, KeyMapper map, UpdateFilter filter = nullptr);

  // Starts `workers` threads. REQUIRES: called once.
  void Start();
  // Shuts the queue down, lets in-flight reconciles finish, joins. Idempotent.
  void Stop();

  // Queues every key held back by a closed gate. Call when the gate opens
  // (e.g. from LeaderCallbacks::on_started_leading). Thread-safe.
  void GateOpened();
  // Keys held back by a closed gate.
  size_t HeldLen() const;

  // All registered informers have synced (for /readyz).
  bool Synced() const;
  // Reconciles one ready key on the calling thread; false if none was ready.
  // For tests (with no workers started).
  bool ProcessOne();
  WorkQueue& queue() { return queue_; }

 private:
  void Track(Informer& informer);
  void EnqueueAll(const std::vector<std::string>& keys);
  void Worker();
  void Process(const std::string& key);
  // With a gate that is closed: records `key` for GateOpened() and forgets its
  // backoff (true); else false.
  bool HoldIfGateClosed(const std::string& key);

  Reconciler& reconciler_;
  Clock& clock_;
  ControllerOptions options_;
  metrics::Registry own_registry_;  // used when options_.registry is null
  metrics::Family* total_;
  metrics::Family* errors_;
  metrics::Family* duration_;
  metrics::Family* depth_;
  WorkQueue queue_;
  std::vector<const Informer*> informers_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;            // GUARDED_BY(mu_)
  std::set<std::string> held_;       // GUARDED_BY(mu_); keys a closed gate set aside
  std::vector<std::thread> workers_;
};

// UpdateFilters. Pure. metadata.labels or metadata.deletionTimestamp changed:
bool LabelsOrDeletionChanged(const Json& old_obj, const Json& new_obj);
// metadata.generation (the spec, for resources with a status subresource) or
// metadata.deletionTimestamp changed:
bool GenerationOrDeletionChanged(const Json& old_obj, const Json& new_obj);

// Anything but .status (and the bookkeeping metadata.resourceVersion and
// metadata.managedFields) changed: drops status-only updates, such as an
// agent's periodic report on its own FabricHealth.
bool SpecOrMetadataChanged(const Json& old_obj, const Json& new_obj);

// The "ns/name" (or "name") of obj's controller owner of kind/group `owner`,
// or nullopt. Pure.
std::optional<std::string> ControllerOwnerKey(const Json& obj, const Gvr& owner);

}  // namespace lockstep::kube
