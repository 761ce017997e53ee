#include "lockstep/kube/backoff.h"

#include <algorithm>
#include <cmath>

namespace lockstep::kube {

Nanos BackoffDelay(const BackoffPolicy& p, int attempt, double u) {
  double base = static_cast<double>(p.initial.count()) * std::pow(p.multiplier, std::max(attempt, 0));
  double capped = std::min(base, static_cast<double>(p.max.count()));
  double jittered = capped * (1.0 + p.jitter * std::clamp(u, 0.0, 1.0));
  return Nanos(static_cast<Nanos::rep>(jittered));
}

Nanos Backoff::Next() {
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  Nanos d = BackoffDelay(policy_, attempt_, u);
  if (attempt_ < 1000) ++attempt_;
  return d;
}

}  // namespace lockstep::kube
