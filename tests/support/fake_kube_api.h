// FakeKubeApi: an in-memory Kubernetes API server for unit tests. Implements
// KubeApi with the semantics reconcilers depend on:
//
//  - Objects keyed by (resource, namespace, name); one global resourceVersion
//    counter (like etcd) stamped on every write; uid, creationTimestamp and
//    generation set on create; generation bumped when anything outside
//    metadata/status changes.
//  - Update/MergePatch with metadata.resourceVersion set are optimistic:
//    a stale version fails with kConflict. A write that changes nothing is a
//    no-op (no new resourceVersion, no watch event), as on a real server.
//  - Status subresource: writes to "" ignore .status and writes to "status"
//    change only .status, for resources that have one (default: all but
//    configmaps, secrets, events, leases; see SetStatusSubresource).
//  - Delete honours finalizers (sets deletionTimestamp; the object goes away
//    when the last finalizer is removed), uid preconditions, and garbage
//    collects dependents whose ownerReferences point at the deleted uid.
//  - Apply creates or updates; it approximates server-side apply for one field
//    manager: fields the manager applied before and omits now are removed.
//  - List supports label selectors (LabelSelector syntax), simple field
//    selectors ("a.b=v", "a.b!=v"), and paging (limit/continue).
//  - Watch replays events after the given resourceVersion (or synthetic ADDED
//    events for "" / "0"), then streams live ones. Label-selector transitions
//    do not produce synthetic DELETED events.
//
// Faults and control: FailNext() (the next N calls fail), SetFaultHook(),
// ExpireResourceVersions() (410 Gone for old versions and live watches),
// CloseWatches() (streams end like a server timeout), SendBookmarks().
// Inspection: CallCount(), Calls(), ActiveWatches(), Objects().
//
// Thread-safe. Watch() blocks like the real thing and notices `stop` within ~5 ms.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "lockstep/common/clock.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/kube/verb.h"

namespace lockstep::kube {

class FakeKubeApi final : public KubeApi {
 public:
  // One recorded request.
  struct Call {
    Verb verb;
    std::string resource;  // plural, e.g. "leases"
    std::string ns;
    std::string name;
    std::string subresource;
    std::string field_manager;  // Apply only
  };
  // The options of one Delete call that got past the faults.
  struct DeleteRecord {
    std::string resource;
    std::string ns;
    std::string name;
    std::string uid_precondition;
    std::optional<int64_t> grace_period_seconds;
  };
  // Returns an error to fail the call, nullopt to let it through.
  using FaultHook = std::function<std::optional<Error>(const Call&)>;

  // REQUIRES: clock outlives the fake (used for timestamps only).
  explicit FakeKubeApi(Clock& clock = SystemClock::Instance());
  ~FakeKubeApi() override;

  Result<Json> Get(const Gvr& r, const std::string& ns, const std::string& name) override;
  Result<Json> List(const Gvr& r, const std::string& ns, const ListOptions& opts) override;
  Result<Json> Create(const Gvr& r, const std::string& ns, const Json& obj) override;
  Result<Json> Update(const Gvr& r, const std::string& ns, const Json& obj,
                      const std::string& subresource = "") override;
  Result<Json> MergePatch(const Gvr& r, const std::string& ns, const std::string& name, const Json& patch,
                          const std::string& subresource = "") override;
  Result<Json> Apply(const Gvr& r, const std::string& ns, const std::string& name, const Json& obj,
                     const ApplyOptions& opts, const std::string& subresource = "") override;
  Status Delete(const Gvr& r, const std::string& ns, const std::string& name,
                const std::string& uid_precondition = "",
                std::optional<int64_t> grace_period_seconds = std::nullopt) override;
  Status Watch(const Gvr& r, const std::string& ns, const WatchOptions& opts, const WatchHandler& handler,
               const std::atomic<bool>& stop) override;

