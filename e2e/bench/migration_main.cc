// migration: the live rank migration benchmark of issue 9 (see kHelp).
// Prints a table and ONE JSON line.
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>

#include "clocksync_proc.h"
#include "migration_report.h"
#include "migration_run.h"

namespace lockstep::bench::migration {
namespace {

const char* kHelp = R"(usage: migration [options]

Live rank migration benchmark (issue 9) with real PyTorch processes on CPU
(Debian's torch 1.13, gloo, one thread each): 4 ranks train an MLP with Adam
(e2e/workloads/migration_train.py; data fixed by (step, rank), fixed seed).
The same fault schedule hits every arm but ddp:
  kill        rank 2 SIGKILLs itself before step 15% of --steps
  stop        rank 1 SIGSTOPs itself (a hang) before step 37.5%
  planned     the driver asks for a planned migration of rank 0 at step 60%
  preemptive  the driver asks for a pre-emptive migration of rank 3 at step 82.5%
(each fault once; restarted processes and spares never repeat it).

Arms, one after another:
  ddp                 plain DDP under torchrun, no faults: the reference hash and step time
  checkpoint_restart  torchrun --max_restarts, a checkpoint every --checkpoint-every steps,
                      process group timeout --hang-s (finds the hang); planned and
                      pre-emptive become what a drain does without Lockstep: SIGTERM
                      to the rank's process
  lockstep_hot        lockstep_train + lockstep-coordinator (--spares 1: a spare is running)
  lockstep_cold       the same with --spares 0 (a spare is started when one is needed)
  lockstep_ref        (not by default) lockstep_train without faults: the library's
                      own fault-free reference, if it differs from plain DDP

Then, with ddp and lockstep_hot among the arms, --overhead-rounds interleaved
fault-free rounds of --overhead-steps steps: ddp and lockstep_hot (library,
coordinator, one idle hot spare) back to back, ABBA order. overhead_percent (top
level) is the median of the rounds' ratios of rank 0's median step time; the arms'
inrun_overhead_percent compares arms run minutes apart (steps during faults,
recoveries and spare starts left out).

Run from anywhere after building migration and lockstep-coordinator (its
binary: $LOCKSTEP_COORDINATOR_BIN, else this build's migration/lockstep-coordinator;
the library: $LOCKSTEP_TRAIN_PYTHONPATH, else the repository's python/).

options:
  --arms a,b,...        (default ddp,checkpoint_restart,lockstep_hot,lockstep_cold)
  --faults a,b,...      fault kinds to inject (default kill,stop,planned,preemptive)
  --schedule SPEC       explicit schedule, e.g. kill:2@60,stop:1@150,planned:0@240,preemptive:3@330
  --steps N             training steps (default 400)
  --hidden N            MLP width; 3 layers, 5*N^2+4*N parameters (default 1024: 5.25M)
  --batch N             per-rank batch (default 16)
  --checkpoint-every N  checkpoint_restart's interval (default 100)
  --hang-s S            checkpoint_restart's process group timeout (default 30)
  --monitor-s S         torchrun --monitor_interval (default 5, torchrun's default)
  --max-restarts N      torchrun --max_restarts (default 6)
  --heartbeat-timeout S the coordinator's --heartbeat-timeout (default 3)
  --arm-timeout S       give up on an arm after S seconds (default 1800)
  --overhead-rounds N   interleaved steady-state rounds (default 4; 0: none)
  --overhead-steps N    steps per run in those rounds (default 100)
  --overhead-only       only the rounds (no fault arms)
  --quick               120 steps, --hidden 256, checkpoint every 10, --hang-s 10,
                        --arm-timeout 300, steps padded to >= 0.2 s (so a spare can start
                        before the run ends), no overhead rounds: a functional check,
                        not the benchmark
  --workdir DIR         logs (default /tmp/migration-bench-PID)
  -h, --help
)";

std::string SelfDir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) Die("readlink /proc/self/exe failed");
  const std::string exe(buf, size_t(n));
  return exe.substr(0, exe.rfind('/'));
}

std::vector<std::string> Split(const std::string& v) {
  std::vector<std::string> out;
  for (size_t p = 0; p <= v.size();) {
    const size_t c = std::min(v.find(',', p), v.size());
    if (c > p) out.push_back(v.substr(p, c - p));
    p = c + 1;
  }
  return out;
}

std::vector<ScheduledFault> ParseSchedule(const std::string& spec) {
  std::vector<ScheduledFault> out;
  for (const auto& item : Split(spec)) {
    const size_t colon = item.find(':'), at = item.find('@');
    if (colon == std::string::npos || at == std::string::npos || at < colon) {
      Die("--schedule: bad item '" + item + "' (want KIND:RANK@STEP)");
    }
    ScheduledFault f{item.substr(0, colon), std::atoi(item.substr(colon + 1, at - colon - 1).c_str()),
                     std::atoi(item.substr(at + 1).c_str())};
    if (f.kind != "kill" && f.kind != "stop" && f.kind != "planned" && f.kind != "preemptive") {
      Die("--schedule: unknown fault kind '" + f.kind + "' (kill, stop, planned, preemptive)");
    }
    out.push_back(f);
  }
  return out;
}

int Main(int argc, char** argv) {
  Options o;
  std::vector<std::string> arms = {"ddp", "checkpoint_restart", "lockstep_hot", "lockstep_cold"};
  std::vector<std::string> kinds = {"kill", "stop", "planned", "preemptive"};
  std::string schedule;
  bool quick = false;
  int overhead_rounds = 4, overhead_steps = 100;
  bool overhead_only = false;
  std::set<std::string> given;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      given.insert(a);
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::cout << kHelp;
      return 0;
    } else if (a == "--arms") {
      arms = Split(value());
    } else if (a == "--faults") {
      kinds = Split(value());
    } else if (a == "--schedule") {
      schedule = value();
    } else if (a == "--steps") {
      o.steps = std::atoi(value().c_str());
    } else if (a == "--hidden") {
      o.hidden = std::atoi(value().c_str());
    } else if (a == "--batch") {
      o.batch = std::atoi(value().c_str());
    } else if (a == "--checkpoint-every") {
      o.checkpoint_every = std::atoi(value().c_str());
    } else if (a == "--hang-s") {
      o.hang_s = std::atof(value().c_str());
    } else if (a == "--monitor-s") {
      o.monitor_s = std::atof(value().c_str());
    } else if (a == "--max-restarts") {
      o.max_restarts = std::atoi(value().c_str());
    } else if (a == "--heartbeat-timeout") {
      o.heartbeat_timeout_s = std::atof(value().c_str());
    } else if (a == "--arm-timeout") {
      o.arm_timeout_s = std::atof(value().c_str());
    } else if (a == "--overhead-rounds") {
      overhead_rounds = std::atoi(value().c_str());
    } else if (a == "--overhead-steps") {
      overhead_steps = std::atoi(value().c_str());
    } else if (a == "--overhead-only") {
      overhead_only = true;
    } else if (a == "--workdir") {
      o.workdir = value();
    } else if (a == "--quick") {
      quick = true;
    } else {
      std::cerr << "migration: unknown option " << a << "\n" << kHelp;
      return 2;
    }
  }
  if (quick) {  // explicit flags win over --quick's values
    if (!given.count("--steps")) o.steps = 120;
    o.min_step_s = 0.2;
    if (!given.count("--hidden")) o.hidden = 256;
    if (!given.count("--checkpoint-every")) o.checkpoint_every = 10;
    if (!given.count("--hang-s")) o.hang_s = 10;
    if (!given.count("--arm-timeout")) o.arm_timeout_s = 300;
    if (!given.count("--overhead-rounds")) overhead_rounds = 0;
  }
  if (o.steps < 8 || o.hidden <= 0 || o.batch <= 0 || o.checkpoint_every <= 0 || o.hang_s <= 0 || o.monitor_s <= 0 ||
      o.max_restarts < 0 || o.heartbeat_timeout_s <= 0 || o.arm_timeout_s <= 0 || overhead_rounds < 0 ||
      overhead_steps < 8) {
    Die("bad option value (--steps, --overhead-steps >= 8; sizes, intervals and timeouts > 0)");
  }
  for (const auto& a : arms) {
    if (a != "ddp" && a != "checkpoint_restart" && a != "lockstep_hot" && a != "lockstep_cold" && a != "lockstep_ref") {
      Die("--arms: unknown arm '" + a + "' (ddp, checkpoint_restart, lockstep_hot, lockstep_cold, lockstep_ref)");
    }
  }
  if (!schedule.empty()) {
    o.faults = ParseSchedule(schedule);
  } else {
    const std::vector<ScheduledFault> all = {{"kill", 2, o.steps * 3 / 20},
                                             {"stop", 1, o.steps * 3 / 8},
                                             {"planned", 0, o.steps * 3 / 5},
                                             {"preemptive", 3, o.steps * 33 / 40}};
    for (const auto& f : all) {
      for (const auto& k : kinds) {
        if (k == f.kind) o.faults.push_back(f);
      }
    }
  }
  for (const auto& f : o.faults) {
    if (f.rank < 0 || f.rank >= o.world_size || f.step <= 0 || f.step >= o.steps) {
      Die("fault " + f.kind + " at rank " + std::to_string(f.rank) + " step " + std::to_string(f.step) +
          " is outside the run (ranks 0-3, steps 1.." + std::to_string(o.steps - 1) + ")");
    }
  }
  if (o.workdir.empty()) o.workdir = "/tmp/migration-bench-" + std::to_string(::getpid());
  if (RunCapture({"mkdir", "-p", o.workdir}).rc != 0) Die("cannot create " + o.workdir);

