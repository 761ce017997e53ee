// Synthetic clocks and probes for the clocksync tests. Deterministic: every
// generator takes a seed. Header-only, test-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "lockstep/clocksync/types.h"

namespace lockstep::clocksync::testing {

// c_i(t) = t + theta_i + rho_i * t  (t: true time, ns).
struct TrueClock {
  double theta = 0;
  double rho = 0;
  double At(double t) const { return t + theta + rho * t; }
};

struct Link {
  double d_fwd = 5000, d_rev = 5000;  // minimum one-way delays a->b, b->a (ns)
  double q_prob_fwd = 0, q_prob_rev = 0;  // probability a probe is queued
  double q_mean_fwd = 0, q_mean_rev = 0;  // mean exponential queueing (ns)
};

using Edge = std::pair<NodeId, NodeId>;  // a < b

// A random graph where every node picks `k` random peers (deduplicated, a < b).
inline std::vector<Edge> RandomGraph(uint32_t n, uint32_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> pick(0, n - 1);
  std::set<Edge> edges;
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t m = 0; m < k; ++m) {
      uint32_t j = pick(rng);
      if (j == i) continue;
      edges.insert({std::min(i, j), std::max(i, j)});
    }
  }
  return {edges.begin(), edges.end()};
}

inline std::vector<TrueClock> RandomClocks(uint32_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> off(-100e6, 100e6), drift(-50e-6, 50e-6);
  std::vector<TrueClock> c(n);
  for (auto& x : c) x = {off(rng), drift(rng)};
  return c;
}

// One probing round on edge a-b at true time t: a sends a coded pair to b; b
// answers with its own pair `hold` ns after receiving.
class ProbeGen {
 public:
  explicit ProbeGen(uint64_t seed) : rng_(seed) {}

  double spacing_ns = 4000;
  double hold_ns = 30000;
  double stamp_jitter_ns = 0;  // one-sided exponential stamping latency, per stamp
  double queue_together = 0;   // P(a queued pair's two probes see the same queue)

  template <typename Sink>
  void Round(NodeId a, NodeId b, const TrueClock& ca, const TrueClock& cb, const Link& l,
             double t, Sink&& sink) {
    const double t_arrive = Pair(a, b, ca, cb, l.d_fwd, l.q_prob_fwd, l.q_mean_fwd, t, sink);
    Pair(b, a, cb, ca, l.d_rev, l.q_prob_rev, l.q_mean_rev, t_arrive + hold_ns, sink);
  }

 private:
  double U() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  double Stamp() {
    return stamp_jitter_ns > 0 ? std::exponential_distribution<double>(1.0 / stamp_jitter_ns)(rng_) : 0;
  }

  template <typename Sink>
  double Pair(NodeId src, NodeId dst, const TrueClock& cs, const TrueClock& cd, double d,
              double qp, double qm, double t, Sink&& sink) {
    // Back-to-back probes meet the same queue state: with probability qp the
    // pair is queued; then the two probes see the same burst (probability
    // queue_together: looks pure but raised) or different ones (impure).
    double q0 = 0, q1 = 0;
    if (qp > 0 && qm > 0 && U() < qp) {
      std::exponential_distribution<double> q(1.0 / qm);
      q0 = q(rng_);
      q1 = U() < queue_together ? q0 : q(rng_);
    }
    const double t0 = t, t1 = t + spacing_ns;
    const double a0 = t0 + d + q0, a1 = std::max(t1 + d + q1, a0 + 100);
    ProbePair p;
    p.src = src;
    p.dst = dst;
    p.tx0_ns = std::llround(cs.At(t0) - Stamp());
    p.rx0_ns = std::llround(cd.At(a0) + Stamp());
    p.tx1_ns = std::llround(cs.At(t1) - Stamp());
    p.rx1_ns = std::llround(cd.At(a1) + Stamp());
    sink(p);
    return a1;
  }

  std::mt19937_64 rng_;
};

}  // namespace lockstep::clocksync::testing
