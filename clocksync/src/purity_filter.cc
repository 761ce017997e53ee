#include "lockstep/clocksync/purity_filter.h"

#include <algorithm>
#include <cmath>

namespace lockstep::clocksync {
namespace {

constexpr double kHalfNormalQ25 = 0.31863936;  // Phi^-1(0.625)
constexpr double kHalfNormalQ50 = 0.67448975;  // Phi^-1(0.75)
constexpr double kCoreCut = 4.0;               // core = |delta| <= 4 * sigma0

double Quantile(std::vector<float>& v, size_t begin, size_t end, double q) {
  const size_t k = begin + static_cast<size_t>(q * static_cast<double>(end - begin - 1));
  std::nth_element(v.begin() + static_cast<std::ptrdiff_t>(begin),
                   v.begin() + static_cast<std::ptrdiff_t>(k),
                   v.begin() + static_cast<std::ptrdiff_t>(end));
  return v[k];
}

}  // namespace

PurityFilter::PurityFilter(const PurityOptions& options)
    : options_(options), guard_ns_(options.initial_guard_ns) {
  if (options_.history == 0) options_.history = 1;
}

void PurityFilter::Observe(int64_t delta_ns) {
  const float a = static_cast<float>(std::llabs(delta_ns));
  if (ring_.size() < options_.history) {
    ring_.push_back(a);
  } else {
    ring_[head_] = a;
    head_ = (head_ + 1) % options_.history;
  }
  ++observed_;
}

void PurityFilter::Relearn() {
  if (ring_.size() < std::max<uint32_t>(options_.min_samples, 2)) {
    guard_ns_ = options_.initial_guard_ns;
    sigma_ns_ = 0;
    return;
  }
  std::vector<float> v = ring_;
  const double sigma0 = std::max(Quantile(v, 0, v.size(), 0.25) / kHalfNormalQ25, 1e-3);
  // Partition the presumed-pure core to the front, then take its median.
  const auto core_end = std::partition(v.begin(), v.end(), [&](float x) {
    return x <= kCoreCut * sigma0;
  });
  const size_t n_core = static_cast<size_t>(core_end - v.begin());
  double sigma = sigma0;
  if (n_core >= 2) sigma = Quantile(v, 0, n_core, 0.5) / kHalfNormalQ50;
  sigma_ns_ = sigma;
  guard_ns_ = std::clamp(options_.multiplier * sigma, options_.min_guard_ns,
                         options_.max_guard_ns);
}

bool PurityFilter::IsPure(int64_t delta_ns) const {
  return static_cast<double>(std::llabs(delta_ns)) <= guard_ns_;
}

}  // namespace lockstep::clocksync
