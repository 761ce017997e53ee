#include "lockstep/fabric/congestion.h"

#include <algorithm>
#include <set>

namespace lockstep::fabric {

const char* ToString(PathTrend t) {
  switch (t) {
    case PathTrend::kNotJudged:
      return "NotJudged";
    case PathTrend::kLearning:
      return "Learning";
    case PathTrend::kSteady:
      return "Steady";
    case PathTrend::kRising:
      return "Rising";
  }
  return "unknown";
}

namespace {

// The judged and rising paths (indices into the input) crossing one link.
struct Crossing {
  std::set<size_t> judged, rising;
};

}  // namespace

CongestionReport Locate(const std::vector<PathRise>& paths, const CongestionOptions& options) {
  CongestionReport report;
  std::map<Link, Crossing> links;
  std::set<size_t> unexplained;
  for (size_t i = 0; i < paths.size(); ++i) {
    ++report.judged;
    if (paths[i].rising) {
      ++report.rising;
      unexplained.insert(i);
    }
    for (const Link& l : paths[i].links) {
      Crossing& c = links[l];
      c.judged.insert(i);
      if (paths[i].rising) c.rising.insert(i);
    }
  }
  std::map<Link, Crossing> candidates;
  for (const auto& [link, c] : links) {
    const int rising = static_cast<int>(c.rising.size());
    if (rising >= options.min_paths && rising >= options.min_share * static_cast<double>(c.judged.size())) {
      candidates.emplace(link, c);
    }
  }
  while (!candidates.empty()) {
    const Link* best = nullptr;
    int best_new = 0;
    for (const auto& [link, c] : candidates) {
      const int fresh = static_cast<int>(
          std::count_if(c.rising.begin(), c.rising.end(), [&](size_t i) { return unexplained.count(i) > 0; }));
      if (!best) {
        best = &link;
        best_new = fresh;
        continue;
      }
      const Crossing& b = candidates.at(*best);
      // Larger share, compared without division: r/j > rb/jb.
      const auto share = static_cast<int64_t>(c.rising.size()) * static_cast<int64_t>(b.judged.size());
      const auto best_share = static_cast<int64_t>(b.rising.size()) * static_cast<int64_t>(c.judged.size());
      if (fresh > best_new ||
          (fresh == best_new && (share > best_share || (share == best_share && c.judged.size() < b.judged.size())))) {
        best = &link;
        best_new = fresh;
      }
    }
    if (best_new < options.min_paths) break;
    const Crossing picked = candidates.at(*best);
    LinkCongestion flag;
    for (auto it = candidates.begin(); it != candidates.end();) {
      if (it->second.judged == picked.judged && it->second.rising == picked.rising) {
        flag.links.push_back(it->first);
        it = candidates.erase(it);
      } else {
        ++it;
      }
    }
    for (size_t i : picked.rising) {
      unexplained.erase(i);
      flag.rising_paths.push_back(paths[i].id);
    }
    std::sort(flag.rising_paths.begin(), flag.rising_paths.end());
    flag.paths = static_cast<int>(picked.judged.size());
    report.links.push_back(std::move(flag));
  }
  for (size_t i : unexplained) {
    BadPath bad;
    bad.id = paths[i].id;
    report.bad_paths.push_back(std::move(bad));
  }
  std::sort(report.bad_paths.begin(), report.bad_paths.end(),
            [](const BadPath& a, const BadPath& b) { return a.id < b.id; });
  return report;
}

bool CongestionLocator::Rising(const Baseline& b, const PathDelays& p, double slack) const {
  const auto above = [&](std::optional<Nanos> now, double base, Nanos min_rise) {
    if (!now) return false;
    const double margin = std::max(static_cast<double>(min_rise.count()), (options_.rise_ratio - 1) * base);
    return static_cast<double>(now->count()) > base + slack * margin;
  };
  return above(p.p50, b.p50, options_.min_rise) || above(p.p99, b.p99, options_.min_rise_p99) ||
         (options_.loss_rise > 0 && p.loss > b.loss + slack * options_.loss_rise);
}

CongestionReport CongestionLocator::Judge(const std::vector<PathDelays>& paths) {
  std::map<std::string, Baseline> next;
  std::map<std::string, PathTrend> trends;
  std::map<std::string, const PathDelays*> by_id;
  std::vector<PathRise> judged;
  for (const PathDelays& p : paths) {
    by_id[p.id] = &p;
    Baseline b = base_.count(p.id) ? base_[p.id] : Baseline{};
    PathTrend trend = PathTrend::kNotJudged;
    if (p.samples >= options_.min_samples && p.p50 && p.p99) {
      const double p50 = static_cast<double>(p.p50->count()), p99 = static_cast<double>(p.p99->count());
      if (b.rounds < options_.baseline_rounds) {
        b.p50 = b.rounds == 0 ? p50 : std::min(b.p50, p50);
        b.p99 = b.rounds == 0 ? p99 : std::min(b.p99, p99);
        b.loss = b.rounds == 0 ? p.loss : std::min(b.loss, p.loss);
        ++b.rounds;
        trend = PathTrend::kLearning;
      } else {
        b.rising = Rising(b, p, b.rising ? 0.5 : 1.0);
        if (!b.rising) {
          const double w = options_.baseline_weight;
          b.p50 += w * (p50 - b.p50);
          b.p99 += w * (p99 - b.p99);
          b.loss += w * (p.loss - b.loss);
        }
        trend = b.rising ? PathTrend::kRising : PathTrend::kSteady;
        judged.push_back({p.id, p.links, b.rising});
      }
    }
    trends[p.id] = trend;
    next[p.id] = b;
  }
  base_ = std::move(next);
  CongestionReport report = Locate(judged, options_);
  report.trends = std::move(trends);
  for (BadPath& bad : report.bad_paths) {
    const PathDelays& p = *by_id.at(bad.id);
    const Baseline& b = base_.at(bad.id);
    bad.p50 = p.p50;
    bad.p99 = p.p99;
    bad.loss = p.loss;
    bad.base_p50 = Nanos(static_cast<int64_t>(b.p50));
    bad.base_p99 = Nanos(static_cast<int64_t>(b.p99));
  }
  return report;
}

}  // namespace lockstep::fabric
