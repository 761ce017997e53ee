#include "migration_score.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace lockstep::bench::migration {
namespace {

int IntOr(const nlohmann::json& j, const char* k, int dflt) {
  return j.contains(k) && j[k].is_number_integer() ? j[k].get<int>() : dflt;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// When every rank 0..world-1 has committed a step >= target after t (a rank in
// `gone` only if it committed one).
std::optional<double> AllCommittedAfter(const std::vector<Commit>& commits, double t, int target, int world,
                                        const std::vector<int>& gone = {}) {
  std::vector<std::optional<double>> first(static_cast<size_t>(world));
  for (const auto& c : commits) {
    if (c.rank < 0 || c.rank >= world || c.t <= t || c.step < target) continue;
    auto& f = first[size_t(c.rank)];
    if (!f || c.t < *f) f = c.t;
  }
  double worst = t;
  bool any = false;
  for (size_t r = 0; r < first.size(); ++r) {
    const auto& f = first[r];
    if (!f && std::find(gone.begin(), gone.end(), int(r)) != gone.end()) continue;
    if (!f) return std::nullopt;
    worst = std::max(worst, *f);
    any = true;
  }
  if (!any) return std::nullopt;
  return worst;
}

// When any rank first committed a step >= target after t.
std::optional<double> AnyCommittedAfter(const std::vector<Commit>& commits, double t, int target) {
  std::optional<double> best;
  for (const auto& c : commits) {
    if (c.t > t && c.step >= target && (!best || c.t < *best)) best = c.t;
  }
  return best;
}

// The 97.5th percentile of Student's t with `df` degrees of freedom (df >= 1).
double StudentT975(int df) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                  2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                  2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df <= 30) return kTable[df - 1];
  return df <= 60 ? 2.000 : df <= 120 ? 1.980 : 1.960;
}

}  // namespace

int HighestCommittedAt(const std::vector<Commit>& commits, double t) {
  int best = -1;
  for (const auto& c : commits) {
    if (c.t <= t) best = std::max(best, c.step);
  }
  return best;
}

WorkloadLog ParseWorkloadLog(const std::string& text) {
  WorkloadLog out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("event") || !j["event"].is_string() ||
        !j.contains("t") || !j["t"].is_number()) {
      ++out.bad_lines;
      continue;
    }
    const std::string ev = j["event"];
    const double t = j["t"].get<double>();
    if (ev == "step") {
      out.commits.push_back({IntOr(j, "rank", -1), IntOr(j, "step", -1), IntOr(j, "pid", 0), t, IntOr(j, "participants", -1)});
    } else {
      out.events.push_back({ev, IntOr(j, "rank", -1), IntOr(j, "step", -1), IntOr(j, "pid", 0), t, j});
    }
  }
  std::stable_sort(out.commits.begin(), out.commits.end(), [](const Commit& a, const Commit& b) { return a.t < b.t; });
  std::stable_sort(out.events.begin(), out.events.end(), [](const Event& a, const Event& b) { return a.t < b.t; });
  return out;
}

Stat Summarize(std::vector<double> v) {
  if (v.empty()) return {};
  const double mx = *std::max_element(v.begin(), v.end());
  return {Median(std::move(v)), mx};
}

std::vector<Window> SpareStartWindows(const WorkloadLog& log) {
  std::vector<Window> out;
  double end = 0;
  for (const auto& c : log.commits) end = std::max(end, c.t);
  for (const auto& e : log.events) end = std::max(end, e.t);
  for (const auto& e : log.events) {
    if (e.event != "launch" || e.json.value("role", "") != "spare") continue;
    double to = end;
    for (const auto& f : log.events) {  // in time order: the first one
      const std::string name = f.event == "lib" ? f.json.value("lib_event", "") : "";
      if (f.pid == e.pid && f.t >= e.t && (name == "waiting" || name == "plan_received")) {
        to = f.t;
        break;
      }
    }
    out.push_back({e.t, to});
  }
  return out;
}

