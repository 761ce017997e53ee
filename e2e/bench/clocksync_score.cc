#include "clocksync_score.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace lockstep::bench {

bool Scored(const std::string& state) { return state == "LOCKED" || state == "HOLDOVER"; }

std::optional<double> Percentile(std::vector<double> xs, double p) {
  if (xs.empty()) return std::nullopt;
  std::sort(xs.begin(), xs.end());
  double k = static_cast<double>(xs.size() - 1) * p / 100.0;
  auto lo = static_cast<size_t>(k);
  size_t hi = std::min(lo + 1, xs.size() - 1);
  return xs[lo] + (xs[hi] - xs[lo]) * (k - static_cast<double>(lo));
}

double Median(std::vector<double> xs) { return Percentile(std::move(xs), 50).value_or(0.0); }

std::optional<double> Mean(const std::vector<double>& xs) {
  if (xs.empty()) return std::nullopt;
  double s = 0;
  for (double x : xs) s += x;
  return s / static_cast<double>(xs.size());
}

double RoundTo(double v, int nd) {
  double m = std::pow(10.0, nd);
  return std::round(v * m) / m;
}

std::optional<double> RoundTo(std::optional<double> v, int nd) {
  if (!v) return std::nullopt;
  return RoundTo(*v, nd);
}

double FabricRate(const std::vector<Round>& rounds) {
  std::map<int, std::vector<const Sample*>> per;  // node -> its scored samples in order
  for (const auto& rnd : rounds) {
    for (const auto& [i, s] : rnd) {
      if (Scored(s.state)) per[i].push_back(&s);
    }
  }
  std::vector<double> slopes;
  for (const auto& [i, pts] : per) {
    for (size_t k = 1; k < pts.size(); ++k) {
      const Sample& p = *pts[k - 1];
      const Sample& q = *pts[k];
      if (q.base_ns > p.base_ns) slopes.push_back((q.err_ns - p.err_ns) / (q.base_ns - p.base_ns));
    }
  }
  return Median(std::move(slopes));
}

namespace {

// The scored samples of one round carried to the round's median base instant.
struct Carried {
  std::vector<int> nodes;  // ascending
  std::vector<double> err, bound;
  double spread = 0;
};

Carried CarryRound(const Round& rnd, double slope) {
  Carried c;
  std::vector<double> bases;
  for (const auto& [i, s] : rnd) {
    if (Scored(s.state)) bases.push_back(s.base_ns);
  }
  if (bases.empty()) return c;
  double ref = Median(bases);
  c.spread = *std::max_element(bases.begin(), bases.end()) - *std::min_element(bases.begin(), bases.end());
  for (const auto& [i, s] : rnd) {
    if (!Scored(s.state)) continue;
    c.nodes.push_back(i);
    c.err.push_back(s.err_ns + slope * (ref - s.base_ns));
    c.bound.push_back(s.bound_ns);
  }
  return c;
}

}  // namespace

PairScore ScorePairs(const std::vector<Round>& rounds) {
  PairScore r;
  r.fabric_rate = FabricRate(rounds);
  std::vector<double> errs, ratios, spreads, bounds;
  double worst = -1;
  for (const auto& rnd : rounds) {
    for (const auto& [i, s] : rnd) {
      if (Scored(s.state)) bounds.push_back(s.bound_ns);
    }
    Carried c = CarryRound(rnd, r.fabric_rate);
    if (c.nodes.size() < 2) continue;
    spreads.push_back(c.spread);
    for (size_t x = 0; x < c.nodes.size(); ++x) {
      for (size_t y = x + 1; y < c.nodes.size(); ++y) {
        double d = std::abs(c.err[x] - c.err[y]);
        double sum = c.bound[x] + c.bound[y];
        errs.push_back(d);
        ratios.push_back(d / std::max(sum, 1e-9));
        if (d > sum) ++r.violations;
        if (d > worst) {
          worst = d;
          r.worst = std::make_pair(c.nodes[x], c.nodes[y]);
        }
      }
    }
  }
  r.pairs = errs.size();
  r.p50_ns = Percentile(errs, 50);
  r.p99_ns = Percentile(errs, 99);
  if (!errs.empty()) r.max_ns = *std::max_element(errs.begin(), errs.end());
  r.over_bound_p99 = Percentile(ratios, 99);
  if (!ratios.empty()) r.over_bound_max = *std::max_element(ratios.begin(), ratios.end());
  r.bound_p50_ns = Percentile(bounds, 50);
  r.spread_p50_ns = Percentile(spreads, 50);
  return r;
}

namespace {

bool NameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool NameChar(char c) { return NameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }
bool Space(char c) { return c == ' ' || c == '\t'; }

// One "name{labels} value [timestamp]" line; false if it is not one.
bool ParseMetricLine(std::string_view line, std::string& key, double& value) {
  size_t p = 0;
  if (line.empty() || !NameStart(line[0])) return false;
  while (p < line.size() && NameChar(line[p])) ++p;
  if (p < line.size() && line[p] == '{') {
    size_t close = line.find('}', p);
    if (close == std::string_view::npos) return false;
    p = close + 1;
  }
  key = std::string(line.substr(0, p));
  size_t v = p;
  while (v < line.size() && Space(line[v])) ++v;
  if (v == p || v == line.size()) return false;
  size_t end = v;
  while (end < line.size() && !Space(line[end])) ++end;
  std::string token(line.substr(v, end - v));
  char* stop = nullptr;
  value = std::strtod(token.c_str(), &stop);
  return stop == token.c_str() + token.size();
}

}  // namespace

std::map<std::string, double> ParseMetrics(std::string_view text) {
  std::map<std::string, double> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string key;
    double value = 0;
    if (!line.empty() && line[0] != '#' && ParseMetricLine(line, key, value)) out[key] = value;
    start = nl + 1;
  }
  return out;
}

double MetricSum(const std::map<std::string, double>& metrics, const std::string& name) {
  double s = 0;
  for (const auto& [k, v] : metrics) {
    if (k == name || k.rfind(name + "{", 0) == 0) s += v;
  }
  return s;
}

}  // namespace lockstep::bench
