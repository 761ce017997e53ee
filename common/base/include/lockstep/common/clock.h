// Clock: the one way code reads time. Injected by reference into every class
// that needs it, so tests run on simulated time (see tests/support/fake_clock.h).
// Implementations must be thread-safe.
#pragma once

#include <chrono>

namespace lockstep {

using Nanos = std::chrono::nanoseconds;
using MonoTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time for intervals, deadlines and timeouts.
  virtual MonoTime Monotonic() const = 0;
  // Wall-clock time for timestamps written to the API (leases, events).
  virtual WallTime Wall() const = 0;
};

// The process's real clocks.
class SystemClock final : public Clock {
 public:
  MonoTime Monotonic() const override { return std::chrono::steady_clock::now(); }
  WallTime Wall() const override { return std::chrono::system_clock::now(); }
  static SystemClock& Instance();
};

}  // namespace lockstep
