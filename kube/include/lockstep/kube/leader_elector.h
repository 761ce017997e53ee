// LeaderElector: leader election on a coordination.k8s.io/v1 Lease, following
// client-go's leaderelection package.
//
//  - A candidate takes the Lease when it has no holder, or when the holder's
//    record has not changed for leaseDurationSeconds as measured on *our*
//    monotonic clock from when we first saw that record (no trust in remote
//    timestamps, so clock skew is harmless).
//  - The leader renews every retry_period. Writes use the Lease's
//    resourceVersion; 409 Conflict means someone else wrote first (retry).
//  - Leadership is lost when another holder is observed, or when no renewal
//    succeeded for renew_deadline. on_stopped_leading(lost=true) fires at once;
//    the process must stop reconciling (the operator exits).
//  - Stop() releases a held Lease (holder cleared, leaseDurationSeconds 1) so a
//    successor takes over within one retry_period.
//  - Timestamps are MicroTime ("2026-11-22T07:15:38.123456Z").
//
// Thread-safe. Poll() runs one step at the clock's current time (tests drive
// it with a FakeClock); Start() runs Poll() every retry_period on a thread.
// Callbacks run on the polling thread; they may call Stop().
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "lockstep/common/clock.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::kube {

struct LeaderElectionConfig {
  std::string lease_namespace{};
  std::string lease_name{};
  std::string identity{};  // unique per process, e.g. "<pod name>_<random>"
  Nanos lease_duration = std::chrono::seconds(15);
  Nanos renew_deadline = std::chrono::seconds(10);
  Nanos retry_period = std::chrono::seconds(2);
  // REQUIRES: retry_period < renew_deadline < lease_duration.
};

struct LeaderCallbacks {
  std::function<void()> on_started_leading{};
  // lost == true: the lease was lost (stop work now, exit); false: released by Stop().
  std::function<void(bool lost)> on_stopped_leading{};
  // A different holder was observed (including "" after a release). Optional.
  std::function<void(const std::string& holder)> on_new_leader{};
};

class LeaderElector {
 public:
  // REQUIRES: api and clock outlive the elector; config valid (see above).
  LeaderElector(KubeApi& api, Clock& clock, LeaderElectionConfig config, LeaderCallbacks callbacks);
  ~LeaderElector();  // Stop()s
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // One election step: acquire (candidate) or renew (leader), and detect loss.
  // Returns IsLeader(). A no-op once leadership has ended.
  bool Poll();
  // Polls every retry_period on a thread until stopped or leadership ends.
  void Start();
  // Stops polling and releases the Lease if held. Idempotent.
  void Stop();

  // Leader now: acquired, not ended, and renewed within renew_deadline.
  bool IsLeader() const;
  // True once leadership was lost (not released). Stays true.
  bool Lost() const;
  // The last observed holder ("" if none).
  std::string Holder() const;

 private:
  struct Record {
    std::string holder{};
    int64_t duration_seconds = 0;
    std::string acquire_time{};
    std::string renew_time{};
    int64_t transitions = 0;
    bool operator==(const Record&) const = default;
  };
  enum class State { kCandidate, kLeader, kEnded };

  static Record ParseRecord(const Json& lease);
  // client-go's tryAcquireOrRenew. REQUIRES: op_mu_ held.
  bool TryAcquireOrRenew(MonoTime now, bool leading);
  Json BuildLease(const Json& base, const Record& rec) const;
  void Observe(const Json& lease, MonoTime now);
  void Release();
  void Run();

  KubeApi& api_;
  Clock& clock_;
  const LeaderElectionConfig config_;
  const LeaderCallbacks callbacks_;

  std::mutex op_mu_;            // serializes Poll() and Release() (API traffic)
  bool has_observed_ = false;   // GUARDED_BY(op_mu_)
  Json observed_lease_;         // GUARDED_BY(op_mu_)
  Record observed_;             // GUARDED_BY(op_mu_)
  MonoTime observed_time_{};    // GUARDED_BY(op_mu_)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kCandidate;  // GUARDED_BY(mu_)
  bool lost_ = false;                // GUARDED_BY(mu_)
  MonoTime last_renew_{};            // GUARDED_BY(mu_)
  std::string holder_;               // GUARDED_BY(mu_)
  bool stop_ = false;                // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace lockstep::kube
