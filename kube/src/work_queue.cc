#include "lockstep/kube/work_queue.h"

#include <algorithm>

namespace lockstep::kube {
namespace {
constexpr Nanos kMaxClockRecheck = std::chrono::milliseconds(100);
}  // namespace

WorkQueue::WorkQueue(Clock& clock, std::unique_ptr<RateLimiter> limiter)
    : clock_(clock), limiter_(limiter ? std::move(limiter) : DefaultControllerRateLimiter(clock)) {}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard l(mu_);
  AddLocked(key);
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || dirty_.count(key) != 0) return;
  dirty_.insert(key);
  if (processing_.count(key) != 0) return;  // re-queued by Done()
  queue_.push_back(key);
  DepthChangedLocked();
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, Nanos delay) {
  std::lock_guard l(mu_);
  if (shutting_down_) return;
  if (delay <= Nanos(0)) {
    AddLocked(key);
    return;
  }
  MonoTime ready = clock_.Monotonic() + delay;
  auto [it, inserted] = waiting_.try_emplace(key, ready);
  if (!inserted) {
    if (it->second <= ready) return;
    ready_at_.erase({it->second, key});
    it->second = ready;
  }
  ready_at_.insert({ready, key});
  cv_.notify_all();  // a waiter may need to shorten its wait
}

void WorkQueue::AddRateLimited(const std::string& key) { AddAfter(key, limiter_->When(key)); }

void WorkQueue::Forget(const std::string& key) { limiter_->Forget(key); }

int WorkQueue::NumRequeues(const std::string& key) const { return limiter_->NumRequeues(key); }

void WorkQueue::PromoteDueLocked(MonoTime now) {
  while (!ready_at_.empty() && ready_at_.begin()->first <= now) {
    std::string key = ready_at_.begin()->second;
    ready_at_.erase(ready_at_.begin());
    waiting_.erase(key);
    AddLocked(key);
  }
}

std::optional<std::string> WorkQueue::PopLocked() {
  if (queue_.empty()) return std::nullopt;
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  DepthChangedLocked();
  return key;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock l(mu_);
  while (!shutting_down_) {
    PromoteDueLocked(clock_.Monotonic());
    if (auto key = PopLocked()) return key;
    if (ready_at_.empty()) {
      cv_.wait(l);
    } else {
      Nanos d = ready_at_.begin()->first - clock_.Monotonic();
      cv_.wait_for(l, std::clamp(d, Nanos(0), kMaxClockRecheck));
    }
  }
  return std::nullopt;
}

std::optional<std::string> WorkQueue::TryGet() {
  std::lock_guard l(mu_);
  if (shutting_down_) return std::nullopt;
  PromoteDueLocked(clock_.Monotonic());
  return PopLocked();
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard l(mu_);
  processing_.erase(key);
  if (dirty_.count(key) != 0 && !shutting_down_) {
    queue_.push_back(key);
    DepthChangedLocked();
    cv_.notify_one();
  }
}

size_t WorkQueue::Len() const {
  std::lock_guard l(mu_);
  return queue_.size();
}

size_t WorkQueue::ProcessingLen() const {
  std::lock_guard l(mu_);
  return processing_.size();
}

size_t WorkQueue::WaitingLen() const {
  std::lock_guard l(mu_);
  return waiting_.size();
}

std::optional<Nanos> WorkQueue::NextReadyIn() const {
  std::lock_guard l(mu_);
  if (ready_at_.empty()) return std::nullopt;
  return std::max(Nanos(0), Nanos(ready_at_.begin()->first - clock_.Monotonic()));
}

void WorkQueue::ShutDown() {
  {
    std::lock_guard l(mu_);
    shutting_down_ = true;
  }
  cv_.notify_all();
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard l(mu_);
  return shutting_down_;
}

void WorkQueue::DepthChangedLocked() {
  if (depth_observer_) depth_observer_(queue_.size());
}

}  // namespace lockstep::kube
