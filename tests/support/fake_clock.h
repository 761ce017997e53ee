// FakeClock: simulated time for tests. Advance() moves both clocks. Thread-safe.
#pragma once

#include <mutex>

#include "lockstep/common/clock.h"

namespace lockstep {

class FakeClock final : public Clock {
 public:
  MonoTime Monotonic() const override { std::lock_guard l(mu_); return mono_; }
  WallTime Wall() const override { std::lock_guard l(mu_); return wall_; }
  void Advance(Nanos d) { std::lock_guard l(mu_); mono_ += d; wall_ += d; }

 private:
  mutable std::mutex mu_;
  MonoTime mono_{std::chrono::hours(1)};
  WallTime wall_{std::chrono::seconds(1'800'000'000)};
};

}  // namespace lockstep
