#include "lockstep/kube/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace lockstep::kube {

Nanos ItemExponentialRateLimiter::When(const std::string& key) {
  int n;
  {
    std::lock_guard l(mu_);
    n = failures_[key]++;
  }
  double d = static_cast<double>(base_.count()) * std::pow(2.0, std::min(n, 1000));
  if (d >= static_cast<double>(max_.count())) return max_;
  return Nanos(static_cast<Nanos::rep>(d));
}

void ItemExponentialRateLimiter::Forget(const std::string& key) {
  std::lock_guard l(mu_);
  failures_.erase(key);
}

int ItemExponentialRateLimiter::NumRequeues(const std::string& key) const {
  std::lock_guard l(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

TokenBucketRateLimiter::TokenBucketRateLimiter(Clock& clock, double qps, int burst)
    : clock_(clock), qps_(qps), burst_(burst), tokens_(burst), last_(clock.Monotonic()) {}

Nanos TokenBucketRateLimiter::When(const std::string&) {
  std::lock_guard l(mu_);
  MonoTime now = clock_.Monotonic();
  if (now > last_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return Nanos(0);
  return std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(-tokens_ / qps_));
}

Nanos MaxOfRateLimiter::When(const std::string& key) {
  Nanos d(0);
  for (auto& l : limiters_) d = std::max(d, l->When(key));
  return d;
}

void MaxOfRateLimiter::Forget(const std::string& key) {
  for (auto& l : limiters_) l->Forget(key);
}

int MaxOfRateLimiter::NumRequeues(const std::string& key) const {
  int n = 0;
  for (const auto& l : limiters_) n = std::max(n, l->NumRequeues(key));
  return n;
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock& clock) {
  std::vector<std::unique_ptr<RateLimiter>> v;
  v.push_back(std::make_unique<ItemExponentialRateLimiter>());
  v.push_back(std::make_unique<TokenBucketRateLimiter>(clock));
  return std::make_unique<MaxOfRateLimiter>(std::move(v));
}

}  // namespace lockstep::kube
