// FakeHostClock: a HostClock for tests. RealtimeNs() returns `realtime_ns`;
// Apply() records each adjustment (and adds it to realtime_ns) or fails with
// `fail` when set. Thread-compatible.
#pragma once

#include <optional>
#include <vector>

#include "lockstep/agent/ports/host_clock.h"

namespace lockstep::agent {

class FakeHostClock final : public HostClock {
 public:
  int64_t RealtimeNs() const override { return realtime_ns; }
  Status Apply(const HostClockAdjustment& adj, int64_t error_bound_ns) override {
    if (fail) return *fail;
    applied.push_back(adj);
    bounds.push_back(error_bound_ns);
    realtime_ns += adj.correction_ns;
    return Status::Ok();
  }

  int64_t realtime_ns = 1'800'000'000'000'000'000;
  std::optional<Error> fail;
  std::vector<HostClockAdjustment> applied;
  std::vector<int64_t> bounds;
};

}  // namespace lockstep::agent
