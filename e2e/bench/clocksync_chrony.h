// Real chrony as the clock-sync baseline of the testbed. Pure: configs out,
// `chronyc -c tracking` lines in, pairwise errors out (no I/O, no clocks).
//
// One host runs chronyd as the server (`local stratum 1`, `allow`), every other
// host a client (`server IP iburst minpoll P maxpoll P xleave`). Every chronyd
// runs with -x: it never touches the clock, so all namespaces keep sharing one
// clock and chronyd's own idea of time drifts away from it only by its
// estimation error. With -x chronyd keeps its corrections in a register
// (sys_null.c): its time = system clock + correction, and `chronyc tracking`
// reports that correction as "System time". Since the system clock IS the
// truth here, that correction is chrony's error, in full (for the server it is
// 0). "Last offset" is only the last update's innovation (it is ~0 once chrony
// has converged, whatever its bias), so it is not used.
//
// Scoring is as for the agents: for every pair of hosts running chronyd and
// synchronised, |e_i - e_j| (the server's e is its own correction, 0). chrony's
// own bound is root delay / 2 + root dispersion (chronyc tracking), so its
// bound violations count like the agents'.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::bench {

// One `chronyc -c tracking` line.
struct ChronyTracking {
  std::string ref_id;     // hex, "00000000" before the first sync
  int stratum = 0;        // 0 before the first sync
  double system_time_s = 0;  // current correction: chrony time minus system clock
  double last_offset_s = 0;
  double root_delay_s = 0, root_dispersion_s = 0;
  std::string leap;       // "Normal", "Not synchronised", ...
  // Synchronised to a source (clients) or serving its local reference (server).
  bool Synced() const { return stratum > 0 && stratum < 16 && leap != "Not synchronised"; }
  double ErrorNs() const { return system_time_s * 1e9; }
  double BoundNs() const { return (root_delay_s / 2 + root_dispersion_s) * 1e9; }
};

// Parses the CSV line of `chronyc -c tracking` (14 fields); nullopt if it is not one.
std::optional<ChronyTracking> ParseChronyTracking(std::string_view csv);

// chronyd configs. `dir` holds the command socket and pid file (and the logs
// of a client). The server listens on the default NTP port; clients serve
// nothing (port 0). No drift file, no RTC: nothing persists between runs.
std::string ChronyServerConfig(const std::string& dir);
std::string ChronyClientConfig(const std::string& server_ip, const std::string& dir, int poll);

// One sampling round: host index -> its tracking report (synchronised or not).
using ChronyRound = std::map<int, ChronyTracking>;

struct ChronyScore {
  size_t pairs = 0;  // pair samples scored
  std::optional<double> p50_ns, p99_ns, max_ns;
  size_t violations = 0;  // |e_i - e_j| > bound_i + bound_j
  std::optional<double> bound_p50_ns;
  // |e_i| of the clients: the error against the server (and the truth).
  std::optional<double> client_p50_ns, client_p99_ns, client_max_ns;
  size_t samples = 0, unsynced_samples = 0;
};

ChronyScore ScoreChrony(const std::vector<ChronyRound>& rounds, int server);

}  // namespace lockstep::bench
