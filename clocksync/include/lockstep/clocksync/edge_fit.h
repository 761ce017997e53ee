// FitEdge: offset and drift between two clocks from one window of one-way probes,
// as the maximum-margin line between two point sets (Huygens, NSDI 2018).
//
// For an edge a-b, with t on a's clock:
//   forward  (a->b) points y = rx_b - tx_a  lie ON OR ABOVE  offset(t) + d_ab
//   reverse  (b->a) points y = tx_b - rx_a  lie ON OR BELOW  offset(t) - d_ba
// where offset(t) = (c_b - c_a)(t) is a line (the clock model is linear over a
// window) and queueing only ever moves points away from the line. The estimate
// is the line that maximizes the vertical margin m between the lower envelope of
// the forward points and the upper envelope of the reverse points:
//   max m  s.t.  y_f >= alpha + beta t + m,  y_r <= alpha + beta t - m.
// It is solved exactly: with L(beta) = min_f (y - beta t) (concave, its kinks
// are the lower-hull slopes) and U(beta) = max_r (y - beta t) (convex), the
// margin is (L - U) / 2, a concave piecewise-linear function of beta maximized at
// a hull breakpoint; a merge walk over both hulls finds it. O(n log n).
//
// The line is exact when d_ab == d_ba; an asymmetry biases it by
// (d_ab - d_ba) / 2, which no single edge can see (the network solve can, for
// per-edge asymmetry; see network_solver.h).
//
// Outliers below the floor (a bad timestamp) would become support points: a
// support whose removal raises its envelope by more than `outlier_rise_ns` is
// trimmed, at most max_trim_fraction of a side.
//
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <span>

#include "lockstep/common/result.h"

namespace lockstep::clocksync {

struct EdgePoint {
  double t_ns = 0;  // a's clock, relative to the caller's reference instant
  double y_ns = 0;  // forward: rx_b - tx_a; reverse: tx_b - rx_a
};

struct EdgeFitOptions {
  uint32_t min_points_per_side = 2;
  double outlier_rise_ns = 0;      // 0 disables trimming
  double max_trim_fraction = 0.1;  // of a side's points
  double sigma_floor_ns = 1.0;     // added in quadrature to the offset sigma
  double sigma_prior_ns = 1000.0;  // envelope sigma when a side is too sparse to tell
  double drift_hint = 0;           // slope to use when the data cannot fix one
};

struct EdgeFitResult {
  double offset_ns = 0;  // line value at t = 0 (the reference instant)
  double drift = 0;      // line slope: d(c_b - c_a)/dt_a
  double margin_ns = 0;  // half the gap between envelopes (<= min one-way delay)
  bool drift_identified = false;  // false: drift == drift_hint
  // Statistical uncertainty from how sharply the envelopes are defined (the
  // spacing of the lowest residuals): sigma of the offset at t = 0 and of drift.
  double offset_sigma_ns = 0;
  double drift_sigma = 0;
  double t_center_ns = 0;  // middle of the data's time span
  double center_sigma_ns = 0;  // sigma of the line's value at t_center_ns
  double t_span_ns = 0;
  uint32_t fwd_used = 0, rev_used = 0;
  uint32_t fwd_trimmed = 0, rev_trimmed = 0;
};

// Fits one edge. Errors: InvalidArgument if a side has fewer than
// min_points_per_side points.
Result<EdgeFitResult> FitEdge(std::span<const EdgePoint> forward,
                              std::span<const EdgePoint> reverse,
                              const EdgeFitOptions& options = {});

}  // namespace lockstep::clocksync