  // --- Faults ---
  // The next `n` calls (of `verb`, or of any verb) fail with `code`.
  void FailNext(int n, ErrorCode code, std::optional<Verb> verb = std::nullopt,
                std::string message = "injected fault");
  // Drops pending FailNext rules.
  void ClearFaults();
  // Consulted on every call after FailNext rules; nullptr clears it.
  // REQUIRES: the hook does not call into the fake.
  void SetFaultHook(FaultHook hook);
  // Compacts history: every resourceVersion issued so far becomes too old.
  // Live watches end with kGone; watches and list continuations from older
  // versions fail with kGone.
  void ExpireResourceVersions();
  // Ends live watch streams normally (as the server's timeoutSeconds would).
  void CloseWatches();
  // Sends a BOOKMARK at the current resourceVersion to live watches that allow them.
  void SendBookmarks();
  void SetStatusSubresource(const Gvr& r, bool enabled);
  void SetGarbageCollection(bool enabled);

  // --- Inspection (not counted as calls) ---
  uint64_t CallCount() const;
  uint64_t CallCount(Verb v) const;
  // Writes (create/update/patch/apply/delete) so far.
  uint64_t WriteCount() const;
  std::vector<Call> Calls() const;
  // Delete calls that reached the store (after FailNext/fault hook), in order.
  std::vector<DeleteRecord> Deletes() const;
  void ClearCalls();
  size_t ActiveWatches() const;
  // Waits (real time) until at least `n` watches are live. For tests.
  bool WaitForWatches(size_t n, Nanos timeout = std::chrono::seconds(5)) const;
  std::string CurrentResourceVersion() const;
  // Stored objects of a resource (all namespaces), sorted by "ns/name".
  std::vector<Json> Objects(const Gvr& r) const;
  // The stored object or nullopt, without counting a call.
  std::optional<Json> Peek(const Gvr& r, const std::string& ns, const std::string& name) const;

 private:
  using Key = std::pair<std::string, std::string>;  // (ns, name)
  struct LogEvent {
    uint64_t rv;
    Gvr gvr;
    std::string ns;
    std::string type;
    Json object;
  };
  struct Watcher;
  struct Fault {
    int remaining;
    ErrorCode code;
    std::optional<Verb> verb;
    std::string message;
  };

  // Counts the call and applies faults. REQUIRES: mu_ held.
  std::optional<Error> BeginLocked(Call call);
  std::map<Key, Json>& Objs(const Gvr& r) { return objects_[r]; }
  bool HasStatusLocked(const Gvr& r) const;
  // Stamps a new resourceVersion, stores, logs the event. REQUIRES: mu_ held.
  Json CommitLocked(const Gvr& r, const Key& key, Json obj, const char* type);
  Result<Json> CreateLocked(const Gvr& r, std::string ns, Json obj);
  // Shared tail of Update/MergePatch/Apply: `desired` is the full new object.
  Result<Json> WriteLocked(const Gvr& r, const Key& key, Json desired, const std::string& subresource,
                           const std::string& expected_rv);
  Status DeleteLocked(const Gvr& r, const Key& key, const std::string& uid_precondition);
  // Removes the object; `last` (its final state) goes out in the DELETED event
  // and is returned with the deletion's resourceVersion.
  Json RemoveLocked(const Gvr& r, const Key& key, Json last);
  void CollectGarbageLocked(const std::string& owner_uid);
  std::string NowLocked() const;
  void AppendLogLocked(LogEvent ev);

  Clock& clock_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<Gvr, std::map<Key, Json>> objects_;  // GUARDED_BY(mu_)
  std::deque<LogEvent> log_;                    // GUARDED_BY(mu_); rv ascending
  uint64_t rv_ = 1000;                          // GUARDED_BY(mu_); last issued
  uint64_t min_rv_ = 0;                         // GUARDED_BY(mu_); older versions are Gone
  uint64_t uid_seq_ = 0;                        // GUARDED_BY(mu_)
  std::vector<Fault> faults_;                   // GUARDED_BY(mu_)
  FaultHook hook_;                              // GUARDED_BY(mu_)
  std::vector<Call> calls_;                     // GUARDED_BY(mu_)
  std::vector<DeleteRecord> deletes_;           // GUARDED_BY(mu_)
  std::map<Verb, uint64_t> counts_;             // GUARDED_BY(mu_)
  std::map<Gvr, bool> status_subresource_;      // GUARDED_BY(mu_)
  bool gc_ = true;                              // GUARDED_BY(mu_)
  std::set<Watcher*> watchers_;                 // GUARDED_BY(mu_)
  // Last applied config per (resource, ns, name, subresource, manager).
  std::map<std::tuple<Gvr, std::string, std::string, std::string, std::string>, Json> applied_;
};

}  // namespace lockstep::kube
