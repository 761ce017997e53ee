// WorkQueue: a de-duplicating, delaying, rate-limited queue of string keys
// (client-go's workqueue.RateLimitingInterface).
//
//  - A key is queued at most once however often it is added ("dirty" set).
//  - A key handed out by Get() is not handed out again until Done(key); adds
//    in the meantime are remembered and re-queue it at Done (one worker per key).
//  - AddAfter() parks a key until the injected Clock reaches its ready time;
//    AddRateLimited() uses the RateLimiter (default: per-key 5 ms -> 1000 s
//    exponential, max'ed with a 10 qps / burst 100 bucket).
//
// Thread-safe. Delays are computed from the Clock; with a FakeClock, tests
// Advance() and call TryGet() for deterministic results. A blocked Get()
// re-reads the clock at least every 100 ms while keys are waiting.
//
//   while (auto key = queue.Get()) {
//     bool ok = Reconcile(*key);
//     if (ok) queue.Forget(*key); else queue.AddRateLimited(*key);
//     queue.Done(*key);
//   }
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>

#include "lockstep/common/clock.h"
#include "lockstep/kube/rate_limiter.h"

namespace lockstep::kube {

class WorkQueue {
 public:
  // limiter == nullptr selects DefaultControllerRateLimiter(clock).
  // REQUIRES: `clock` outlives the queue.
  explicit WorkQueue(Clock& clock, std::unique_ptr<RateLimiter> limiter = nullptr);
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key` unless already queued. Ignored after ShutDown().
  void Add(const std::string& key);
  // Queues `key` once `delay` has passed on the clock (<= 0: now). A key
  // already waiting keeps the earlier of its two ready times.
  void AddAfter(const std::string& key, Nanos delay);
  // AddAfter(key, limiter.When(key)).
  void AddRateLimited(const std::string& key);
  // Clears the key's retry history (call after a successful reconcile).
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;

  // Blocks until a key is ready; nullopt once ShutDown() has been called
  // (keys still queued are dropped). The caller owns the key until Done(key).
  std::optional<std::string> Get();
  // Non-blocking Get(): nullopt if nothing is ready now (or shut down).
  std::optional<std::string> TryGet();
  // Marks `key` finished; re-queues it if it was added while processing.
  // REQUIRES: key came from Get()/TryGet() and Done was not yet called for it.
  void Done(const std::string& key);

  // Keys ready to be handed out (the queue-depth metric).
  size_t Len() const;
  // Keys parked by AddAfter/AddRateLimited.
  size_t WaitingLen() const;
  // Keys handed out by Get()/TryGet() and not yet Done().
  size_t ProcessingLen() const;
  // Time until the earliest parked key is ready (per the clock), if any.
  std::optional<Nanos> NextReadyIn() const;

  // Wakes all Get() callers, which return nullopt. Idempotent.
  void ShutDown();
  bool ShuttingDown() const;

  // Called with Len() whenever it changes, under the queue's lock: must be
  // quick and must not call back into the queue. REQUIRES: before use.
  void SetDepthObserver(std::function<void(size_t)> observer) { depth_observer_ = std::move(observer); }

 private:
  void AddLocked(const std::string& key);
  void PromoteDueLocked(MonoTime now);
  std::optional<std::string> PopLocked();
  void DepthChangedLocked();

  Clock& clock_;
  std::unique_ptr<RateLimiter> limiter_;
  std::function<void(size_t)> depth_observer_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;                         // GUARDED_BY(mu_)
  std::unordered_set<std::string> dirty_;                 // GUARDED_BY(mu_)
  std::unordered_set<std::string> processing_;            // GUARDED_BY(mu_)
  std::map<std::string, MonoTime> waiting_;               // GUARDED_BY(mu_)
  std::set<std::pair<MonoTime, std::string>> ready_at_;   // GUARDED_BY(mu_)
  bool shutting_down_ = false;                            // GUARDED_BY(mu_)
};

}  // namespace lockstep::kube