ArmScore ScoreArm(const WorkloadLog& log, std::vector<Fault> faults, int world_size, const std::vector<Window>& busy,
                  const std::vector<int>& gone) {
  ArmScore s;
  s.world_size = world_size;
  std::vector<double> detects, recovers, resumes;
  std::vector<std::pair<double, double>> windows;  // fault -> recovered (or +inf)
  for (auto& f : faults) {
    FaultScore fs;
    fs.fault = f;
    fs.target_step = f.target_step ? *f.target_step : HighestCommittedAt(log.commits, f.t) + 1;
    if (f.detected_t) {
      fs.detect_s = *f.detected_t - f.t;
      detects.push_back(*fs.detect_s);
    }
    // The faulted rank itself must be back: a rank that never came back did not recover.
    std::vector<int> others_gone;
    for (int g : gone) {
      if (g != f.rank) others_gone.push_back(g);
    }
    const auto done = AllCommittedAfter(log.commits, f.t, fs.target_step, world_size, others_gone);
    if (done) {
      fs.recover_s = *done - f.t;
      recovers.push_back(*fs.recover_s);
    }
    if (const auto went_on = AnyCommittedAfter(log.commits, f.t, fs.target_step)) {
      fs.resume_s = *went_on - f.t;
      resumes.push_back(*fs.resume_s);
    }
    if (done && f.paused_t && *f.paused_t <= *done) fs.stall_s = *done - *f.paused_t;
    windows.push_back({f.t, done ? *done : 1e300});
    s.faults.push_back(fs);
  }
  s.detect_s = Summarize(detects);
  s.recover_s = Summarize(recovers);
  s.resume_s = Summarize(resumes);
  // Batches no committed step averaged: the fewest participants any rank logged for
  // the step (a rank that was healing logs the quorum's count too).
  std::map<int, int> participants;
  for (const auto& c : log.commits) {
    if (c.step < 0) continue;
    const int n = c.participants < 0 ? world_size : std::min(c.participants, world_size);
    const auto it = participants.find(c.step);
    participants[c.step] = it == participants.end() ? n : std::min(it->second, n);
  }
  for (const auto& [step, n] : participants) s.skipped_batches += world_size - n;
  // Per rank, in time order: recomputed committed steps and pid changes.
  std::map<int, std::vector<const Commit*>> by_rank;
  for (const auto& c : log.commits) {
    if (c.rank >= 0 && c.rank < world_size) by_rank[c.rank].push_back(&c);
  }
  std::vector<bool> used(faults.size(), false);
  for (auto& [rank, cs] : by_rank) {
    int high = -1, lost = 0, pid = cs.front()->pid;
    for (const Commit* c : cs) {
      if (c->step <= high) {
        ++lost;
        s.step_went_back = true;
      }
      high = std::max(high, c->step);
      if (c->pid != pid) {
        bool explained = false;
        for (size_t i = 0; i < faults.size() && !explained; ++i) {
          if (!used[i] && faults[i].rank == rank && faults[i].t <= c->t) explained = used[i] = true;
        }
        if (!explained) ++s.healthy_restarts;
        pid = c->pid;
      }
    }
    s.lost_steps = std::max(s.lost_steps, lost);
  }
  for (int r = 0; r < world_size; ++r) {
    if (!by_rank.count(r)) {
      s.final_step = -1;
      break;
    }
    int high = -1;
    for (const Commit* c : by_rank[r]) high = std::max(high, c->step);
    s.final_step = r == 0 ? high : std::min(s.final_step, high);
  }

  windows.insert(windows.end(), busy.begin(), busy.end());
  // Steady state: rank 0's consecutive steps by one process, outside fault and busy windows.
  std::vector<double> dts;
  const auto& r0 = by_rank[0];
  for (size_t i = 1; i < r0.size(); ++i) {
    const Commit& a = *r0[i - 1];
    const Commit& b = *r0[i];
    if (b.step != a.step + 1 || b.pid != a.pid) continue;
    bool in_fault = false;
    for (const auto& [from, to] : windows) in_fault = in_fault || (b.t > from && a.t < to);
    if (!in_fault) dts.push_back(b.t - a.t);
  }
  if (!dts.empty()) {
    double sum = 0;
    for (double d : dts) sum += d;
    s.step_mean_s = sum / double(dts.size());
    s.step_s = Median(dts);
  }
  s.steady_steps = static_cast<int>(dts.size());
  return s;
}

RoundsScore ScoreRounds(const std::vector<Round>& rounds) {
  RoundsScore out;
  std::vector<double> ok;
  for (const auto& r : rounds) {
    out.round_percent.push_back(OverheadPercent(r.arm_s, r.reference_s));
    if (out.round_percent.back()) ok.push_back(*out.round_percent.back());
  }
  if (!ok.empty()) out.median_percent = Median(ok);
  if (ok.size() >= 2) {
    const size_t n = ok.size();
    double sum = 0, sq = 0;
    for (double p : ok) sum += p;
    const double mean = sum / double(n);
    for (double p : ok) sq += (p - mean) * (p - mean);
    const double half = StudentT975(int(n) - 1) * std::sqrt(sq / double(n - 1)) / std::sqrt(double(n));
    out.mean_percent = mean;
    out.ci95_low = mean - half;
    out.ci95_high = mean + half;
    out.ci95_half_width = half;
    out.resolvable = mean - half > 0 || mean + half < 0;
  }
  return out;
}

std::optional<double> OverheadPercent(const std::optional<double>& arm, const std::optional<double>& reference) {
  if (!arm || !reference || *reference <= 0) return std::nullopt;
  return (*arm / *reference - 1) * 100;
}

nlohmann::ordered_json ToJson(const Stat& s) {
  nlohmann::ordered_json j;
  j["p50"] = s.p50 ? nlohmann::ordered_json(*s.p50) : nlohmann::ordered_json(nullptr);
  j["max"] = s.max ? nlohmann::ordered_json(*s.max) : nlohmann::ordered_json(nullptr);
  return j;
}

}  // namespace lockstep::bench::migration