  Tools t;
  const std::string src = LOCKSTEP_SOURCE_DIR;
  t.workload = src + "/e2e/workloads/migration_train.py";
  t.pylib = std::getenv("LOCKSTEP_TRAIN_PYTHONPATH") ? std::getenv("LOCKSTEP_TRAIN_PYTHONPATH") : src + "/python";
  if (const char* env = std::getenv("LOCKSTEP_COORDINATOR_BIN")) {
    t.coordinator = env;
  } else {
    for (const char* rel : {"/../../migration/lockstep-coordinator", "/../../migration/coordinator/lockstep-coordinator"}) {
      if (t.coordinator.empty() && ::access((SelfDir() + rel).c_str(), X_OK) == 0) t.coordinator = SelfDir() + rel;
    }
  }
  const RunResult py = RunCapture({t.python, "-c", "import torch.distributed as d; assert d.is_gloo_available()"});
  if (py.rc != 0) Die("/usr/bin/python3 has no torch with gloo (Debian package python3-torch): " + py.err);
  if (::access(t.torchrun.c_str(), X_OK) != 0) Die("no " + t.torchrun + " (Debian package python3-torch)");

  BecomeSubreaper();
  Log("logs in " + o.workdir);
  std::vector<ArmResult> results;
  for (const auto& arm : arms) {
    if (overhead_only) break;
    Log("arm " + arm);
    results.push_back(RunArm(t, o, arm));
    KillDescendants();
    const auto& r = results.back();
    // The arms so far, in case a long run is cut short.
    const long long hp = o.hidden;
    WriteFile(o.workdir + "/partial.json", Summary(o, results, 5 * hp * hp + 4 * hp, "").dump() + "\n");
    Log("arm " + arm + (r.ran ? (r.completed ? ": completed" : ": NOT completed") : ": not run") +
        (r.note.empty() ? "" : " (" + r.note + ")"));
  }
  // Interleaved fault-free rounds: the steady-state overhead with load drifts hitting both arms alike.
  std::vector<SteadyRound> rounds;
  const auto has = [&](const char* arm) { return std::find(arms.begin(), arms.end(), arm) != arms.end(); };
  if (overhead_rounds > 0 && has("ddp") && has("lockstep_hot")) {
    Options seg = o;
    seg.steps = overhead_steps;
    seg.faults.clear();
    for (int i = 0; i < overhead_rounds; ++i) {
      SteadyRound r;
      r.ddp_first = i % 2 == 0;
      seg.workdir = o.workdir + "/round" + std::to_string(i + 1);
      for (int k = 0; k < 2; ++k) {
        const bool ddp_now = (k == 0) == r.ddp_first;
        Log("overhead round " + std::to_string(i + 1) + "/" + std::to_string(overhead_rounds) + ": " +
            (ddp_now ? "ddp" : "lockstep_hot (idle spare, no faults)"));
        (ddp_now ? r.ddp : r.lockstep) = RunArm(t, seg, ddp_now ? "ddp" : "lockstep_hot");
        KillDescendants();
      }
      rounds.push_back(std::move(r));
    }
  }
  std::string up = RunCapture({"uptime"}).out;
  while (!up.empty() && (up.back() == '\n' || up.front() == ' ')) up = up.back() == '\n' ? up.substr(0, up.size() - 1) : up.substr(1);
  const long long h = o.hidden;
  const auto summary = Summary(o, results, 5 * h * h + 4 * h, up, rounds, overhead_steps);
  std::cout << Table(summary) << "uptime: " << up << "\n";
  std::cout << summary.dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace lockstep::bench::migration

int main(int argc, char** argv) {
  using namespace lockstep::bench;
  SetLogTag("migration");
  InstallSignalHandlers();
  try {
    return migration::Main(argc, argv);
  } catch (const Interrupted&) {
    migration::KillDescendants();
    Log("interrupted; every process started was killed");
    return 130;
  } catch (const Fatal& e) {
    migration::KillDescendants();
    Log(std::string("error: ") + e.what());
    return 1;
  }
}
