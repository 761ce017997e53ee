#include "lockstep/agent/net/virtual_clock.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace lockstep::agent {
namespace {

constexpr size_t kMaxSegments = 36'000;  // one hour of 100 ms steps

bool ParseInt(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

}  // namespace

Result<VirtualClockParams> ParseVirtualClockSpec(const std::string& spec) {
  VirtualClockParams p;
  std::stringstream ss(spec);
  std::string item;
  const std::string usage = " (expected --virtual-clock offset_ns=N,drift_ppb=N,wander=N,seed=N)";
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) return InvalidArgument("--virtual-clock: \"" + item + "\" is not key=value" + usage);
    std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    int64_t v = 0;
    if (key == "offset_ns") {
      if (!ParseInt(val, v) || std::llabs(v) > VirtualClock::kMaxOffsetNs) {
        return InvalidArgument("--virtual-clock: offset_ns must be an integer between -100000000 and 100000000 (got \"" +
                               val + "\")");
      }
      p.offset_ns = v;
    } else if (key == "drift_ppb") {
      if (!ParseInt(val, v) || std::llabs(v) > VirtualClock::kMaxDriftPpb) {
        return InvalidArgument("--virtual-clock: drift_ppb must be an integer between -50000 and 50000 (got \"" + val +
                               "\")");
      }
      p.drift_ppb = v;
    } else if (key == "wander") {
      char* end = nullptr;
      double w = std::strtod(val.c_str(), &end);
      if (val.empty() || *end != '\0' || !(w >= 0 && w <= 10000)) {
        return InvalidArgument("--virtual-clock: wander must be a number of ppb/sqrt(s) between 0 and 10000 (got \"" +
                               val + "\")");
      }
      p.wander_ppb = w;
    } else if (key == "seed") {
      if (!ParseInt(val, v) || v < 0) {
        return InvalidArgument("--virtual-clock: seed must be a non-negative integer (got \"" + val + "\")");
      }
      p.seed = static_cast<uint64_t>(v);
    } else {
      return InvalidArgument("--virtual-clock: unknown key \"" + key + "\" (allowed: offset_ns, drift_ppb, wander, seed)");
    }
  }
  return p;
}

VirtualClock::VirtualClock(const NodeClock& base, const VirtualClockParams& params)
    : base_(base), params_(params), b0_(base.NowNs()), rng_(params.seed) {
  walk_.push_back({0.0, 0.0});
}

double VirtualClock::Gaussian() const {
  // Box-Muller on mt19937_64 output: identical on every standard library.
  constexpr double kTwoPi = 6.283185307179586;
  double u1 = (static_cast<double>(rng_() >> 11) + 1.0) * 0x1.0p-53;
  double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

const VirtualClock::Segment& VirtualClock::SegmentFor(int64_t base_ns, int64_t& seg_start) const {
  int64_t rel = base_ns - b0_;
  int64_t idx = rel >= 0 ? rel / kStepNs : -((-rel + kStepNs - 1) / kStepNs);
  if (idx < first_index_) idx = first_index_;  // before the kept history: extend the oldest segment
  const double sigma = params_.wander_ppb * std::sqrt(static_cast<double>(kStepNs) / 1e9);
  const double bound = static_cast<double>(kMaxDriftPpb);
  if (int64_t last = first_index_ + static_cast<int64_t>(walk_.size()) - 1; idx - last > int64_t{kMaxSegments}) {
    // A far jump (hours without a reading): continue the last segment linearly
    // instead of generating every step in between.
    Segment s = walk_.back();
    s.wander_ns += s.freq_ppb * 1e-9 * static_cast<double>((idx - last) * kStepNs);
    walk_.assign(1, s);
    first_index_ = idx;
  }
  while (idx >= first_index_ + static_cast<int64_t>(walk_.size())) {
    const Segment& last = walk_.back();
    double freq = last.freq_ppb + (sigma > 0 ? sigma * Gaussian() : 0.0);
    double total = static_cast<double>(params_.drift_ppb) + freq;
    if (total > bound) freq -= 2 * (total - bound);
    if (total < -bound) freq += 2 * (-bound - total);
    walk_.push_back({last.wander_ns + last.freq_ppb * 1e-9 * static_cast<double>(kStepNs), freq});
    if (walk_.size() > kMaxSegments) {
      walk_.pop_front();
      ++first_index_;
    }
  }
  seg_start = b0_ + idx * kStepNs;
  return walk_[static_cast<size_t>(idx - first_index_)];
}

int64_t VirtualClock::Transform(int64_t base_ns) const {
  std::lock_guard lock(mu_);
  double wander = 0;
  if (params_.wander_ppb > 0) {
    int64_t start = 0;
    const Segment& s = SegmentFor(base_ns, start);
    wander = s.wander_ns + s.freq_ppb * 1e-9 * static_cast<double>(base_ns - start);
  }
  double drift = static_cast<double>(params_.drift_ppb) * 1e-9 * static_cast<double>(base_ns - b0_);
  return base_ns + params_.offset_ns + static_cast<int64_t>(std::llround(drift + wander));
}

double VirtualClock::TrueDriftPpb(int64_t base_ns) const {
  std::lock_guard lock(mu_);
  double freq = 0;
  if (params_.wander_ppb > 0) {
    int64_t start = 0;
    freq = SegmentFor(base_ns, start).freq_ppb;
  }
  return static_cast<double>(params_.drift_ppb) + freq;
}

}  // namespace lockstep::agent
