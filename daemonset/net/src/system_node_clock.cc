#include "lockstep/agent/net/system_node_clock.h"

#include <time.h>

namespace lockstep::agent {
namespace {

int64_t Read(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int64_t SystemNodeClock::RawNs() { return Read(CLOCK_MONOTONIC_RAW); }
int64_t SystemNodeClock::RealtimeNs() { return Read(CLOCK_REALTIME); }

std::pair<int64_t, int64_t> SystemNodeClock::SamplePair() {
  std::pair<int64_t, int64_t> best{0, 0};
  int64_t best_width = -1;
  for (int i = 0; i < 5; ++i) {
    int64_t r1 = RawNs();
    int64_t rt = RealtimeNs();
    int64_t r2 = RawNs();
    if (best_width < 0 || r2 - r1 < best_width) {
      best_width = r2 - r1;
      best = {rt, r1 + (r2 - r1) / 2};
    }
  }
  return best;
}

SystemNodeClock::SystemNodeClock(bool shared_anchor) {
  auto [rt, raw] = SamplePair();
  anchor_ = rt - raw;
  if (shared_anchor) anchor_ -= anchor_ % 1'000'000'000;  // both are positive
  mapper_.AddSample(rt, raw);
}

int64_t SystemNodeClock::FromKernelRealtime(int64_t realtime_ns) const {
  std::lock_guard lock(mu_);
  if (RawNs() - mapper_.newest_raw() > 1'000'000) {
    auto [rt, raw] = SamplePair();
    mapper_.AddSample(rt, raw);
  }
  return mapper_.ToRaw(realtime_ns) + anchor_;
}

}  // namespace lockstep::agent
