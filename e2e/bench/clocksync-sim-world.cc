#include "clocksync-sim-world.h"

#include <algorithm>
#include <cmath>

namespace lockstep::clocksync::sim {
namespace {

uint64_t SplitMix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = SplitMix(seed);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0]; s_[3] ^= s_[1]; s_[1] ^= s_[2]; s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Exp(double mean) { return -mean * std::log1p(-Uniform()); }

double Rng::Normal(double sigma) {
  const double u1 = 1.0 - Uniform(), u2 = Uniform();
  return sigma * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double Rng::Pareto(double scale, double alpha, double cap) {
  return std::min(cap, scale * std::pow(1.0 - Uniform(), -1.0 / alpha));
}

Profile Profile::Software() {
  Profile p;
  p.name = "sw";
  p.stamp_exp_ns = 300;       // kernel stamping latency, one-sided
  p.spike_prob = 0.01;        // 1% of stamps hit an interrupt / softirq delay
  p.spike_mean_ns = 20'000;
  p.dmin_lo_ns = 8'000;       // through two software stacks
  p.dmin_hi_ns = 20'000;
  p.asym_ns = 600;            // per-path min-delay asymmetry up to +-600 ns
  p.load_lo = 0.1;
  p.load_hi = 0.6;
  p.queue_scale_ns = 1'500;
  return p;
}

Profile Profile::Nic() {
  Profile p;
  p.name = "nic";
  p.stamp_gauss_ns = 8;       // PHC stamping jitter
  p.dmin_lo_ns = 1'500;
  p.dmin_hi_ns = 5'000;
  p.asym_ns = 20;
  p.load_lo = 0.1;
  p.load_hi = 0.6;
  p.queue_scale_ns = 1'200;   // one MTU at 10 Gb/s, heavy tail above
  return p;
}

World::World(const WorldOptions& options, const Profile& profile)
    : options_(options), profile_(profile), rng_(options.seed * 0x9E3779B97F4A7C15ull + 12345) {
  const uint32_t n = options_.nodes;
  // Clocks on a grid of 0.25 s: phase integrates a random-walk frequency.
  grid_ns_ = 0.25e9;
  const double horizon = (options_.windows + 1.5) * options_.window_ns;
  grid_points_ = static_cast<uint32_t>(std::ceil(horizon / grid_ns_)) + 2;
  phase_.resize(size_t{n} * grid_points_);
  freq_.resize(size_t{n} * grid_points_);
  const double step_sigma = options_.wander_ppb_per_sqrt_s * 1e-9 * std::sqrt(grid_ns_ * 1e-9);
  for (uint32_t i = 0; i < n; ++i) {
    double ph = rng_.Uniform(-options_.offset_ns, options_.offset_ns);
    double f = rng_.Uniform(-options_.drift, options_.drift);
    for (uint32_t k = 0; k < grid_points_; ++k) {
      phase_[size_t{i} * grid_points_ + k] = ph;
      freq_[size_t{i} * grid_points_ + k] = f;
      ph += f * grid_ns_;
      f += rng_.Normal(step_sigma);
    }
  }
  // Graph: node i picks ceil(K_i / 2) random peers; edges are undirected, so the
  // average degree is ~K.
  std::vector<uint64_t> keys;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t k = options_.k_min + rng_.Below(options_.k_max - options_.k_min + 1);
    for (uint32_t m = 0; m < (k + 1) / 2; ++m) {
      const uint32_t j = rng_.Below(n);
      if (j == i) continue;
      keys.push_back((uint64_t{std::min(i, j)} << 32) | std::max(i, j));
    }
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for (uint64_t key : keys) edges_.push_back({static_cast<NodeId>(key >> 32), static_cast<NodeId>(key)});
  for (size_t e = 0; e < edges_.size(); ++e) {
    const double base = rng_.Uniform(profile_.dmin_lo_ns, profile_.dmin_hi_ns);
    const double asym = rng_.Uniform(-profile_.asym_ns, profile_.asym_ns);
    dmin_fwd_.push_back(static_cast<float>(base + asym / 2));
    dmin_rev_.push_back(static_cast<float>(base - asym / 2));
    load_fwd_.push_back(static_cast<float>(rng_.Uniform(profile_.load_lo, profile_.load_hi)));
    load_rev_.push_back(static_cast<float>(rng_.Uniform(profile_.load_lo, profile_.load_hi)));
  }
  tx_lat_.assign(n, 0);
  rx_lat_.assign(n, 0);
  if (options_.node_asym_ns > 0) {
    for (uint32_t i = 0; i < n; ++i) {
      tx_lat_[i] = static_cast<float>(rng_.Uniform(0, options_.node_asym_ns));
      rx_lat_[i] = static_cast<float>(rng_.Uniform(0, options_.node_asym_ns));
    }
  }
}

double World::Clock(NodeId i, double t) const {
  const double pos = std::clamp(t / grid_ns_, 0.0, static_cast<double>(grid_points_ - 1));
  const size_t k = std::min<size_t>(static_cast<size_t>(pos), grid_points_ - 2);
  const size_t idx = size_t{i} * grid_points_ + k;
  return t + phase_[idx] + freq_[idx] * (t - static_cast<double>(k) * grid_ns_);
}

double World::TrueTime(NodeId i, double local) const {
  double t = local - phase_[size_t{i} * grid_points_];
  for (int it = 0; it < 3; ++it) t -= Clock(i, t) - local;  // slope ~1: converges at once
  return t;
}

double World::StampNoise() {
  double n = 0;
  if (profile_.stamp_exp_ns > 0) n += rng_.Exp(profile_.stamp_exp_ns);
  if (profile_.stamp_gauss_ns > 0) n += rng_.Normal(profile_.stamp_gauss_ns);
  if (profile_.spike_prob > 0 && rng_.Uniform() < profile_.spike_prob) n += rng_.Exp(profile_.spike_mean_ns);
  return n;
}

ProbePair World::MakePair(NodeId src, NodeId dst, size_t e, bool forward, double t, double* arrival) {
  const double d = forward ? dmin_fwd_[e] : dmin_rev_[e];
  const double load = forward ? load_fwd_[e] : load_rev_[e];
  double q0 = 0, q1 = 0;
  if (rng_.Uniform() < load) {
    q0 = rng_.Pareto(profile_.queue_scale_ns, profile_.queue_alpha, profile_.queue_cap_ns);
    q1 = rng_.Uniform() < profile_.together
             ? q0 : rng_.Pareto(profile_.queue_scale_ns, profile_.queue_alpha, profile_.queue_cap_ns);
  }
  const double s = options_.spacing_ns;
  const double a0 = t + d + q0;
  const double a1 = std::max(t + s + d + q1, a0 + 100);  // FIFO: the second arrives after the first
  *arrival = a1;
  // Stamps: the sender stamps before the wire (earlier), the receiver after (later).
  const double tx_lat = tx_lat_[src], rx_lat = rx_lat_[dst];
  ProbePair p;
  p.src = src;
  p.dst = dst;
  p.tx0_ns = std::llround(Clock(src, t) - tx_lat - StampNoise());
  p.rx0_ns = std::llround(Clock(dst, a0) + rx_lat + StampNoise());
  p.tx1_ns = std::llround(Clock(src, t + s) - tx_lat - StampNoise());
  p.rx1_ns = std::llround(Clock(dst, a1) + rx_lat + StampNoise());
  return p;
}

}  // namespace lockstep::clocksync::sim
