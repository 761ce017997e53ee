#include "lockstep/kube/backoff.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>

namespace lockstep::kube {

Nanos BackoffDelay(const BackoffPolicy& p, int attempt, double u) {
  double base = static_cast<double>(p.initial.count()) * std::pow(p.multiplier, std::max(attempt, 0));
  double capped = std::min(base, static_cast<double>(p.max.count()));
  double jittered = capped * (1.0 + p.jitter * std::clamp(u, 0.0, 1.0));
  return Nanos(static_cast<Nanos::rep>(jittered));
}

uint64_t RandomSeed() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  s ^= static_cast<uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ULL;
  s ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  s += counter.fetch_add(1) * 0xBF58476D1CE4E5B9ULL;
  // splitmix64 finaliser: spreads nearby inputs apart.
  s = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9ULL;
  s = (s ^ (s >> 27)) * 0x94D049BB133111EBULL;
  return s ^ (s >> 31);
}

Nanos Backoff::Next() {
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  Nanos d = BackoffDelay(policy_, attempt_, u);
  if (attempt_ < 1000) ++attempt_;
  return d;
}

}  // namespace lockstep::kube
