// Informer: a reflector (list, then watch from the list's resourceVersion)
// feeding a read-only Store, plus event handlers.
//
//  - Lists in pages, then watches; BOOKMARK events advance the resourceVersion.
//  - 410 Gone (HTTP or ERROR event) triggers a relist; on relist, objects that
//    vanished produce synthesized deletes and changed ones produce updates.
//  - Other errors back off (jittered, seeded) and resume the watch from the
//    last resourceVersion.
//  - Handlers run on the informer's thread after the store is updated. They
//    should be quick (typically: enqueue a key) and must not call Stop().
//
// Thread-safe: store(), HasSynced() and ResourceVersion() from any thread;
// AddEventHandlers() before Start(); Stop() from any thread but a handler.
//
//   Informer pods(api, gvr::kPods, {.ns = "training"});
//   pods.AddEventHandlers({.on_add = [&](const ObjectPtr& o) { queue.Add(ObjectKey(*o)); }});
//   pods.Start();
//   ... if (pods.HasSynced()) auto p = pods.store().Get("training", "worker-0");
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/kube/backoff.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/kube/store.h"

namespace lockstep::kube {

struct InformerOptions {
  std::string ns{};  // "" = all namespaces (always "" for cluster-scoped resources)
  std::string label_selector{};
  std::string field_selector{};
  int page_size = 500;              // 0 = one unpaged list
  int watch_timeout_seconds = 300;  // the server ends each watch after this
  BackoffPolicy backoff{std::chrono::milliseconds(800), std::chrono::seconds(30), 2.0, 1.0};
  // Jitter seed. Unset: RandomSeed() (differs per process and per informer,
  // so informers restarted together do not relist in step); set it in tests.
  std::optional<uint64_t> seed{};
};

struct EventHandlers {
  std::function<void(const ObjectPtr& obj)> on_add{};
  std::function<void(const ObjectPtr& old_obj, const ObjectPtr& new_obj)> on_update{};
  // Receives the object's final state (for deletes synthesized on relist: the
  // last state seen before the relist).
  std::function<void(const ObjectPtr& obj)> on_delete{};
};

class Informer {
 public:
  // REQUIRES: `api` outlives the informer.
  Informer(KubeApi& api, Gvr gvr, InformerOptions options = {});
  ~Informer();  // Stop()s
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // REQUIRES: before Start().
  void AddEventHandlers(EventHandlers handlers);
  // Starts the list/watch thread. REQUIRES: called at most once.
  void Start();
  // Ends the watch and joins the thread (returns within ~100 ms with
  // CurlKubeApi). Idempotent.
  void Stop();

  // True once the first full list is in the store and its add handlers ran.
  bool HasSynced() const { return synced_.load(); }
  const Store& store() const { return store_; }
  const Gvr& gvr() const { return gvr_; }
  // The resourceVersion the next watch resumes from.
  std::string ResourceVersion() const;
  // Completed full lists (1 after the initial sync; +1 per relist).
  uint64_t ListCount() const { return lists_.load(); }
  // The seed of the watch backoff's jitter (options.seed, or a random one).
  uint64_t backoff_seed() const { return seed_; }
  // Lists once on the calling thread: replaces the store and runs the handlers
  // (adds, updates and deletes against what the store held), then counts as
  // synced. For tests that fill stores without starting the informer.
  // REQUIRES: the informer is not started.
  Status ListOnce();

 private:
  void Run();
  Status ListAndReplace();
  // Applies one watch event. Returns false to end the watch (ERROR event).
  bool HandleEvent(const WatchEvent& ev);
  void SetResourceVersion(std::string rv);
  // Sleeps for `d` unless stopped first.
  void Pause(Nanos d);

  KubeApi& api_;
  const Gvr gvr_;
  const InformerOptions options_;
  const uint64_t seed_;
  Store store_;
  std::vector<EventHandlers> handlers_;  // fixed after Start()

  std::atomic<bool> stop_{false};
  std::atomic<bool> synced_{false};
  std::atomic<uint64_t> lists_{0};
  std::optional<Error> watch_error_;  // set by HandleEvent (informer thread only)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string resource_version_;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace lockstep::kube
