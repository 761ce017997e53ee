#include "lockstep/clocksync/edge_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace lockstep::clocksync {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kSupportTolNs = 1e-6;
constexpr double kUnknownDriftSigma = 1e-4;  // 100 ppm: "no idea"
// The line rests on ~3 support points chosen with a free slope, so its error is
// larger than one envelope's: calibrated on exponential queueing (n = 10..80).
constexpr double kLineFactor = 1.8;

struct Pt {
  double t, y;
};

double Cross(const Pt& o, const Pt& a, const Pt& b) {
  return (a.t - o.t) * (b.y - o.y) - (a.y - o.y) * (b.t - o.t);
}
double Slope(const Pt& a, const Pt& b) { return (b.y - a.y) / (b.t - a.t); }

// Hull of the active points of `pts` (sorted by t, then by y ascending for the
// lower hull and descending for the upper one), as indices into pts.
void Hull(const std::vector<Pt>& pts, const std::vector<uint8_t>& active, bool lower,
          std::vector<int>& hull) {
  hull.clear();
  bool have_t = false;
  double last_t = 0;
  for (int k = 0; k < static_cast<int>(pts.size()); ++k) {
    if (!active[k]) continue;
    const Pt& p = pts[k];
    if (have_t && p.t == last_t) continue;  // same t: the first one is the extreme
    have_t = true;
    last_t = p.t;
    while (hull.size() >= 2) {
      const double c = Cross(pts[hull[hull.size() - 2]], pts[hull.back()], p);
      if (lower ? c <= 0 : c >= 0) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(k);
  }
}

struct Line {
  double beta = 0, alpha = 0, margin = 0;
  bool identified = false;
};

// Maximizes (L(beta) - U(beta)) / 2 over beta by walking both hulls' breakpoints
// in increasing slope order. F: lower hull of the forward points, R: upper hull
// of the reverse points, both in increasing t.
Line SolveHulls(const std::vector<Pt>& f, const std::vector<Pt>& r, double hint) {
  Line line;
  const int m = static_cast<int>(f.size()) - 1;
  int i = 0;
  int j = static_cast<int>(r.size()) - 1;
  double lo = -kInf;
  bool found = false;
  for (;;) {
    // On (lo, hi) the optimal vertices are f[i] and r[j]; g'(beta) = t_r - t_f.
    const double gp = r[j].t - f[i].t;
    const double nf = i < m ? Slope(f[i], f[i + 1]) : kInf;
    const double nr = j > 0 ? Slope(r[j - 1], r[j]) : kInf;
    const double hi = std::min(nf, nr);
    if (gp < 0) {
      if (lo > -kInf) { line.beta = lo; found = true; }
      break;
    }
    if (gp == 0) {
      if (lo > -kInf && hi < kInf) { line.beta = 0.5 * (lo + hi); found = true; }
      else if (lo > -kInf) { line.beta = lo; found = true; }
      else if (hi < kInf) { line.beta = hi; found = true; }
      break;
    }
    if (hi == kInf) break;  // margin grows without bound: drift not identified
    if (nf == hi) ++i;
    if (nr == hi) --j;
    lo = hi;
  }
  line.identified = found;
  if (!found) line.beta = hint;
  double lmin = kInf, umax = -kInf;
  for (const Pt& p : f) lmin = std::min(lmin, p.y - line.beta * p.t);
  for (const Pt& p : r) umax = std::max(umax, p.y - line.beta * p.t);
  line.alpha = 0.5 * (lmin + umax);
  line.margin = 0.5 * (lmin - umax);
  return line;
}

// Reusable working state of one fit (kept thread_local to avoid allocations).
class Fitter {
 public:
  void Reset(std::span<const EdgePoint> fwd, std::span<const EdgePoint> rev, double t0, double y0) {
    Sorted(fwd, t0, y0, true, f_);
    Sorted(rev, t0, y0, false, r_);
    fa_.assign(f_.size(), 1);
    ra_.assign(r_.size(), 1);
  }

  Line Fit(double hint) {
    Hull(f_, fa_, true, fh_);
    Hull(r_, ra_, false, rh_);
    fv_.clear();
    rv_.clear();
    for (int k : fh_) fv_.push_back(f_[k]);
    for (int k : rh_) rv_.push_back(r_[k]);
    return SolveHulls(fv_, rv_, hint);
  }

  // Hull vertices of one side that touch the margin boundary of `line`: at most
  // two (the hull has no collinear vertices), returned in out[0..count).
  int Supports(const Line& line, bool forward, int out[2]) const {
    int count = 0;
    const auto& hull = forward ? fh_ : rh_;
    const auto& pts = forward ? f_ : r_;
    const double bound = forward ? line.alpha + line.margin : line.alpha - line.margin;
    for (int k : hull) {
      const double v = pts[k].y - line.beta * pts[k].t;
      if (std::abs(v - bound) <= kSupportTolNs * (1 + std::abs(bound)) && count < 2) out[count++] = k;
    }
    return count;
  }

  // Envelope sigma of one side: the j-th smallest residual over j (the mean
  // spacing of the lowest order statistics), or -1 if too sparse.
  double EnvelopeSigma(const Line& line, bool forward) const {
    const auto& pts = forward ? f_ : r_;
    const auto& act = forward ? fa_ : ra_;
    constexpr size_t kJ = 4;
    double low[kJ + 1];  // the kJ + 1 smallest residuals, ascending
    size_t have = 0, n = 0;
    for (size_t k = 0; k < pts.size(); ++k) {
      if (!act[k]) continue;
      ++n;
      const double v = pts[k].y - line.beta * pts[k].t - line.alpha;
      double r = forward ? v - line.margin : -v - line.margin;
      if (have == kJ + 1 && r >= low[kJ]) continue;
      size_t pos = have < kJ + 1 ? have++ : kJ;
      while (pos > 0 && low[pos - 1] > r) { low[pos] = low[pos - 1]; --pos; }
      low[pos] = r;
    }
    if (n < 2) return -1;
    const size_t j = std::min(kJ, n - 1);
    return std::max(0.0, low[j]) / static_cast<double>(j);
  }

  // Smallest residual (distance from the side's margin boundary) among the two
  // nearest active neighbours in t on each side of point k. A support resting on
  // the floor has neighbours near the floor; an outlier below it does not. Only
  // isolated supports are worth the refit that measures their exact rise.
  double Isolation(const Line& line, bool forward, int k) const {
    const auto& pts = forward ? f_ : r_;
    const auto& act = forward ? fa_ : ra_;
    const double bound = forward ? line.alpha + line.margin : line.alpha - line.margin;
    double best = kInf;
    for (int dir : {-1, 1}) {
      int found = 0;
      for (int j = k + dir; j >= 0 && j < static_cast<int>(pts.size()) && found < 2; j += dir) {
        if (!act[j]) continue;
        const double v = pts[j].y - line.beta * pts[j].t - bound;
        best = std::min(best, forward ? v : -v);
        ++found;
      }
    }
    return best;
  }

  std::vector<uint8_t>& active(bool forward) { return forward ? fa_ : ra_; }
  double TMin() const { return Extreme(true); }
  double TMax() const { return Extreme(false); }

 private:
  static void Sorted(std::span<const EdgePoint> in, double t0, double y0, bool lower,
                     std::vector<Pt>& v) {
    v.clear();
    for (const EdgePoint& p : in) v.push_back({p.t_ns - t0, p.y_ns - y0});
    std::sort(v.begin(), v.end(), [lower](const Pt& a, const Pt& b) {
      if (a.t != b.t) return a.t < b.t;
      return lower ? a.y < b.y : a.y > b.y;
    });
  }
  double Extreme(bool min) const {
    double v = min ? kInf : -kInf;
    for (size_t k = 0; k < f_.size(); ++k)
      if (fa_[k]) v = min ? std::min(v, f_[k].t) : std::max(v, f_[k].t);
    for (size_t k = 0; k < r_.size(); ++k)
      if (ra_[k]) v = min ? std::min(v, r_[k].t) : std::max(v, r_[k].t);
    return v;
  }

  std::vector<Pt> f_, r_;
  std::vector<uint8_t> fa_, ra_;
  std::vector<int> fh_, rh_;
  std::vector<Pt> fv_, rv_;
};

}  // namespace

