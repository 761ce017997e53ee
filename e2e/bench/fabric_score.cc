#include "fabric_score.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

namespace lockstep::bench::fabric {
namespace {

using nlohmann::json;

constexpr double kInterval = 0.010;    // bulk-stream's interval
constexpr double kFlowing = 0.10;      // "flowing": at least 10% of the pre-fault rate
constexpr int kFlowWindow = 5;         // flowing: a 50 ms window at >= 10%; again: two in a row
constexpr double kFullSpeed = 0.80;    // full speed: a 300 ms window at >= 80%
constexpr int kFullWindow = 30;
constexpr int kDipWindow = 10;         // the dip is the worst 100 ms window
constexpr double kPreWindow = 3.0;     // seconds before the fault that define "normal"
constexpr double kFaultReach = 1.0;    // the fault's own stall starts within this long after it

template <typename F>
void ForEachJsonLine(const std::string& text, F f) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) f(j);
  }
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double Round1(double v) { return std::round(v * 10) / 10; }

nlohmann::ordered_json OrNull(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

void ParseLoopLog(const std::string& text, LoopLog& into) {
  ForEachJsonLine(text, [&](const json& j) {
    const std::string ev = j.value("event", "");
    if (ev == "step") {
      into.steps.push_back({j.value("rank", 0), j.value("step", 0), j.value("t", 0.0), j.value("step_ms", 0.0)});
    } else if (ev == "error") {
      into.errors.push_back({j.value("rank", 0), j.value("t", 0.0), j.value("error", "")});
    } else if (ev == "end") {
      ++into.ranks_ended;
    }
  });
}

std::vector<Interval> ParseStreamLog(const std::string& text) {
  std::vector<Interval> out;
  ForEachJsonLine(text, [&](const json& j) { out.push_back({j.value("t", 0.0), j.value("bytes", 0LL)}); });
  return out;
}

Score ScoreArm(const LoopLog& loop, const std::vector<Interval>& stream, const Window& w) {
  Score s;
  // ---- the training loop (rank 0's steps: the all-reduce couples the ranks)
  std::vector<double> times, pre_ms;
  for (const auto& st : loop.steps) {
    if (st.rank != 0) continue;
    times.push_back(st.t);
    if (st.t < w.fault && st.t >= w.fault - kPreWindow) pre_ms.push_back(st.step_ms);
  }
  std::sort(times.begin(), times.end());
  s.pre_step_ms = Median(pre_ms);
  double first_error = 0;
  size_t errors = 0;
  for (const auto& e : loop.errors) {
    if (e.t > w.end) continue;  // stopping the run, not the fault
    ++errors;
    if (first_error == 0 || e.t < first_error) {
      first_error = e.t;
      s.error = "rank " + std::to_string(e.rank) + ": " + e.error;
    }
  }
  // Gaps between step completions that reach past the fault; the last gap
  // runs to the end of observation (or the error that ended the loop).
  const double stop = first_error > 0 ? std::min(first_error, w.end) : w.end;
  double prev = 0, stall = 0;
  long long after = 0;
  for (double t : times) {
    if (t > w.end) break;
    if (prev > 0 && t > w.fault) stall = std::max(stall, t - prev);
    if (t > w.fault) ++after;
    prev = t;
  }
  if (prev > 0) stall = std::max(stall, stop - prev);
  s.max_step_stall_ms = Round1(stall * 1000);
  // Per fault: from it to the next one (the last: to the end).
  std::vector<double> faults = w.faults.empty() ? std::vector<double>{w.fault} : w.faults;
  std::sort(faults.begin(), faults.end());
  const auto fault_index = [&](double t) {  // the fault whose share t falls in; -1 before the first
    const auto it = std::upper_bound(faults.begin(), faults.end(), t);
    return int(it - faults.begin()) - 1;
  };
  for (double f : faults) s.per_fault.push_back({f, 0, 0});
  {
    double p = 0;
    for (double t : times) {
      if (t > w.end) break;
      if (p > 0) {
        const int k = fault_index(t);
        if (k >= 0 && t > faults[size_t(k)]) {
          auto& pf = s.per_fault[size_t(k)];
          pf.max_step_stall_ms = std::max(pf.max_step_stall_ms, Round1((t - p) * 1000));
        }
      }
      p = t;
    }
    if (p > 0 && stop > faults.front()) {
      const int k = fault_index(stop);
      auto& pf = s.per_fault[size_t(std::max(0, k))];
      pf.max_step_stall_ms = std::max(pf.max_step_stall_ms, Round1((stop - p) * 1000));
    }
  }
  if (s.pre_step_ms > 0) {
    const double expected = (w.end - w.fault) / (s.pre_step_ms / 1000);
    s.lost_steps = std::max(0LL, static_cast<long long>(std::llround(expected)) - after);
  }
  s.hung = stall >= w.hang_s;
  // Survived: no rank failed and the loop was stepping at the end of
  // observation (its last step within max(2 s, 20 steps) of the end). How
  // long it stalled on the way is max_step_stall_ms, not a threshold.
  const double tail = prev > 0 ? stop - prev : w.end - w.fault;
  s.stalled_at_end = tail > std::max(2.0, 20 * s.pre_step_ms / 1000);
  s.survived = errors == 0 && !s.hung && after > 0 && !s.stalled_at_end;

  // ---- the bulk stream
  double pre_bytes = 0;
  int pre_n = 0;
  for (const auto& iv : stream) {
    if (iv.t <= w.fault && iv.t > w.fault - kPreWindow) {
      pre_bytes += double(iv.bytes);
      ++pre_n;
    }
  }
  if (pre_n == 0 || pre_bytes <= 0) return s;
  const double per = pre_bytes / pre_n;  // bytes per interval, normally
  s.pre_mbps = Round1(per * 8 / kInterval / 1e6);
  std::vector<Interval> post;
  for (const auto& iv : stream) {
    if (iv.t > w.fault && iv.t <= w.end) post.push_back(iv);
  }
  // TCP through tbf on a busy machine is bursty at 10 ms: judge windows.
  const auto mean = [&](size_t i, int n) {
    double sum = 0;
    for (size_t k = i; k < i + size_t(n) && k < post.size(); ++k) sum += double(post[k].bytes);
    return sum / n;
  };
  const auto flowing = [&](size_t i) { return mean(i, kFlowWindow) >= kFlowing * per; };
  const size_t last = post.size() >= size_t(kFullWindow) ? post.size() - size_t(kFullWindow) : 0;
  // The stall the fault caused starts within kFaultReach of it: an empty
  // 10 ms interval (a 50 ms window can hide a short gap when the data SACKed
  // behind the hole arrives in one burst after it) or a window below 10%.
  // Later dips count in stream_stalled_ms, not in failover_ms.
  size_t stall_at = post.size();
  for (size_t i = 0; i < last; ++i) {
    const bool low = !flowing(i);
    if (low) s.stream_stalled_ms += kInterval * 1000;
    if (low) {
      const int k = fault_index(post[i].t - kInterval);
      s.per_fault[size_t(std::max(0, k))].stream_stalled_ms += kInterval * 1000;
    }
    if (stall_at == post.size() && post[i].t - w.fault <= kFaultReach && (low || post[i].bytes == 0)) stall_at = i;
    if (low) s.stream_stalled = true;
  }
  s.stream_stalled_ms = Round1(s.stream_stalled_ms);
  for (auto& pf : s.per_fault) pf.stream_stalled_ms = Round1(pf.stream_stalled_ms);
  const auto since_fault = [&](size_t i) { return Round1(std::max(0.0, post[i].t - kInterval - w.fault) * 1000); };
  if (stall_at == post.size()) {
    s.failover_ms = 0.0;
  } else {
    for (size_t i = stall_at; i + kFlowWindow < last; ++i) {
      if (post[i].bytes > 0 && flowing(i) && flowing(i + kFlowWindow)) {  // 100 ms of traffic
        s.failover_ms = since_fault(i);
        break;
      }
    }
  }
  double worst = 1e18;
  for (size_t i = 0; i + kDipWindow <= post.size(); ++i) worst = std::min(worst, mean(i, kDipWindow));
  if (worst < 1e18) s.dip_pct = Round1(std::clamp(100 * (1 - worst / per), 0.0, 100.0));
  for (size_t i = stall_at < post.size() ? stall_at : 0; i + kFullWindow <= post.size(); ++i) {
    if (post[i].bytes > 0 && mean(i, kFullWindow) >= kFullSpeed * per) {
      s.recover_full_speed_ms = since_fault(i);
      break;
    }
  }
  return s;
}

std::optional<LinkChange> ParseLinkChange(const std::string& text) {
  const auto at = text.find("(changed at ");
  if (at == std::string::npos) return std::nullopt;
  const auto after = text.find(", after ", at);
  if (after == std::string::npos) return std::nullopt;
  LinkChange c;
  c.at = std::atof(text.c_str() + at + 12);
  c.after = std::atof(text.c_str() + after + 8);
  if (c.after <= 0 || c.at < c.after) return std::nullopt;
  return c;
}

nlohmann::ordered_json ToJson(const Score& s) {
  using oj = nlohmann::ordered_json;
  return {{"survived", s.survived},
          {"hung", s.hung},
          {"stalled_at_end", s.stalled_at_end},
          {"error", s.error},
          {"pre_step_ms", Round1(s.pre_step_ms)},
          {"max_step_stall_ms", s.max_step_stall_ms},
          {"lost_steps", s.lost_steps},
          {"pre_mbps", s.pre_mbps},
          {"failover_ms", OrNull(s.failover_ms)},
          {"stream_stalled_ms", s.stream_stalled_ms},
          {"dip_pct", s.dip_pct},
          {"recover_full_speed_ms", OrNull(s.recover_full_speed_ms)},
          {"per_fault", [&] {
             oj v = oj::array();
             for (const auto& f : s.per_fault) {
               v.push_back({{"at_s", std::round((f.at - s.per_fault.front().at) * 100) / 100},
                            {"max_step_stall_ms", f.max_step_stall_ms},
                            {"stream_stalled_ms", f.stream_stalled_ms}});
             }
             return v;
           }()}};
}

std::string PathPrefix(const std::string& key) {
  const auto slash = key.rfind('/');
  return slash == std::string::npos || key.find('/') == slash ? key : key.substr(0, slash);
}

Detection ScoreDetection(const std::vector<PathDown>& downs, const std::vector<PathRef>& affected, double ready,
                         double fault, double end) {
  Detection d;
  std::vector<PathRef> hit(affected);
  std::sort(hit.begin(), hit.end());
  hit.erase(std::unique(hit.begin(), hit.end()), hit.end());
  d.affected = int(hit.size());
  std::map<PathRef, double> first;
  for (const auto& e : downs) {
    if (e.t >= ready && e.t < fault) {
      ++d.false_downs_before;
      continue;
    }
    if (e.t < fault || e.t > end) continue;
    // An affected ref names one path ("peer/railN/pathI") or every path of a rail ("peer/railN").
    PathRef ref{e.host, e.path};
    if (!std::binary_search(hit.begin(), hit.end(), ref)) ref.path = PathPrefix(e.path);
    if (!std::binary_search(hit.begin(), hit.end(), ref)) {
      ++d.false_downs_after;
      continue;
    }
    auto [it, added] = first.emplace(ref, e.t);
    if (!added) it->second = std::min(it->second, e.t);
  }
  for (const auto& ref : hit) {
    const auto it = first.find(ref);
    if (it == first.end()) {
      ++d.never_detected;
    } else {
      d.detect_ms.push_back(Round1((it->second - fault) * 1000));
    }
  }
  std::sort(d.detect_ms.begin(), d.detect_ms.end());
  if (!d.detect_ms.empty()) {
    const size_t n = d.detect_ms.size();
    d.detect_ms_median = Round1(n % 2 ? d.detect_ms[n / 2] : (d.detect_ms[n / 2 - 1] + d.detect_ms[n / 2]) / 2);
    d.detect_ms_max = d.detect_ms.back();
  }
  return d;
}

nlohmann::ordered_json ToJson(const Detection& d) {
  return {{"affected_paths", d.affected},
          {"never_detected", d.never_detected},
          {"detect_ms_median", OrNull(d.detect_ms_median)},
          {"detect_ms_max", OrNull(d.detect_ms_max)},
          {"detect_ms_per_path", d.detect_ms},
          {"false_downs_before", d.false_downs_before},
          {"false_downs_after", d.false_downs_after}};
}

}  // namespace lockstep::bench::fabric
