#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "lockstep/clocksync/edge_fit.h"

namespace lockstep::clocksync {
namespace {

struct Truth {
  double offset = 123456.0;  // ns at t = 0
  double drift = 20e-6;
  double d_fwd = 5000, d_rev = 5000;
};

// n points per side over [-2 s, 0], with optional one-sided exponential queueing.
void Make(const Truth& tr, int n, double q_mean, uint64_t seed, std::vector<EdgePoint>& fwd,
          std::vector<EdgePoint>& rev) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> when(-2e9, 0);
  auto q = [&] { return q_mean > 0 ? std::exponential_distribution<double>(1 / q_mean)(rng) : 0.0; };
  for (int i = 0; i < n; ++i) {
    const double tf = q_mean > 0 ? when(rng) : -2e9 + 2e9 * i / (n - 1);
    fwd.push_back({tf, tr.offset + tr.drift * tf + tr.d_fwd + q()});
    const double tr_ = q_mean > 0 ? when(rng) : -2e9 + 2e9 * (i + 0.5) / n;
    rev.push_back({tr_, tr.offset + tr.drift * tr_ - tr.d_rev - q()});
  }
}

TEST_CASE("max-margin fit recovers offset and drift exactly from noiseless data", "[clocksync]") {
  Truth tr;
  std::vector<EdgePoint> fwd, rev;
  Make(tr, 20, 0, 0, fwd, rev);
  Result<EdgeFitResult> fit = FitEdge(fwd, rev);
  REQUIRE(fit.ok());
  CHECK(fit->drift_identified);
  CHECK(fit->offset_ns == Approx(tr.offset).margin(1e-3));
  CHECK(fit->drift == Approx(tr.drift).margin(1e-12));
  CHECK(fit->margin_ns == Approx(5000).margin(1e-3));
}

TEST_CASE("max-margin fit is within tolerance under one-sided exponential queueing", "[clocksync]") {
  // Worst case for an envelope: every probe is queued (exponential, mean 5 us).
  Truth tr;
  double sq = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<EdgePoint> fwd, rev;
    Make(tr, 40, 5000, seed, fwd, rev);
    Result<EdgeFitResult> fit = FitEdge(fwd, rev);
    REQUIRE(fit.ok());
    const double err = fit->offset_ns - tr.offset;
    INFO("seed " << seed << " err " << err << " sigma " << fit->offset_sigma_ns);
    sq += err * err;
    CHECK(std::abs(err) < 4 * fit->offset_sigma_ns);  // the reported sigma is honest
    CHECK(std::abs(fit->drift - tr.drift) < 4 * fit->drift_sigma);
    CHECK(fit->margin_ns <= 5000 + 1000);
  }
  // Envelope error ~ q_mean / n per side: a few hundred ns at the window's end.
  CHECK(std::sqrt(sq / 20) < 450);
}

TEST_CASE("max-margin fit trims a few bad points below the floor", "[clocksync]") {
  Truth tr;
  std::vector<EdgePoint> fwd, rev;
  Make(tr, 40, 2000, 7, fwd, rev);
  fwd[5].y_ns -= 50'000;  // timestamps gone wrong: below the physical floor
  fwd[30].y_ns -= 30'000;
  rev[12].y_ns += 40'000;

  Result<EdgeFitResult> naive = FitEdge(fwd, rev, {.outlier_rise_ns = 0});
  REQUIRE(naive.ok());
  CHECK(std::abs(naive->offset_ns - tr.offset) > 5000);

  Result<EdgeFitResult> robust = FitEdge(fwd, rev, {.outlier_rise_ns = 2000});
  REQUIRE(robust.ok());
  CHECK(robust->fwd_trimmed == 2);
  CHECK(robust->rev_trimmed == 1);
  CHECK(std::abs(robust->offset_ns - tr.offset) < 400);
  CHECK(std::abs(robust->drift - tr.drift) < 1e-6);
}

TEST_CASE("trimming leaves clean data alone", "[clocksync]") {
  Truth tr;
  std::vector<EdgePoint> fwd, rev;
  Make(tr, 40, 2000, 8, fwd, rev);
  Result<EdgeFitResult> fit = FitEdge(fwd, rev, {.outlier_rise_ns = 2000});
  REQUIRE(fit.ok());
  CHECK(fit->fwd_trimmed + fit->rev_trimmed == 0);
}

TEST_CASE("an asymmetric minimum delay biases the edge fit by half the asymmetry", "[clocksync]") {
  Truth tr;
  tr.d_fwd = 6000;
  tr.d_rev = 4000;
  std::vector<EdgePoint> fwd, rev;
  Make(tr, 20, 0, 0, fwd, rev);
  Result<EdgeFitResult> fit = FitEdge(fwd, rev);
  REQUIRE(fit.ok());
  CHECK(fit->offset_ns == Approx(tr.offset + 1000).margin(1e-3));
  CHECK(fit->margin_ns == Approx(5000).margin(1e-3));
}

TEST_CASE("fit falls back to the drift hint when the data cannot fix a slope", "[clocksync]") {
  // All forward points before all reverse points: the margin grows without bound
  // as the slope tilts, so no drift is identifiable.
  std::vector<EdgePoint> fwd{{-2e9, 1000}, {-1.9e9, 1000}};
  std::vector<EdgePoint> rev{{-1e8, -1000}, {0, -1000}};
  Result<EdgeFitResult> fit = FitEdge(fwd, rev, {.drift_hint = 3e-6});
  REQUIRE(fit.ok());
  CHECK_FALSE(fit->drift_identified);
  CHECK(fit->drift == 3e-6);
}

TEST_CASE("fit needs points on both sides", "[clocksync]") {
  std::vector<EdgePoint> fwd{{0, 1000}, {1, 1000}};
  std::vector<EdgePoint> rev{{0, -1000}};
  Result<EdgeFitResult> fit = FitEdge(fwd, rev);
  REQUIRE_FALSE(fit.ok());
  CHECK(fit.code() == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::clocksync
