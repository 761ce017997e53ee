// Real chrony beside the agents: one chronyd -x per host namespace (started
// with `ip netns exec`, as the agents), its tracking read with chronyc over
// the daemon's own Unix command socket. Scoring: clocksync_chrony.h.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "clocksync_testbed.h"

namespace lockstep::bench {

void Testbed::StartChrony(int i) {
  auto k = static_cast<size_t>(i);
  const std::string dir = work_ + "/chrony-" + host_names_[k];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) Die("cannot create " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);  // chronyd refuses a socket directory others can write
  const std::string cfg = i == a_.chrony_server
                              ? ChronyServerConfig(dir)
                              : ChronyClientConfig(ip0_[static_cast<size_t>(a_.chrony_server)], dir, a_.chrony_poll);
  WriteFile(dir + "/chrony.conf", cfg);
  // -x: never touch the clock; -d: foreground, log to stderr; -u root: no
  // privilege drop (the socket dir is root's).
  chrony_started_[i] = Now();
  chrony_first_sync_.erase(i);
  chronyds_[i] = Child::Spawn({"ip", "netns", "exec", ns_[k], tools_.chronyd, "-x", "-d", "-u", "root", "-f",
                               dir + "/chrony.conf"},
                              dir + "/chronyd.log");
}

void Testbed::StopChrony(int i) {
  auto it = chronyds_.find(i);
  if (it == chronyds_.end()) return;
  it->second.Signal(SIGKILL);
  it->second.WaitFor(5);
}

ChronyRound Testbed::ChronyAll(const std::vector<int>& idx) {
  ChronyRound rnd;
  for (int i : idx) {
    auto it = chronyds_.find(i);
    if (it == chronyds_.end() || !it->second.Alive()) continue;
    const std::string sock = work_ + "/chrony-" + HostName(i) + "/chronyd.sock";
    RunResult r = RunCapture({tools_.chronyc, "-h", sock, "-c", "tracking"});
    if (r.rc != 0) continue;
    if (auto t = ParseChronyTracking(r.out)) rnd[i] = *t;
  }
  return rnd;
}

void Testbed::NoteChronyFirstSync() {
  std::vector<int> pending;
  for (const auto& [i, c] : chronyds_) {
    if (!chrony_first_sync_.count(i)) pending.push_back(i);
  }
  if (pending.empty()) return;
  ChronyRound rnd = ChronyAll(pending);
  const double now = Now();
  for (const auto& [i, t] : rnd) {
    if (t.Synced()) chrony_first_sync_[i] = now - chrony_started_[i];
  }
}

bool Testbed::WaitChronySynced(const std::vector<int>& idx, double timeout_s) {
  double deadline = Now() + timeout_s;
  while (Now() < deadline) {
    NoteChronyFirstSync();
    ChronyRound rnd = ChronyAll(idx);
    bool all = true;
    for (int i : idx) all = all && rnd.count(i) && rnd[i].Synced();
    if (all) return true;
    Sleep(0.1);
  }
  return false;
}

void Testbed::WriteChronyRounds(const std::string& name, const std::vector<ChronyRound>& rounds) {
  std::ofstream f(work_ + "/chrony-rounds-" + name + ".jsonl");  // raw samples
  for (const auto& rnd : rounds) {
    nlohmann::ordered_json line = nlohmann::ordered_json::object();
    for (const auto& [i, t] : rnd) {
      line[HostName(i)] = {{"synced", t.Synced()},
                           {"system_time_ns", t.ErrorNs()},
                           {"last_offset_ns", t.last_offset_s * 1e9},
                           {"bound_ns", t.BoundNs()},
                           {"stratum", t.stratum}};
    }
    f << line.dump() << "\n";
  }
}

}  // namespace lockstep::bench
