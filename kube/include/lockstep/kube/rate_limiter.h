// Per-key retry delays for the WorkQueue (client-go's workqueue rate limiters).
// All implementations are thread-safe; time comes from an injected Clock.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/common/clock.h"

namespace lockstep::kube {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // Records a retry of `key` and returns how long to wait before it.
  virtual Nanos When(const std::string& key) = 0;
  // Clears `key`'s history (after a success).
  virtual void Forget(const std::string& key) = 0;
  // Retries recorded for `key` since the last Forget.
  virtual int NumRequeues(const std::string& key) const = 0;
};

// base * 2^failures, capped at max (defaults: 5 ms -> 1000 s).
class ItemExponentialRateLimiter final : public RateLimiter {
 public:
  explicit ItemExponentialRateLimiter(Nanos base = std::chrono::milliseconds(5),
                                      Nanos max = std::chrono::seconds(1000))
      : base_(base), max_(max) {}
  Nanos When(const std::string& key) override;
  void Forget(const std::string& key) override;
  int NumRequeues(const std::string& key) const override;

 private:
  const Nanos base_, max_;
  mutable std::mutex mu_;
  std::map<std::string, int> failures_;  // GUARDED_BY(mu_)
};

// An overall token bucket (defaults: 10 qps, burst 100) shared by all keys:
// each When() reserves a token and returns how long until it is available.
class TokenBucketRateLimiter final : public RateLimiter {
 public:
  // REQUIRES: qps > 0, burst >= 1, `clock` outlives this object.
  TokenBucketRateLimiter(Clock& clock, double qps = 10, int burst = 100);
  Nanos When(const std::string& key) override;
  void Forget(const std::string&) override {}
  int NumRequeues(const std::string&) const override { return 0; }

 private:
  Clock& clock_;
  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;    // GUARDED_BY(mu_); negative = reservations outstanding
  MonoTime last_;    // GUARDED_BY(mu_)
};

// The longest delay of several limiters; Forget/NumRequeues fan out (max).
class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
      : limiters_(std::move(limiters)) {}
  Nanos When(const std::string& key) override;
  void Forget(const std::string& key) override;
  int NumRequeues(const std::string& key) const override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

// MaxOf(per-item exponential 5 ms -> 1000 s, token bucket 10 qps / 100 burst),
// as in client-go's DefaultControllerRateLimiter.
std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock& clock);

}  // namespace lockstep::kube
