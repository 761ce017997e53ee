#include "fabric_report.h"

#include <cmath>
#include <cstdio>

namespace lockstep::bench::fabric {
namespace {

using nlohmann::ordered_json;

std::string Ms(const std::optional<double>& v, const char* none) {
  if (!v) return none;
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", *v);
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

}  // namespace

std::string Table(const std::vector<ScenarioResult>& results) {
  const std::vector<int> w = {13, 14, 6, 12, 9, 9, 9, 6, 5, 9, 6};
  std::string out = Row({"scenario", "arm", "link", "survived", "max stall", "stalled", "flows ms", "lost", "dip%",
                         "full ms", "reused"},
                        w);
  for (const auto& r : results) {
    for (const auto& a : r.arms) {
      if (!a.ran) {
        out += Row({r.scenario.name, a.arm, "-", "not run: " + a.note, "", "", "", "", "", "", ""}, w);
        continue;
      }
      const Score& s = a.score;
      out += Row({r.scenario.name, a.arm, a.link,
                  s.survived ? "yes" : (!s.error.empty() ? "NO error" : (s.stalled_at_end ? "NO stalled" : "NO")),
                  Ms(s.max_step_stall_ms, ""), Ms(s.stream_stalled_ms, ""), Ms(s.failover_ms, "never"),
                  std::to_string(s.lost_steps), Ms(s.dip_pct, ""), Ms(s.recover_full_speed_ms, "never"),
                  a.reused ? (*a.reused ? "yes" : "no") : "-"},
                  w);
    }
  }
  out +=
      "survived: no rank failed and the loop was stepping at the end (NO stalled: still stalled there);\n"
      "max stall: longest gap between training steps (rank 0) from the fault on; stalled: ms of the stream in\n"
      "50 ms windows below 10% of its pre-fault rate, every fault; flows ms: fault -> the stream flows again (two\n"
      "50 ms windows at >= 10%) after the first fault's own stall (0 = it never stopped);\n"
      "lost: steps not made at the pre-fault pace; dip%: worst 100 ms throughput below the pre-fault rate;\n"
      "full ms: fault -> a 300 ms window at >= 80% of it.\n";
  for (const auto& r : results) {
    for (const auto& a : r.arms) {
      if (a.ran && !a.score.error.empty()) out += r.scenario.name + "/" + a.arm + ": " + a.score.error + "\n";
      if (a.ran && a.score.per_fault.size() > 1) {
        std::string per;
        for (const auto& f : a.score.per_fault) {
          char b[96];
          std::snprintf(b, sizeof b, " %.0f/%.0f", f.max_step_stall_ms, f.stream_stalled_ms);
          per += b;
        }
        out += r.scenario.name + "/" + a.arm + ": per fault, max step stall / stream stalled ms:" + per + "\n";
      }
      if (a.ran && a.flap_timing.is_object()) {
        const auto& f = a.flap_timing;
        const auto spread = [&](const char* k) {
          const auto& v = f[k];
          return v.is_object() ? v["min"].dump() + "/" + v["median"].dump() + "/" + v["max"].dump() : std::string("-");
        };
        out += r.scenario.name + "/" + a.arm + ": flap train achieved down " + spread("down_ms") + " ms, up " +
               spread("up_ms") + " ms, cycle " + spread("period_ms") + " ms (min/median/max), latest step " +
               f["late_ms_max"].dump() + " ms late, " + f["span_s"].dump() + " s for a planned " +
               f["planned_span_s"].dump() + " s\n";
      }
      if (a.ran && a.arm_report.is_object()) {
        const auto& j = a.arm_report;
        auto v = [&](const char* k) { return j.contains(k) && !j[k].is_null() ? j[k].dump() : std::string("-"); };
        out += r.scenario.name + "/" + a.arm + ": " + v("affected_paths") + " probe paths cross " +
               v("faulted_link") + ": detected median " + v("detect_ms_median") + " ms, max " + v("detect_ms_max") +
               " ms, never " + v("never_detected") + "; false downs before the fault " + v("false_downs_before") +
               ", after it " + v("false_downs_after") + "; first down on any path " + v("first_down_any_path_ms") +
               " ms, first pin " + v("first_pin_ms") + " ms" +
               ", prober stalls " + v("prober_stalls") +
               ", flaps declared " + v("flaps_declared") + ", flap alerts " + v("flap_alerts") + " (first " + v("first_flap_alert_ms") + " ms)" + ", agent CPU " +
               v("agent_cpu_percent") + "% (max " + v("agent_cpu_percent_max") + "%, system " +
               v("agent_cpu_percent_system") + "%; prober thread " + v("fabric_thread_cpu_percent") + "%, " +
               v("fabric_cpu_ms_per_1000_packets") + " ms CPU per 1000 probe packets), RSS " + v("agent_rss_mb") +
               " MB, probes " + v("probe_kbps_per_node") + " kbit/s per node\n";
      }
    }
  }
  return out;
}

ordered_json Summary(const Options& o, const std::vector<ScenarioResult>& results) {
  ordered_json scen = ordered_json::object();
  std::string agent_note;
  for (const auto& r : results) {
    ordered_json j = ordered_json::object();
    j["what"] = r.scenario.what;
    ordered_json arms = ordered_json::object();
    for (const auto& a : r.arms) {
      if (!a.ran) {
        arms[a.arm] = {{"ran", false}, {"note", a.note}};
        if (a.arm == "lockstep") agent_note = a.note;
        continue;
      }
      ordered_json m = ToJson(a.score);
      m["link"] = a.link;
      m["stream_path"] = a.stream_path;
      m["busiest_sender_link"] = a.busiest_link;
      m["path_checked"] = a.path_checked;
      m["fault_lag_ms"] = std::round(a.fault_lag_ms);
      m["fault_spread_ms"] = std::round(a.fault_spread_ms);
      m["stream_rto_ms"] = a.stream_rto_ms;
      if (!a.flap_timing.is_null()) m["flap_timing"] = a.flap_timing;  // what netlab's flap train achieved
      if (a.reused) {
        m["reused"] = *a.reused;
        m["reused_mbytes"] = a.reused_mbytes;
        m["stream_path_at_end"] = a.stream_path_at_end;
      }
      if (a.arm_report.is_object()) {
        for (const auto& [k, v] : a.arm_report.items()) m[k] = v;
        // Detection is the lockstep arm's, per scenario.
        for (const char* k : {"affected_paths", "never_detected", "detect_ms_median", "detect_ms_max",
                              "false_downs_before", "false_downs_after"}) {
          if (a.arm_report.contains(k)) j[k] = a.arm_report[k];
        }
      }
      arms[a.arm] = m;
    }
    j["arms"] = arms;
    scen[r.scenario.name] = j;
  }
  return {{"benchmark", "fabric"},
          {"hosts", o.hosts},
          {"rails", 2},
          {"link_rate", o.link_rate},
          {"hang_s", o.hang_s},
          {"queue_ms", o.queue_ms},
          {"napi_threads", o.napi_threads},
          {"flap_down_s", o.flap_down_s},
          {"flap_up_s", o.flap_up_s},
          {"agent_arm", agent_note.empty() ? "ran" : agent_note},
          {"scenarios", scen}};
}

}  // namespace lockstep::bench::fabric
