#include "clocksync_chrony.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "clocksync_score.h"

namespace lockstep::bench {
namespace {

std::vector<std::string> SplitCsv(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    out.emplace_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::optional<double> Number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<ChronyTracking> ParseChronyTracking(std::string_view csv) {
  std::vector<std::string> f = SplitCsv(csv);
  if (f.size() != 14) return std::nullopt;
  std::optional<double> stratum = Number(f[2]), sys = Number(f[4]), last = Number(f[5]), delay = Number(f[10]),
                        disp = Number(f[11]);
  if (!stratum || !sys || !last || !delay || !disp) return std::nullopt;
  ChronyTracking t;
  t.ref_id = f[0];
  t.stratum = static_cast<int>(*stratum);
  t.system_time_s = *sys;
  t.last_offset_s = *last;
  t.root_delay_s = *delay;
  t.root_dispersion_s = *disp;
  t.leap = f[13];
  return t;
}

namespace {

// What both roles share: no command port (a Unix socket in `dir` instead),
// a pid file in `dir`, nothing persisted.
std::string Common(const std::string& dir) {
  return "cmdport 0\n"
         "bindcmdaddress " + dir + "/chronyd.sock\n"
         "pidfile " + dir + "/chronyd.pid\n";
}

}  // namespace

std::string ChronyServerConfig(const std::string& dir) {
  return "# clocksync testbed: chrony server (chronyd -x: never touches the clock)\n"
         "local stratum 1\n"
         "allow\n" +
         Common(dir);
}

std::string ChronyClientConfig(const std::string& server_ip, const std::string& dir, int poll) {
  const std::string p = std::to_string(poll);
  return "# clocksync testbed: chrony client (chronyd -x: never touches the clock)\n"
         "server " + server_ip + " iburst minpoll " + p + " maxpoll " + p + " xleave\n"
         "port 0\n" +
         Common(dir) +
         "logdir " + dir + "\n"
         "log tracking measurements statistics\n";
}

ChronyScore ScoreChrony(const std::vector<ChronyRound>& rounds, int server) {
  ChronyScore r;
  std::vector<double> errs, clients, bounds;
  for (const auto& rnd : rounds) {
    std::vector<const ChronyTracking*> synced;
    for (const auto& [i, t] : rnd) {
      ++r.samples;
      if (!t.Synced()) {
        ++r.unsynced_samples;
        continue;
      }
      synced.push_back(&t);
      bounds.push_back(t.BoundNs());
      if (i != server) clients.push_back(std::abs(t.ErrorNs()));
    }
    for (size_t x = 0; x < synced.size(); ++x) {
      for (size_t y = x + 1; y < synced.size(); ++y) {
        double d = std::abs(synced[x]->ErrorNs() - synced[y]->ErrorNs());
        errs.push_back(d);
        if (d > synced[x]->BoundNs() + synced[y]->BoundNs()) ++r.violations;
      }
    }
  }
  r.pairs = errs.size();
  r.p50_ns = Percentile(errs, 50);
  r.p99_ns = Percentile(errs, 99);
  if (!errs.empty()) r.max_ns = *std::max_element(errs.begin(), errs.end());
  r.bound_p50_ns = Percentile(bounds, 50);
  r.client_p50_ns = Percentile(clients, 50);
  r.client_p99_ns = Percentile(clients, 99);
  if (!clients.empty()) r.client_max_ns = *std::max_element(clients.begin(), clients.end());
  return r;
}

}  // namespace lockstep::bench
