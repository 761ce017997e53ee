#include "migration_run.h"

#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "clocksync_proc.h"
#include "migration_http.h"

namespace lockstep::bench::migration {
namespace {

using nlohmann::json;

double WallNow() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Die(std::string("cannot pick a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// Parent pid and state letter of a process, from /proc/PID/stat (none: gone).
std::optional<std::pair<int, char>> ProcStat(int pid) {
  const std::string s = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t rp = s.rfind(')');
  if (s.empty() || rp == std::string::npos || rp + 4 >= s.size()) return std::nullopt;
  std::istringstream in(s.substr(rp + 2));
  char state = '?';
  int ppid = 0;
  in >> state >> ppid;
  return std::make_pair(ppid, state);
}

bool PidDead(int pid) {
  const auto st = ProcStat(pid);
  return !st || st->second == 'Z' || st->second == 'X';
}

// What the driver needs to know while the arm runs, read from the workload's
// log as it grows.
struct LiveLog {
  std::string path;
  size_t offset = 0;
  std::string partial;
  std::map<int, int> rank_pid;  // latest process of each rank
  std::set<int> pids;
  int rank0_step = -1;          // highest step rank 0 committed
  int any_step = -1;            // highest step any rank committed
  double first_end_t = 0;       // when the first rank logged "end" (0: none yet)
  std::set<int> ended;          // ranks that logged "end"
  std::vector<json> faults;     // the workload's fault events

  void Poll() {
    const std::string all = ReadFile(path);
    if (all.size() <= offset) return;
    partial += all.substr(offset);
    offset = all.size();
    size_t nl;
    while ((nl = partial.find('\n')) != std::string::npos) {
      const json j = json::parse(partial.substr(0, nl), nullptr, false);
      partial.erase(0, nl + 1);
      if (!j.is_object() || !j.contains("event")) continue;
      const std::string ev = j.value("event", "");
      const int rank = j.contains("rank") && j["rank"].is_number_integer() ? j["rank"].get<int>() : -1;
      const int pid = j.value("pid", 0);
      if (pid > 0) pids.insert(pid);
      if (rank >= 0 && pid > 0 && ev != "fault") rank_pid[rank] = pid;
      if (ev == "step" && rank == 0) rank0_step = std::max(rank0_step, j.value("step", -1));
      if (ev == "step") any_step = std::max(any_step, j.value("step", -1));
      if (ev == "end" && rank >= 0) ended.insert(rank);
      if (ev == "end" && first_end_t == 0) first_end_t = WallNow();
      if (ev == "fault") faults.push_back(j);
    }
  }
};

// When each process of the workload was first seen dead (wall clock).
struct Deaths {
  std::map<int, double> at;
  void Poll(const LiveLog& live) {
    for (int pid : live.pids) {
      if (!at.count(pid) && PidDead(pid)) at[pid] = WallNow();
    }
  }
};

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

std::string FaultSpec(const Options& o) {
  std::string s;
  for (const auto& f : o.faults) {
    if (f.kind == "kill" || f.kind == "stop") {
      s += (s.empty() ? "" : ",") + f.kind + ":" + std::to_string(f.rank) + "@" + std::to_string(f.step);
    }
  }
  return s;
}

bool IsLockstep(const std::string& arm) { return arm.rfind("lockstep_", 0) == 0; }
bool IsTorchft(const std::string& arm) { return arm == "torchft"; }
bool OnTorch2(const std::string& arm) { return arm == "torchft" || arm == "ddp_torch2"; }

// torchrun's rendezvous on one host: static, as TorchFT's README runs each replica
// group (`torchrun --master_port P --nnodes 1 --nproc_per_node 1`). Not for a
// multi-process group that restarts on torch 2.x: its static rendezvous reuses the
// agent's store without Debian 1.13's per-attempt prefix, and after a restart gloo's
// connectFullMesh read the dead processes' addresses ("Connection refused") until
// --max_restarts ran out (seen with checkpoint_restart on torch 2.15; the c10d
// rendezvous avoided that, but under load it once lost a torchft group's store).
std::vector<std::string> Rendezvous() {
  return {"--master_addr", "127.0.0.1", "--master_port", std::to_string(FreePort())};
}

// Everything an arm started; torn down on every exit path.
struct Started {
  std::vector<Child> children;
  ~Started() {
    for (auto& c : children) c.Signal(SIGKILL);
    KillDescendants();
  }
};

// The earliest sign after a fault on `rank` at `t` that the rest of the job
// noticed it: a healthy rank's collective error, a healthy rank's process
// ending (torchrun stops the group), a library event naming a failure.
std::optional<double> DetectedByRanks(const WorkloadLog& log, const Deaths& deaths, int rank, double t,
                                      const std::map<int, int>& pid_rank) {
  std::optional<double> best;
  auto consider = [&](double x) {
    if (x > t && (!best || x < *best)) best = x;
  };
  for (const auto& e : log.events) {
    if (e.rank == rank || e.t <= t) continue;
    if (e.event == "error") consider(e.t);
    if (e.event == "lib") {
      const std::string name = e.json.value("lib_event", "");
      if (name.find("error") != std::string::npos || name.find("fail") != std::string::npos ||
          name.find("detect") != std::string::npos) {
        consider(e.t);
      }
    }
  }
  for (const auto& [pid, when] : deaths.at) {
    const auto it = pid_rank.find(pid);
    if (it != pid_rank.end() && it->second != rank) consider(when);
  }
  return best;
}

// The coordinator's own detection time of the failure after `t`: the
// detected_at of the first generation in its history detected after t.
std::optional<double> DetectedByCoordinator(const json& state, double t) {
  std::optional<double> best;
  if (!state.is_object() || !state.contains("history") || !state["history"].is_array()) return best;
  for (const auto& h : state["history"]) {
    if (!h.is_object() || !h.contains("detected_at") || !h["detected_at"].is_number()) continue;
    const double d = h["detected_at"].get<double>();
    if (d > t && (!best || d < *best)) best = d;
  }
  return best;
}

// Registered spares that hold no rank, and spares the coordinator is starting.
std::pair<int, int> SparesOf(const json& state) {
  int free = 0;
  if (state.is_object() && state.contains("members") && state["members"].is_array()) {
    for (const auto& m : state["members"]) {
      if (m.is_object() && m.value("status", "") == "alive" && m.value("rank", 0) < 0) ++free;
    }
  }
  return {free, state.is_object() ? state.value("spares_starting", 0) : 0};
}

}  // namespace

void BecomeSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

void KillDescendants() {
  const int self = ::getpid();
  for (int round = 0; round < 50; ++round) {
    std::vector<int> kids;
    if (DIR* d = ::opendir("/proc")) {
      while (dirent* e = ::readdir(d)) {
        const int pid = std::atoi(e->d_name);
        if (pid <= 0) continue;
        const auto st = ProcStat(pid);
        if (st && st->first == self) kids.push_back(pid);
      }
      ::closedir(d);
    }
    if (kids.empty()) return;
    for (int pid : kids) ::kill(pid, SIGKILL);
    ::usleep(50 * 1000);
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
}

ArmResult RunArm(const Tools& tools, const Options& o, const std::string& arm) {
  ArmResult r;
  r.arm = arm;
  if (IsLockstep(arm) && tools.coordinator.empty()) {
    r.note = "no lockstep-coordinator built (cmake --build --preset dev --target lockstep-coordinator)";
    return r;
  }
  if (IsLockstep(arm) && ::access((tools.pylib + "/lockstep_train/__init__.py").c_str(), R_OK) != 0) {
    r.note = "no lockstep_train library at " + tools.pylib;
    return r;
  }
  const std::string dir = o.workdir + "/" + arm;
  RunCapture({"rm", "-rf", dir});
  if (RunCapture({"mkdir", "-p", dir + "/markers", dir + "/ckpt", dir + "/torchrun"}).rc != 0) Die("cannot create " + dir);
  const std::string log_path = dir + "/train.jsonl", hash_path = dir + "/sha256";
  WriteFile(log_path, "");
  const bool faulty = arm != "ddp" && arm != "ddp_torch2" && arm != "lockstep_ref";  // the references run without faults
  if (OnTorch2(arm) && (tools.lighthouse.empty() || tools.python2.empty())) {
    r.note = "no torchft environment (scripts/install-torchft)";
    return r;
  }
  const std::vector<std::string> torchrun =
      OnTorch2(arm) ? std::vector<std::string>{tools.python2, "-m", "torch.distributed.run"} : tools.torchrun;
  std::vector<std::string> wl = {tools.workload, "--steps", std::to_string(o.steps), "--hidden",
                                 std::to_string(o.hidden), "--batch", std::to_string(o.batch), "--log-file", log_path,
                                 "--marker-dir", dir + "/markers", "--hash-file", hash_path};
  if (o.min_step_s > 0) wl.insert(wl.end(), {"--min-step-s", std::to_string(o.min_step_s)});
  if (faulty && !FaultSpec(o).empty()) wl.insert(wl.end(), {"--faults", FaultSpec(o)});

  Started started;
  std::string coord_url;
  const double t0 = WallNow();
  if (IsTorchft(arm)) {
    // TorchFT as its README runs it: a lighthouse, and per replica group a torchrun
    // (--max-restarts restarts a failed group's process) whose store the Manager uses.
    const int lh_port = FreePort();
    started.children.push_back(Child::Spawn({tools.lighthouse, "--min_replicas", "1", "--quorum_tick_ms", "100",
                                             "--join_timeout_ms", "10000", "--bind", "127.0.0.1:" + std::to_string(lh_port)},
                                            dir + "/lighthouse.log"));
    for (int g = 0; g < o.world_size; ++g) {
      std::vector<std::string> argv = {"env", "REPLICA_GROUP_ID=" + std::to_string(g),
                                       "NUM_REPLICA_GROUPS=" + std::to_string(o.world_size),
                                       "TORCHFT_LIGHTHOUSE=http://127.0.0.1:" + std::to_string(lh_port)};
      argv.insert(argv.end(), torchrun.begin(), torchrun.end());
      argv.insert(argv.end(), {"--nnodes", "1", "--nproc_per_node", "1", "--max_restarts", std::to_string(o.max_restarts),
                               "--monitor_interval", std::to_string(o.monitor_s)});
      const auto rdzv = Rendezvous();
      argv.insert(argv.end(), rdzv.begin(), rdzv.end());
      argv.insert(argv.end(), wl.begin(), wl.end());
      argv.insert(argv.end(), {"--mode", "torchft"});
      started.children.push_back(Child::Spawn(argv, dir + "/group" + std::to_string(g) + ".log"));
    }
  } else if (!IsLockstep(arm)) {
    std::vector<std::string> argv = torchrun;
    argv.insert(argv.end(), {"--nnodes", "1", "--nproc_per_node", std::to_string(o.world_size),
                                     "--max_restarts", !faulty ? "0" : std::to_string(o.max_restarts),
                                     "--monitor_interval", std::to_string(o.monitor_s),
                                     // Debian's torch 1.13 on Python 3.11 cannot parse "0" here (Std.NONE).
                                     "--redirects", "1", "--tee", "2", "--log_dir", dir + "/torchrun"});
    const auto rdzv = Rendezvous();
    argv.insert(argv.end(), rdzv.begin(), rdzv.end());
    argv.insert(argv.end(), wl.begin(), wl.end());
    argv.insert(argv.end(), {"--mode", "ddp", "--hang-s", std::to_string(o.hang_s)});
    if (arm == "checkpoint_restart") {
      argv.insert(argv.end(), {"--checkpoint-dir", dir + "/ckpt", "--checkpoint-every", std::to_string(o.checkpoint_every),
                               "--save-on-sigterm"});
    }
    started.children.push_back(Child::Spawn(argv, dir + "/torchrun.log"));
  } else {
    const bool hot = arm != "lockstep_cold", remote = arm == "lockstep_remote";
    const std::string port_file = dir + "/coordinator.port";
    std::vector<std::string> spare = {"env", "LOCKSTEP_ROLE=spare", "PYTHONPATH=" + tools.pylib, tools.python};
    spare.insert(spare.end(), wl.begin(), wl.end());
    spare.insert(spare.end(), {"--mode", "lockstep"});
    char hb[32];
    std::snprintf(hb, sizeof hb, "%.3fs", o.heartbeat_timeout_s);
    started.children.push_back(Child::Spawn(
        {tools.coordinator, "--job", "bench-" + arm, "--world-size", std::to_string(o.world_size), "--listen",
         "127.0.0.1:0", "--port-file", port_file, "--state-file", dir + "/coordinator.state", "--heartbeat-timeout", hb,
         "--spares", hot ? std::to_string(o.hot_spares) : "0", "--spare-command", Join(spare),
         // lockstep_remote: as if every rank ran on another host (no pid watch, no local
         // fence): failures are found by the ranks' reports and heartbeat timeouts only.
         "--fence", remote ? "none" : "local", "--pid-check", remote ? "off" : "auto"},
        dir + "/coordinator.log"));
    for (int i = 0; i < 200 && ReadFile(port_file).empty(); ++i) {
      if (!started.children[0].Alive()) Die("lockstep-coordinator exited at start; see " + dir + "/coordinator.log");
      Sleep(0.05);
    }
    const std::string port = ReadFile(port_file);
    if (port.empty()) Die("lockstep-coordinator wrote no port file in 10 s; see " + dir + "/coordinator.log");
    coord_url = "http://127.0.0.1:" + std::to_string(std::atoi(port.c_str()));
    // The spares already running (the coordinator refills the pool to --hot-spares later).
    for (int i = 0; hot && i < o.hot_spares; ++i) {
      const std::string log = dir + "/spare" + std::to_string(i) + ".log";
      std::vector<std::string> argv = {"env", "LOCKSTEP_COORDINATOR=" + coord_url};
      argv.insert(argv.end(), spare.begin(), spare.end());
      started.children.push_back(Child::Spawn(argv, log));
      const double until = WallNow() + 120;
      while (SparesOf(json::parse(HttpCall("GET", coord_url + "/v1/state").body, nullptr, false)).first < i + 1) {
        if (!started.children.back().Alive()) Die("a hot spare exited at start; see " + log);
        if (WallNow() > until) Die("a hot spare did not register in 120 s; see " + log);
        Sleep(0.1);
      }
    }
    for (int rank = 0; rank < o.world_size; ++rank) {
      std::vector<std::string> argv = {"env", "LOCKSTEP_COORDINATOR=" + coord_url, "LOCKSTEP_ROLE=rank",
                                       "LOCKSTEP_RANK=" + std::to_string(rank), "PYTHONPATH=" + tools.pylib,
                                       tools.python};
      argv.insert(argv.end(), wl.begin(), wl.end());
      argv.insert(argv.end(), {"--mode", "lockstep"});
      started.children.push_back(Child::Spawn(argv, dir + "/rank" + std::to_string(rank) + ".log"));
    }
  }
  r.ran = true;

  // Watch the log; fire the driver's faults at their steps; stop when done.
  LiveLog live;
  live.path = log_path;
  Deaths deaths;
  std::vector<Fault> faults;
  std::vector<bool> fired(o.faults.size(), false);
  json requests = json::array();
  std::map<int, int> pid_rank;
  const double deadline = WallNow() + o.arm_timeout_s;
  double next_state_poll = 0;
  for (;;) {
    Sleep(0.02);
    live.Poll();
    deaths.Poll(live);
    for (const auto& [rank, pid] : live.rank_pid) pid_rank[pid] = rank;
    for (size_t i = 0; faulty && i < o.faults.size(); ++i) {
      const auto& f = o.faults[i];
      // torchft: the quorum's step (group 0 may be out of it, restarting).
      const int at = IsTorchft(arm) ? live.any_step : live.rank0_step;
      if (fired[i] || (f.kind != "planned" && f.kind != "preemptive") || at < f.step) continue;
      if (IsLockstep(arm)) {
        // Asked once a spare is registered, or when none is on its way (cold: the
        // request itself makes the coordinator start one). A request without a
        // spare is only held pending; the stall is measured at the step boundary.
        const auto [free, starting] = SparesOf(json::parse(HttpCall("GET", coord_url + "/v1/state").body, nullptr, false));
        if (free < 1 && starting > 0) continue;
      }
      fired[i] = true;
      const double t = WallNow();
      if (IsLockstep(arm)) {
        const json body = {{"rank", f.rank}, {"kind", f.kind}, {"reason", "benchmark schedule at step " + std::to_string(f.step)}};
        const HttpReply rep = HttpCall("POST", coord_url + "/v1/migrations", body.dump());
        requests.push_back({{"kind", f.kind}, {"rank", f.rank}, {"t", t}, {"status", rep.status},
                            {"reply", json::parse(rep.body, nullptr, false).is_discarded() ? json(rep.body) : json::parse(rep.body)}});
        if (rep.status != 202) Log(arm + ": POST /v1/migrations answered " + std::to_string(rep.status) + ": " + rep.body);
      } else if (live.rank_pid.count(f.rank)) {
        ::kill(live.rank_pid[f.rank], SIGTERM);  // a drain without Lockstep: the rank's process is stopped
      }
      faults.push_back({f.kind, f.rank, t, std::nullopt, std::nullopt, "", std::nullopt});
    }
    bool done = false;
    if (IsTorchft(arm)) {
      // Done once every group ended, or is gone for good: its process is stopped (a
      // hang no one restarts) or its torchrun gave up; or 2 s after the first group
      // ended (the quorum committed the last step): a group restarting then would find
      // no peer and train from step 0 alone.
      bool all = !live.ended.empty();
      for (int g = 0; all && g < o.world_size; ++g) {
        if (live.ended.count(g)) continue;
        const auto it = live.rank_pid.find(g);
        const auto st = it == live.rank_pid.end() ? std::nullopt : ProcStat(it->second);
        const bool stopped = st && st->second == 'T';
        all = stopped || !started.children[size_t(g) + 1].Alive();
      }
      all = all || (live.first_end_t > 0 && WallNow() - live.first_end_t > 2);
      done = all;
    } else if (!IsLockstep(arm)) {
      done = !started.children[0].Alive();
    } else {
      done = int(live.ended.size()) >= o.world_size && ::access(hash_path.c_str(), R_OK) == 0;
      if (!started.children[0].Alive()) {
        r.note = "lockstep-coordinator exited (status " + std::to_string(started.children[0].ExitCode()) + ")";
        done = true;
      } else if (WallNow() >= next_state_poll) {  // a terminal job never finishes: stop waiting for it
        next_state_poll = WallNow() + 0.5;
        const json st = json::parse(HttpCall("GET", coord_url + "/v1/state").body, nullptr, false);
        if (st.is_object() && st.value("phase", "") == "terminal") {
          r.note = "the coordinator gave up: " + st.value("terminal_reason", std::string("(no reason)"));
          done = true;
        }
      }
    }
    if (done) break;
    if (WallNow() > deadline) {
      r.note = "timed out after " + std::to_string(int(o.arm_timeout_s)) + " s";
      break;
    }
  }
  r.total_s = WallNow() - t0;
  json state, migrations;
  if (IsLockstep(arm)) {
    const HttpReply s = HttpCall("GET", coord_url + "/v1/state");
    state = json::parse(s.body, nullptr, false);
    const HttpReply m = HttpCall("GET", coord_url + "/v1/migrations");
    migrations = json::parse(m.body, nullptr, false);
    WriteFile(dir + "/state.json", s.body);
    WriteFile(dir + "/migrations.json", m.body);
  }
  if (!IsLockstep(arm) && !IsTorchft(arm)) started.children[0].WaitFor(1);
  if (IsTorchft(arm)) {
    for (int g = 0; g < o.world_size; ++g) {
      if (!live.ended.count(g)) r.gone.push_back(g);
    }
  }

  // Score from the whole log.
  const WorkloadLog log = ParseWorkloadLog(ReadFile(log_path));
  for (const auto& e : log.events) {
    if (e.event != "fault") continue;
    Fault f{e.json.value("kind", ""), e.rank, e.t, e.step, std::nullopt, "", std::nullopt};
    // TorchFT notices a failure inside its Manager and lighthouse (timeouts), which log
    // nothing here: resume_s includes its detection.
    if (!IsTorchft(arm)) f.detected_t = DetectedByRanks(log, deaths, f.rank, f.t, pid_rank);
    if (IsLockstep(arm)) {
      const auto c = DetectedByCoordinator(state, f.t);
      if (c && (!f.detected_t || *c < *f.detected_t)) f.detected_t = c;
    }
    faults.push_back(f);
  }
  // Planned and pre-emptive moves, both arms timed from the request (the POST, or
  // the SIGTERM a drain sends without Lockstep) to every rank committing the first
  // step after the move. Lockstep: the step after the boundary the job paused at
  // (pause_at_step); the note gives the stall from that boundary too. Checkpoint-
  // restart: the step the restarted group resumes from (its save-on-SIGTERM
  // checkpoint), or the step after the last one committed, if that is later.
  for (auto& f : faults) {
    if (f.kind != "planned" && f.kind != "preemptive") continue;
    if (!IsLockstep(arm)) {
      int target = HighestCommittedAt(log.commits, f.t) + 1;
      for (const auto& e : log.events) {
        if (e.event == "resume" && e.t > f.t) {
          target = std::max(target, e.step);
          f.note = "restarted from step " + std::to_string(e.step);
          break;
        }
      }
      f.target_step = target;
      continue;
    }
    f.target_step = o.steps;  // none unless the migration paused the job (a pending one never did)
    f.note = "the migration did not happen before training ended";
    if (!migrations.is_array()) continue;
    for (const auto& m : migrations) {
      if (!m.is_object() || m.value("rank", -1) != f.rank || m.value("kind", "") != f.kind) continue;
      if (!m.contains("pause_at_step") || !m["pause_at_step"].is_number_integer()) continue;
      const int s = m["pause_at_step"].get<int>();
      double paused = 0;
      for (const auto& c : log.commits) {
        if (c.step == s && c.t > f.t) paused = std::max(paused, c.t);
      }
      if (paused > 0) {
        f.target_step = s + 1;
        f.paused_t = paused;
        f.note = "migration " + m.value("id", std::string("?")) + " " + m.value("state", std::string("?")) +
                 ", paused after step " + std::to_string(s);
      }
    }
  }
  std::sort(faults.begin(), faults.end(), [](const Fault& a, const Fault& b) { return a.t < b.t; });
  r.score = ScoreArm(log, faults, o.world_size, SpareStartWindows(log), r.gone);
  const std::string sha = ReadFile(hash_path);
  if (sha.size() >= 64) r.sha256 = sha.substr(0, 64);
  if (IsTorchft(arm)) {  // the quorum's final parameters: the first group to end (each logs its hash)
    r.sha256.reset();
    for (const auto& e : log.events) {
      if (e.event == "end" && e.json.contains("sha256") && e.json["sha256"].is_string()) {
        r.sha256 = e.json["sha256"].get<std::string>();
        break;
      }
    }
  }
  // The last step, committed by every rank that is still there (each rank's first
  // commit of it, up to 2 s after the hash: a torchft group that restarted after the
  // end trains again from step 0 alone).
  double end_t = 1e300;
  for (const auto& e : log.events) {
    if (e.event == "end") end_t = std::min(end_t, e.t + 2);
  }
  std::map<int, double> last;
  for (const auto& c : log.commits) {
    if (c.step == o.steps - 1 && c.t <= end_t && !last.count(c.rank)) last[c.rank] = c.t;
  }
  if (int(last.size() + r.gone.size()) >= o.world_size && !last.empty()) {
    double t_end = 0;
    for (const auto& [rank, t] : last) t_end = std::max(t_end, t);
    r.time_to_n_s = t_end - t0;
  }
  r.completed = r.sha256 && (r.gone.empty() ? r.score.final_step == o.steps - 1 : r.time_to_n_s.has_value());
  r.details["log"] = log_path;
  r.details["requests"] = requests;
  if (IsLockstep(arm)) {
    r.details["migrations"] = migrations;
    if (state.is_object() && state.contains("history")) r.details["history"] = state["history"];
  }
  return r;
}

}  // namespace lockstep::bench::migration