Result<EdgeFitResult> FitEdge(std::span<const EdgePoint> forward,
                              std::span<const EdgePoint> reverse,
                              const EdgeFitOptions& options) {
  const size_t min_pts = std::max<uint32_t>(options.min_points_per_side, 1);
  if (forward.size() < min_pts || reverse.size() < min_pts) {
    return InvalidArgument("FitEdge: need at least " + std::to_string(min_pts) +
                           " points per side (got " + std::to_string(forward.size()) +
                           " forward, " + std::to_string(reverse.size()) + " reverse)");
  }
  // Work in coordinates centred on the data so products stay well inside double
  // precision whatever the clocks' epochs.
  double tmin = kInf, tmax = -kInf;
  for (const auto& p : forward) { tmin = std::min(tmin, p.t_ns); tmax = std::max(tmax, p.t_ns); }
  for (const auto& p : reverse) { tmin = std::min(tmin, p.t_ns); tmax = std::max(tmax, p.t_ns); }
  const double t0 = std::floor(0.5 * (tmin + tmax));
  const double y0 = forward[0].y_ns;
  thread_local Fitter fitter;
  fitter.Reset(forward, reverse, t0, y0);
  const double hint = options.drift_hint;
  Line line = fitter.Fit(hint);

  EdgeFitResult out;
  const size_t n_side[2] = {forward.size(), reverse.size()};
  size_t trimmed[2] = {0, 0};
  const size_t keep = std::max<size_t>(min_pts, 2);
  while (options.outlier_rise_ns > 0 && line.identified) {
    double best_rise = 0;
    int best_side = -1, best_k = -1;
    for (int side = 0; side < 2; ++side) {
      const bool fwd = side == 0;
      const size_t max_trim =
          static_cast<size_t>(options.max_trim_fraction * static_cast<double>(n_side[side]));
      if (trimmed[side] >= max_trim || n_side[side] - trimmed[side] <= keep) continue;
      int support[2];
      const int n_support = fitter.Supports(line, fwd, support);
      for (int si = 0; si < n_support; ++si) {
        const int k = support[si];
        if (fitter.Isolation(line, fwd, k) <= 0.5 * options.outlier_rise_ns) continue;
        fitter.active(fwd)[k] = 0;
        const Line alt = fitter.Fit(hint);
        fitter.active(fwd)[k] = 1;
        const double rise = 2 * (alt.margin - line.margin);
        if (alt.identified && rise > best_rise) { best_rise = rise; best_side = side; best_k = k; }
      }
    }
    if (best_side < 0 || best_rise <= options.outlier_rise_ns) break;
    fitter.active(best_side == 0)[best_k] = 0;
    ++trimmed[best_side];
    line = fitter.Fit(hint);
  }

  out.drift = line.beta;
  out.drift_identified = line.identified;
  out.margin_ns = line.margin;
  out.fwd_used = static_cast<uint32_t>(n_side[0] - trimmed[0]);
  out.rev_used = static_cast<uint32_t>(n_side[1] - trimmed[1]);
  out.fwd_trimmed = static_cast<uint32_t>(trimmed[0]);
  out.rev_trimmed = static_cast<uint32_t>(trimmed[1]);

  double ef = fitter.EnvelopeSigma(line, true);
  double er = fitter.EnvelopeSigma(line, false);
  if (ef < 0) ef = options.sigma_prior_ns;
  if (er < 0) er = options.sigma_prior_ns;
  const double sigma_c = std::sqrt(0.25 * kLineFactor * kLineFactor * (ef * ef + er * er) +
                                   options.sigma_floor_ns * options.sigma_floor_ns);
  const double span = fitter.TMax() - fitter.TMin();
  out.t_span_ns = span;
  out.t_center_ns = t0 + 0.5 * (fitter.TMax() + fitter.TMin());
  out.center_sigma_ns = sigma_c;
  out.drift_sigma = (line.identified && span > 0) ? 2.0 * std::sqrt(2.0) * sigma_c / span
                                                  : kUnknownDriftSigma;
  // Line value at t = 0 in caller coordinates (t0, y0 undone).
  out.offset_ns = y0 + line.alpha + line.beta * (0.0 - t0);
  const double lever = out.t_center_ns;  // distance from the data centre to t = 0
  out.offset_sigma_ns = std::sqrt(sigma_c * sigma_c + std::pow(out.drift_sigma * lever, 2));
  return out;
}

}  // namespace lockstep::clocksync
