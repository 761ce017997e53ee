// Fakes of the migration coordinator's ports (lockstep/coordinator/ports.h):
// a fencer and a spare launcher that record calls, a process probe whose
// gone pids the test sets, a state store in memory. Thread-safe (the
// coordinator's tick thread may call them).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "lockstep/coordinator/ports.h"

namespace lockstep::coordinator {

class FakeFencer final : public Fencer {
 public:
  Status Fence(const MemberRef& m) override {
    std::lock_guard l(mu_);
    fenced_.push_back(m.member);
    return Status::Ok();
  }
  std::vector<std::string> fenced() const { std::lock_guard l(mu_); return fenced_; }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> fenced_;
};

class FakeLauncher final : public SpareLauncher {
 public:
  Result<SpareHandle> Launch() override {
    std::lock_guard l(mu_);
    int pid = next_pid_++;
    launched_.push_back(pid);
    return SpareHandle{pid, ""};
  }
  std::vector<Exited> Reap() override {
    std::lock_guard l(mu_);
    return std::exchange(exited_, {});
  }
  void Exit(int pid, std::string how) { std::lock_guard l(mu_); exited_.push_back({SpareHandle{pid, ""}, std::move(how)}); }
  std::vector<int> launched() const { std::lock_guard l(mu_); return launched_; }

 private:
  mutable std::mutex mu_;
  int next_pid_ = 7000;
  std::vector<int> launched_;
  std::vector<Exited> exited_;
};

// Like the pidfd probe, Wait() returns at once when a pid was killed since the
// previous Wait(). Each Wait() is counted, so a test can block until the tick
// thread has run a whole tick after a Kill() (AwaitWaits(Kill(pid) + 2)).
class FakeProbe final : public ProcessProbe {
 public:
  std::optional<std::string> Gone(const MemberRef& m) override {
    std::lock_guard l(mu_);
    if (gone_.count(m.pid)) return std::string("is gone");
    return std::nullopt;
  }
  void Wait(std::chrono::milliseconds timeout) override {
    std::unique_lock l(mu_);
    ++waits_;
    cv_.notify_all();
    cv_.wait_for(l, timeout, [this] { return killed_; });
    killed_ = false;
  }
  // Returns how many Wait() calls had begun when the pid went.
  int Kill(int pid) {
    std::lock_guard l(mu_);
    gone_.insert(pid);
    killed_ = true;
    cv_.notify_all();
    return waits_;
  }
  // Blocks until `n` Wait() calls have begun (false after `limit`: a hung tick thread).
  bool AwaitWaits(int n, std::chrono::milliseconds limit = std::chrono::minutes(1)) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, limit, [&] { return waits_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<int> gone_;
  bool killed_ = false;  // since the last Wait() returned
  int waits_ = 0;
};

class MemoryStateStore final : public StateStore {
 public:
  Status Save(const std::string& text) override {
    std::unique_lock l(mu_);
    if (hold_) {  // a hanging store (an API server that does not answer)
      ++held_;
      cv_.notify_all();
      cv_.wait(l, [&] { return !hold_; });
      --held_;
    }
    if (fail_) return Unavailable("disk full");
    text_ = text;
    history_.push_back(text);
    ++saves_;
    return Status::Ok();
  }
  // Hold(true): every Save() blocks until Hold(false).
  void Hold(bool h) {
    {
      std::lock_guard l(mu_);
      hold_ = h;
    }
    cv_.notify_all();
  }
  // Blocks until a Save() is held, or `limit` passes; true if one is.
  bool AwaitHeld(std::chrono::milliseconds limit) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, limit, [&] { return held_ > 0; });
  }
  // Every text saved, in order.
  std::vector<std::string> history() const {
    std::lock_guard l(mu_);
    return history_;
  }
  Result<std::optional<std::string>> Load() override {
    std::lock_guard l(mu_);
    return text_;
  }
  std::optional<std::string> text() const { std::lock_guard l(mu_); return text_; }
  int saves() const { std::lock_guard l(mu_); return saves_; }
  void Fail(bool f) { std::lock_guard l(mu_); fail_ = f; }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> text_;
  std::vector<std::string> history_;
  int saves_ = 0;
  int held_ = 0;
  bool fail_ = false;
  bool hold_ = false;
};

}  // namespace lockstep::coordinator
