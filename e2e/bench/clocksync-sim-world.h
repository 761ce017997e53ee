// The simulated world of clocksync-sim: true time, node clocks with offset, drift
// and random-walk wander, a random probe graph, and a network that delays and
// queues probes and timestamps them with software-like or NIC-like noise.
// Everything is seeded and deterministic. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/clocksync/types.h"

namespace lockstep::clocksync::sim {

// xoshiro256**: fast, seeded, good enough for noise.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>((Next() >> 32) * n >> 32); }
  double Exp(double mean);
  double Normal(double sigma);
  double Pareto(double scale, double alpha, double cap);

 private:
  uint64_t s_[4];
};

struct Profile {
  std::string name;
  double stamp_exp_ns = 0;     // one-sided stamping latency per stamp (software)
  double stamp_gauss_ns = 0;   // two-sided stamp jitter (NIC PHC)
  double spike_prob = 0;       // rare long stamping delays (interrupt latency)
  double spike_mean_ns = 0;
  double dmin_lo_ns = 0, dmin_hi_ns = 0;  // per-edge base one-way delay
  double asym_ns = 0;          // per-edge min-delay asymmetry d_fwd - d_rev ~ U(-asym, asym)
  double load_lo = 0, load_hi = 0;  // per direction: P(a pair meets a queue)
  double queue_scale_ns = 0, queue_alpha = 1.5, queue_cap_ns = 2e6;  // Pareto queueing
  double together = 0.5;       // P(both probes of a queued pair wait the same)
  static Profile Software();
  static Profile Nic();
};

struct WorldOptions {
  uint32_t nodes = 1000;
  uint32_t k_min = 10, k_max = 20;   // peers per node
  double window_ns = 2e9;
  uint32_t windows = 3;
  uint32_t rounds = 10;              // probing rounds per edge per window (each: a pair each way)
  double offset_ns = 100e6;          // |theta| <= 100 ms
  double drift = 50e-6;              // |rho| <= 50 ppm
  double wander_ppb_per_sqrt_s = 2;  // frequency random walk
  double node_asym_ns = 0;           // per-node egress-ingress stamping asymmetry (undetectable)
  double spacing_ns = 5000;          // coded pair spacing
  uint64_t seed = 1;
};

class World {
 public:
  World(const WorldOptions& options, const Profile& profile);

  const std::vector<std::pair<NodeId, NodeId>>& edges() const { return edges_; }
  uint32_t nodes() const { return options_.nodes; }

  // Local clock reading of node i at true time t (ns), exact (not rounded).
  double Clock(NodeId i, double t) const;
  // True time at which node i's clock reads `local` (inverse of Clock).
  double TrueTime(NodeId i, double local) const;

  // Generates window w's probes (true time [w*W, (w+1)*W)) edge by edge.
  template <typename Sink>
  void Window(uint32_t w, Sink&& sink);
  size_t PairsPerWindow() const { return edges_.size() * options_.rounds * 2; }

 private:
  ProbePair MakePair(NodeId src, NodeId dst, size_t edge, bool forward, double t, double* arrival);
  double StampNoise();

  WorldOptions options_;
  Profile profile_;
  Rng rng_;
  double grid_ns_;
  uint32_t grid_points_;
  std::vector<double> phase_, freq_;  // [node * grid_points_ + k]
  std::vector<std::pair<NodeId, NodeId>> edges_;
  std::vector<float> dmin_fwd_, dmin_rev_, load_fwd_, load_rev_;
  std::vector<float> tx_lat_, rx_lat_;
};

template <typename Sink>
void World::Window(uint32_t w, Sink&& sink) {
  const double t0 = w * options_.window_ns;
  for (size_t e = 0; e < edges_.size(); ++e) {
    const auto [a, b] = edges_[e];
    for (uint32_t r = 0; r < options_.rounds; ++r) {
      const double t = rng_.Uniform(t0, t0 + options_.window_ns - 1e6);
      const bool a_first = rng_.Uniform() < 0.5;
      double arrival = 0;
      const ProbePair p1 = MakePair(a_first ? a : b, a_first ? b : a, e, a_first, t, &arrival);
      const double hold = rng_.Uniform(20e3, 60e3);  // responder turnaround
      const ProbePair p2 = MakePair(a_first ? b : a, a_first ? a : b, e, !a_first, arrival + hold, &arrival);
      sink(p1);
      sink(p2);
    }
  }
}

}  // namespace lockstep::clocksync::sim
