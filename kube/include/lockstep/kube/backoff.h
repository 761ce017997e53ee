// Backoff: jittered exponential backoff. Values in, a duration out; the random
// source is a seeded generator so tests are deterministic.
// Thread-compatible (one owner; no internal locking).
//
//   Backoff b({.initial = 100ms, .max = 30s}, /*seed=*/42);
//   wait(b.Next());   // ~100ms, ~200ms, ~400ms ... capped at 30s (+ jitter)
//   b.Reset();        // after a success
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

#include "lockstep/common/clock.h"

namespace lockstep::kube {

struct BackoffPolicy {
  Nanos initial = std::chrono::milliseconds(100);
  Nanos max = std::chrono::seconds(30);
  double multiplier = 2.0;
  // Each delay is increased by a uniform random fraction in [0, jitter).
  double jitter = 0.2;
};

// The delay before retry `attempt` (0-based) given a uniform sample u in [0,1):
// min(initial * multiplier^attempt, max) * (1 + jitter * u). Pure.
Nanos BackoffDelay(const BackoffPolicy& p, int attempt, double u);

// A seed for jitter that differs between processes (and between calls):
// std::random_device mixed with the process id, the time and a counter, so
// that clients restarted together do not retry in lockstep. Thread-safe.
uint64_t RandomSeed();

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy = {}, uint64_t seed = 1) : policy_(policy), rng_(seed) {}

  // The next delay; each call grows the exponent.
  Nanos Next();
  void Reset() { attempt_ = 0; }
  int attempts() const { return attempt_; }
  const BackoffPolicy& policy() const { return policy_; }

 private:
  BackoffPolicy policy_;
  std::mt19937_64 rng_;
  int attempt_ = 0;
};

}  // namespace lockstep::kube
