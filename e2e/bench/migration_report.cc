#include "migration_report.h"

#include <cmath>
#include <cstdio>

namespace lockstep::bench::migration {
namespace {

using nlohmann::ordered_json;

ordered_json Opt(const std::optional<double>& v, int digits = 3) {
  if (!v) return nullptr;
  const double k = std::pow(10.0, digits);
  return std::round(*v * k) / k;
}

std::string Num(const ordered_json& v, const char* fmt = "%.2f") {
  if (v.is_null()) return "-";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "NO";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  char b[32];
  std::snprintf(b, sizeof b, fmt, v.get<double>());
  return b;
}

std::string Row(const std::vector<std::string>& cells, const std::vector<int>& widths) {
  std::string s;
  for (size_t i = 0; i < cells.size(); ++i) {
    std::string c = cells[i];
    if (c.size() < size_t(widths[i])) c += std::string(size_t(widths[i]) - c.size(), ' ');
    s += c + "  ";
  }
  return s + "\n";
}

const ArmResult* Find(const std::vector<ArmResult>& arms, const std::string& name) {
  for (const auto& a : arms) {
    if (a.arm == name && a.ran) return &a;
  }
  return nullptr;
}

}  // namespace

ordered_json Summary(const Options& o, const std::vector<ArmResult>& arms, long long params, const std::string& uptime,
                     const std::vector<SteadyRound>& rounds, int round_steps) {
  const ArmResult* ddp = Find(arms, "ddp");
  const ArmResult* ddp2 = Find(arms, "ddp_torch2");  // torch 2.x: torchft's reference
  const ArmResult* ls_ref = Find(arms, "lockstep_ref");
  ordered_json out;
  out["benchmark"] = "migration";
  out["world_size"] = o.world_size;
  out["params"] = params;
  out["steps"] = o.steps;
  out["hidden"] = o.hidden;
  out["batch"] = o.batch;
  out["checkpoint_every"] = o.checkpoint_every;
  out["hang_s"] = o.hang_s;
  out["heartbeat_timeout_s"] = o.heartbeat_timeout_s;
  out["hot_spares"] = o.hot_spares;
  ordered_json sched = ordered_json::array();
  for (const auto& f : o.faults) sched.push_back({{"kind", f.kind}, {"rank", f.rank}, {"step", f.step}});
  out["schedule"] = sched;
  out["uptime"] = uptime;
  // The steady-state overhead: interleaved fault-free rounds (see docs/benchmarks.md).
  std::vector<Round> rs, rs_mean;
  ordered_json ddp_ms = ordered_json::array(), ls_ms = ordered_json::array(), order = ordered_json::array();
  ordered_json ddp_mean_ms = ordered_json::array(), ls_mean_ms = ordered_json::array();
  bool rounds_ok = !rounds.empty();
  for (const auto& r : rounds) {
    rs.push_back({r.ddp.score.step_s, r.lockstep.score.step_s});
    rs_mean.push_back({r.ddp.score.step_mean_s, r.lockstep.score.step_mean_s});
    ddp_mean_ms.push_back(r.ddp.score.step_mean_s ? Opt(*r.ddp.score.step_mean_s * 1000, 2) : ordered_json(nullptr));
    ls_mean_ms.push_back(r.lockstep.score.step_mean_s ? Opt(*r.lockstep.score.step_mean_s * 1000, 2)
                                                      : ordered_json(nullptr));
    ddp_ms.push_back(r.ddp.score.step_s ? Opt(*r.ddp.score.step_s * 1000, 2) : ordered_json(nullptr));
    ls_ms.push_back(r.lockstep.score.step_s ? Opt(*r.lockstep.score.step_s * 1000, 2) : ordered_json(nullptr));
    order.push_back(r.ddp_first ? "ddp,lockstep_hot" : "lockstep_hot,ddp");
    rounds_ok = rounds_ok && r.ddp.completed && r.lockstep.completed && r.ddp.sha256 && r.lockstep.sha256 &&
                *r.ddp.sha256 == *r.lockstep.sha256;
  }
  const RoundsScore score = ScoreRounds(rs), mean = ScoreRounds(rs_mean);
  // The headline: the mean over rounds of the ratio of mean step times (every step,
  // periodic checks included), with its 95% interval; "not resolvable below" the
  // half-width where the interval holds 0.
  out["overhead_percent"] = Opt(mean.mean_percent, 2);
  out["overhead_ci95_percent"] = mean.ci95_low ? ordered_json::array({Opt(mean.ci95_low, 2), Opt(mean.ci95_high, 2)})
                                               : ordered_json(nullptr);
  out["overhead_resolvable"] = mean.mean_percent ? ordered_json(mean.resolvable) : ordered_json(nullptr);
  out["overhead_not_resolvable_below_percent"] =
      mean.ci95_half_width && !mean.resolvable ? Opt(mean.ci95_half_width, 2) : ordered_json(nullptr);
  out["overhead_median_step_percent"] = Opt(score.median_percent, 2);  // the median of median-step ratios
  ordered_json steady;
  steady["rounds"] = rounds.size();
  steady["steps"] = round_steps;
  steady["order"] = order;
  steady["ddp_step_ms"] = ddp_ms;
  steady["lockstep_hot_step_ms"] = ls_ms;
  steady["ddp_mean_step_ms"] = ddp_mean_ms;
  steady["lockstep_hot_mean_step_ms"] = ls_mean_ms;
  ordered_json pct = ordered_json::array(), pct_mean = ordered_json::array();
  for (const auto& p : score.round_percent) pct.push_back(Opt(p, 2));
  for (const auto& p : mean.round_percent) pct_mean.push_back(Opt(p, 2));
  steady["round_overhead_percent"] = pct_mean;
  steady["round_median_step_overhead_percent"] = pct;
  steady["all_completed_and_equal"] = rounds.empty() ? ordered_json(nullptr) : ordered_json(rounds_ok);
  // TorchFT's fault-free runs in the same rounds (when that arm ran): against the same ddp runs.
  std::optional<RoundsScore> tft_mean;
  bool have_tft = false;
  for (const auto& r : rounds) have_tft = have_tft || r.torchft.has_value();
  if (have_tft) {
    std::vector<Round> tr;
    ordered_json tft_ms = ordered_json::array(), tft_eq = ordered_json::array(), ddp2_ms = ordered_json::array();
    for (const auto& r : rounds) {
      const ArmResult* t = r.torchft ? &*r.torchft : nullptr;
      const ArmResult* d = r.ddp_torch2 ? &*r.ddp_torch2 : nullptr;
      tr.push_back({d ? d->score.step_mean_s : std::nullopt, t ? t->score.step_mean_s : std::nullopt});
      tft_ms.push_back(t && t->score.step_mean_s ? Opt(*t->score.step_mean_s * 1000, 2) : ordered_json(nullptr));
      ddp2_ms.push_back(d && d->score.step_mean_s ? Opt(*d->score.step_mean_s * 1000, 2) : ordered_json(nullptr));
      tft_eq.push_back(t && t->sha256 && d && d->sha256 ? ordered_json(*t->sha256 == *d->sha256) : ordered_json(nullptr));
    }
    steady["ddp_torch2_mean_step_ms"] = ddp2_ms;
    tft_mean = ScoreRounds(tr);
    steady["torchft_mean_step_ms"] = tft_ms;
    ordered_json tp = ordered_json::array();
    for (const auto& p : tft_mean->round_percent) tp.push_back(Opt(p, 2));
    steady["torchft_round_overhead_percent"] = tp;
    steady["torchft_overhead_percent"] = Opt(tft_mean->mean_percent, 2);
    steady["torchft_overhead_ci95_percent"] =
        tft_mean->ci95_low ? ordered_json::array({Opt(tft_mean->ci95_low, 2), Opt(tft_mean->ci95_high, 2)})
                           : ordered_json(nullptr);
    steady["torchft_fault_free_equals_ddp_torch2"] = tft_eq;  // per round: TorchFT without faults vs plain DDP
  }
  out["steady_state"] = steady;
  ordered_json js = ordered_json::object();
  for (const auto& a : arms) {
    ordered_json j;
    j["ran"] = a.ran;
    if (!a.ran) {
      j["note"] = a.note;
      js[a.arm] = j;
      continue;
    }
    const ArmScore& s = a.score;
    j["completed"] = a.completed;
    j["time_to_n_steps_s"] = Opt(a.time_to_n_s, 2);
    // What the faults cost: time to N steps beyond the fault-free reference's on the same torch.
    const ArmResult* same_torch = a.arm == "torchft" || a.arm == "ddp_torch2" ? ddp2 : ddp;
    j["fault_cost_s"] = a.time_to_n_s && same_torch && same_torch->time_to_n_s
                            ? Opt(*a.time_to_n_s - *same_torch->time_to_n_s, 2)
                            : ordered_json(nullptr);
    j["detect_s"] = ToJson(s.detect_s);
    j["recover_s"] = ToJson(s.recover_s);
    j["resume_s"] = ToJson(s.resume_s);
    j["lost_steps"] = s.lost_steps;
    j["skipped_samples"] = static_cast<long long>(s.skipped_batches) * o.batch;
    j["healthy_restarts"] = s.healthy_restarts;
    ordered_json gone = ordered_json::array();
    for (int g : a.gone) gone.push_back(g);
    j["ranks_never_back"] = gone;
    // The steady-state overhead against plain DDP, from the interleaved fault-free rounds
    // (ddp: the reference; arms without rounds: null).
    if (a.arm == "ddp" || a.arm == "ddp_torch2") {
      j["overhead_percent"] = 0.0;
    } else if (a.arm == "lockstep_hot") {
      j["overhead_percent"] = Opt(mean.mean_percent, 2);
    } else if (a.arm == "torchft" && tft_mean) {
      j["overhead_percent"] = Opt(tft_mean->mean_percent, 2);
    } else {
      j["overhead_percent"] = nullptr;
    }
    j["step_ms"] = s.step_s ? Opt(*s.step_s * 1000, 1) : ordered_json(nullptr);
    j["steady_steps"] = s.steady_steps;
    // Against the ddp arm run minutes before or after: not the steady-state figure.
    j["inrun_overhead_percent"] = Opt(OverheadPercent(s.step_s, ddp ? ddp->score.step_s : std::nullopt), 2);
    j["total_s"] = Opt(a.total_s, 1);
    // The reference: plain DDP, or for the lockstep arms the library's own
    // fault-free run when it ran (see docs/benchmarks.md "migration").
    const bool lockstep = a.arm.rfind("lockstep_", 0) == 0;
    const ArmResult* ref = ddp;
    if (a.arm == "torchft" || a.arm == "ddp_torch2") {
      ref = ddp2;  // the same torch 2.x
    } else if (lockstep && ls_ref && a.arm != "lockstep_ref") {
      ref = ls_ref;
    }
    j["reference"] = ref ? ordered_json(ref->arm) : ordered_json(nullptr);
    j["bit_identical"] = ref && ref->sha256 && a.sha256 ? ordered_json(*ref->sha256 == *a.sha256) : ordered_json(nullptr);
    j["equals_ddp"] = ddp && ddp->sha256 && a.sha256 ? ordered_json(*ddp->sha256 == *a.sha256) : ordered_json(nullptr);
    j["sha256"] = a.sha256 ? ordered_json(*a.sha256) : ordered_json(nullptr);
    j["final_step"] = s.final_step;
    j["step_went_back"] = s.step_went_back;
    ordered_json fs = ordered_json::array();
    for (const auto& f : s.faults) {
      fs.push_back({{"kind", f.fault.kind},
                    {"rank", f.fault.rank},
                    {"t", Opt(f.fault.t, 3)},
                    {"target_step", f.target_step},
                    {"detect_s", Opt(f.detect_s)},
                    {"recover_s", Opt(f.recover_s)},
                    {"resume_s", Opt(f.resume_s)},
                    {"stall_s", Opt(f.stall_s)},
                    {"note", f.fault.note}});
    }
    j["faults"] = fs;
    if (!a.note.empty()) j["note"] = a.note;
    js[a.arm] = j;
  }
  out["arms"] = js;
  return out;
}

std::string Table(const ordered_json& summary) {
  const std::vector<int> w = {18, 9, 8, 12, 12, 5, 7, 8, 8, 9, 8, 14};
  std::string out = Row({"arm", "completed", "to N s", "detect s", "recover s", "lost", "skipped", "healthy", "step ms",
                         "overhead", "total s", "bit-identical"},
                        w);
  out += Row({"", "", "", "p50/max", "p50/max", "steps", "samples", "restarts", "", "% in-run", "", "(reference)"}, w);
  for (const auto& [name, a] : summary["arms"].items()) {
    if (!a["ran"].get<bool>()) {
      out += Row({name, "not run: " + a.value("note", "")}, {18, 0});
      continue;
    }
    out += Row({name, Num(a["completed"]), Num(a["time_to_n_steps_s"], "%.1f"),
                Num(a["detect_s"]["p50"]) + "/" + Num(a["detect_s"]["max"]),
                Num(a["recover_s"]["p50"]) + "/" + Num(a["recover_s"]["max"]), Num(a["lost_steps"]),
                Num(a["skipped_samples"]), Num(a["healthy_restarts"]), Num(a["step_ms"], "%.1f"), Num(a["inrun_overhead_percent"], "%.1f"),
                Num(a["total_s"], "%.1f"),
                Num(a["bit_identical"]) + (a["reference"].is_null() ? "" : " (" + a["reference"].get<std::string>() + ")")},
               w);
  }
  const auto& st = summary["steady_state"];
  if (st["rounds"].get<size_t>() > 0) {
    out += "\nsteady-state overhead (lockstep_hot with an idle hot spare vs ddp, " + std::to_string(st["rounds"].get<size_t>()) +
           " interleaved fault-free rounds of " + std::to_string(st["steps"].get<int>()) +
           " steps, ABBA; mean step times): mean " + Num(summary["overhead_percent"]) + "%";
    if (summary["overhead_ci95_percent"].is_array()) {
      out += ", 95% interval [" + Num(summary["overhead_ci95_percent"][0]) + ", " +
             Num(summary["overhead_ci95_percent"][1]) + "]%";
      if (!summary["overhead_not_resolvable_below_percent"].is_null()) {
        out += ": not resolvable below " + Num(summary["overhead_not_resolvable_below_percent"]) + "%";
      }
    }
    out += "; median-step median " + Num(summary["overhead_median_step_percent"]) + "%; rounds:";
    for (size_t i = 0; i < st["round_overhead_percent"].size(); ++i) {
      out += " " + Num(st["round_overhead_percent"][i]) + "% (" + Num(st["ddp_mean_step_ms"][i], "%.1f") + " / " +
             Num(st["lockstep_hot_mean_step_ms"][i], "%.1f") + " ms)";
    }
    out += "; every round completed with equal hashes: " + Num(st["all_completed_and_equal"]) + "\n";
    if (st.contains("torchft_overhead_percent")) {
      out += "torchft vs ddp_torch2 (both torch 2.x, no faults) in the same rounds: mean " +
             Num(st["torchft_overhead_percent"]) + "%; rounds:";
      for (size_t i = 0; i < st["torchft_round_overhead_percent"].size(); ++i) {
        out += " " + Num(st["torchft_round_overhead_percent"][i]) + "% (" + Num(st["ddp_torch2_mean_step_ms"][i], "%.1f") +
               " / " + Num(st["torchft_mean_step_ms"][i], "%.1f") +
               " ms, equal hashes: " + Num(st["torchft_fault_free_equals_ddp_torch2"][i]) + ")";
      }
      out += "\n";
    }
  }
  out += "\nfaults (detect: fault -> the job noticed; recover: fault or request -> every rank committed a step >= "
         "target;\nstall: Lockstep's planned/preemptive moves, from the paused step boundary):\n";
  for (const auto& [name, a] : summary["arms"].items()) {
    if (!a["ran"].get<bool>()) continue;
    if (a.contains("note")) out += "  " + name + ": " + a["note"].get<std::string>() + "\n";
    for (const auto& f : a["faults"]) {
      out += "  " + name + ": " + f["kind"].get<std::string>() + " rank " + std::to_string(f["rank"].get<int>()) +
             " (target step " + std::to_string(f["target_step"].get<int>()) + "): detect " + Num(f["detect_s"]) +
             " s, recover " + Num(f["recover_s"]) + " s, resume " + Num(f["resume_s"]) + " s" +
             (f["stall_s"].is_null() ? "" : ", stall " + Num(f["stall_s"]) + " s") +
             (f["note"].get<std::string>().empty() ? "" : " (" + f["note"].get<std::string>() + ")") + "\n";
    }
  }
  return out;
}

}  // namespace lockstep::bench::migration
