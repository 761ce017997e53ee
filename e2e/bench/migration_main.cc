// migration: the live rank migration benchmark of issue 9 (see kAbout and --help).
// Prints a table and ONE JSON line.
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "bench_cli.h"
#include "clocksync_proc.h"
#include "migration_report.h"
#include "migration_run.h"

namespace lockstep::bench::migration {
namespace {

const char* kAbout = R"(migration: live rank migration benchmark (issue 9) with real PyTorch processes on CPU
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
                      to the rank's process, which saves a checkpoint at the next step
                      boundary and exits (--save-on-sigterm, as its users write it)
  lockstep_hot        lockstep_train + lockstep-coordinator (--spares 1: a spare is running)
  lockstep_cold       the same with --spares 0 (a spare is started when one is needed)
  lockstep_remote     lockstep_hot as if every rank ran on another host: the coordinator
                      neither watches pids nor fences (--pid-check off --fence none), so
                      failures are found by the ranks' reports and heartbeat timeouts
  lockstep_ref        (not by default) lockstep_train without faults: the library's
                      own fault-free reference, if it differs from plain DDP
  torchft             (not by default) TorchFT (PyPI torchft, scripts/install-torchft): a
                      lighthouse and one replica group per rank, each under its own
                      torchrun --max_restarts, Manager + its DDP and optimizer wrappers,
                      configured as its train_ddp.py example; the same faults (planned and
                      pre-emptive: SIGTERM to the group's process), on that environment's
                      torch 2.x (torchft needs >= 2.7; the other arms stay on Debian's 1.13)
  ddp_torch2          plain DDP on that torch 2.x, no faults: torchft's reference hash, step
                      time and time to N steps (added whenever torchft runs)

Then, with ddp and lockstep_hot among the arms, --overhead-rounds interleaved
fault-free rounds of --overhead-steps steps: ddp and lockstep_hot (library,
coordinator, one idle hot spare) back to back, ABBA order (with torchft among the
arms, fault-free ddp_torch2 and torchft runs in each round too: ddp, lockstep_hot,
ddp_torch2, torchft, then the reverse). overhead_percent (top
level) is the mean of the rounds' ratios of rank 0's mean step time, with its 95%
interval (overhead_ci95_percent; not resolvable below its half-width where it holds
0); overhead_median_step_percent the median of median-step ratios; the arms'
inrun_overhead_percent compares arms run minutes apart (steps during faults,
recoveries and spare starts left out).

Run from anywhere after building migration and lockstep-coordinator (its
binary: $LOCKSTEP_COORDINATOR_BIN, else this build's migration/lockstep-coordinator;
the library: $LOCKSTEP_TRAIN_PYTHONPATH, else the repository's python/).
)";

std::string SelfDir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) Die("readlink /proc/self/exe failed");
  const std::string exe(buf, size_t(n));
  return exe.substr(0, exe.rfind('/'));
}

std::vector<ScheduledFault> ParseSchedule(const std::string& spec) {
  std::vector<ScheduledFault> out;
  std::vector<std::string> items;
  for (size_t p = 0; p <= spec.size();) {
    const size_t c = std::min(spec.find(',', p), spec.size());
    if (c > p) items.push_back(spec.substr(p, c - p));
    p = c + 1;
  }
  for (const auto& item : items) {
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
  std::vector<std::string> arms = {"ddp", "checkpoint_restart", "lockstep_hot", "lockstep_cold", "lockstep_remote"};
  std::vector<std::string> kinds = {"kill", "stop", "planned", "preemptive"};
  std::string schedule;
  bool quick = false;
  int overhead_rounds = 4, overhead_steps = 100;
  bool overhead_only = false;
  CLI::App app{kAbout, "migration"};
  app.add_option("--arms", arms, "arms to run (default ddp,checkpoint_restart,lockstep_hot,lockstep_cold,lockstep_remote)")
      ->delimiter(',')
      ->check(CLI::IsMember(
          {"ddp", "checkpoint_restart", "lockstep_hot", "lockstep_cold", "lockstep_remote", "lockstep_ref", "ddp_torch2",
           "torchft"}));
  app.add_option("--faults", kinds, "fault kinds to inject (default kill,stop,planned,preemptive)")
      ->delimiter(',')
      ->check(CLI::IsMember({"kill", "stop", "planned", "preemptive"}));
  app.add_option("--schedule", schedule,
                 "explicit schedule, e.g. kill:2@60,stop:1@150,planned:0@240,preemptive:3@330");
  CLI::Option* steps = app.add_option("--steps", o.steps, "training steps")
                           ->check(CLI::Range(8, 1'000'000))
                           ->capture_default_str();
  CLI::Option* hidden = app.add_option("--hidden", o.hidden, "MLP width; 3 layers, 5*N^2+4*N parameters (1024: 5.25M)")
                            ->check(Positive())
                            ->capture_default_str();
  app.add_option("--batch", o.batch, "per-rank batch")->check(Positive())->capture_default_str();
  CLI::Option* every = app.add_option("--checkpoint-every", o.checkpoint_every, "checkpoint_restart's interval")
                           ->check(Positive())
                           ->capture_default_str();
  CLI::Option* hang = app.add_option("--hang-s", o.hang_s, "checkpoint_restart's process group timeout")
                          ->check(Positive())
                          ->capture_default_str();
  app.add_option("--monitor-s", o.monitor_s, "torchrun --monitor_interval (torchrun's default)")
      ->check(Positive())
      ->capture_default_str();
  app.add_option("--max-restarts", o.max_restarts, "torchrun --max_restarts")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--heartbeat-timeout", o.heartbeat_timeout_s, "the coordinator's --heartbeat-timeout")
      ->check(Positive())
      ->capture_default_str();
  app.add_option("--hot-spares", o.hot_spares, "lockstep_hot: spares running from the start and kept ready (--spares)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  CLI::Option* arm_timeout = app.add_option("--arm-timeout", o.arm_timeout_s, "give up on an arm after S seconds")
                                 ->check(Positive())
                                 ->capture_default_str();
  CLI::Option* rounds_opt = app.add_option("--overhead-rounds", overhead_rounds, "interleaved steady-state rounds (0: none)")
                            ->check(CLI::NonNegativeNumber)
                            ->capture_default_str();
  app.add_option("--overhead-steps", overhead_steps, "steps per run in those rounds")
      ->check(CLI::Range(8, 1'000'000))
      ->capture_default_str();
  app.add_flag("--overhead-only", overhead_only, "only the rounds (no fault arms)");
  app.add_flag("--quick", quick,
               "120 steps, --hidden 256, checkpoint every 10, --hang-s 10, --arm-timeout 300, steps padded to >= "
               "0.2 s (so a spare can start before the run ends), no overhead rounds: a functional check, not the "
               "benchmark");
  app.add_option("--workdir", o.workdir, "logs (default /tmp/migration-bench-PID)");
  if (const auto rc = ParseArgs(app, argc, argv)) return *rc;
  if (quick) {  // explicit flags win over --quick's values
    if (steps->count() == 0) o.steps = 120;
    o.min_step_s = 0.2;
    if (hidden->count() == 0) o.hidden = 256;
    if (every->count() == 0) o.checkpoint_every = 10;
    if (hang->count() == 0) o.hang_s = 10;
    if (arm_timeout->count() == 0) o.arm_timeout_s = 300;
    if (rounds_opt->count() == 0) overhead_rounds = 0;
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
  const auto has = [&](const char* arm) { return std::find(arms.begin(), arms.end(), arm) != arms.end(); };
  if (has("torchft") && !has("ddp_torch2")) {  // its reference on the same torch, just before it
    arms.insert(std::find(arms.begin(), arms.end(), "torchft"), "ddp_torch2");
  }
  if (has("torchft") || has("ddp_torch2")) {
    const RunResult env = RunCapture({src + "/scripts/install-torchft", "--print"});
    std::string dir = env.out;
    while (!dir.empty() && dir.back() == '\n') dir.pop_back();
    dir = dir.substr(dir.rfind('\n') == std::string::npos ? 0 : dir.rfind('\n') + 1);
    if (env.rc != 0 || dir.empty()) Die("no torchft environment (run scripts/setup or scripts/install-torchft): " + env.err);
    t.python2 = dir + "/bin/python";
    t.lighthouse = dir + "/bin/torchft_lighthouse";
    const RunResult v = RunCapture({t.python2, "-c", "import importlib.metadata as m, torch; print('torchft', m.version('torchft'), 'torch', torch.__version__)"});
    if (v.rc != 0) Die(t.python2 + " cannot import torch and torchft: " + v.err);
    Log("torchft and ddp_torch2 run on " + t.python2 + ": " + v.out.substr(0, v.out.find('\n')));
  }
  const RunResult py = RunCapture({t.python, "-c", "import torch.distributed as d; assert d.is_gloo_available()"});
  if (py.rc != 0) Die("/usr/bin/python3 has no torch with gloo (Debian package python3-torch): " + py.err);
  if (::access(t.torchrun[0].c_str(), X_OK) != 0) Die("no " + t.torchrun[0] + " (Debian package python3-torch)");

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
  if (overhead_rounds > 0 && has("ddp") && has("lockstep_hot")) {
    Options seg = o;
    seg.steps = overhead_steps;
    seg.faults.clear();
    for (int i = 0; i < overhead_rounds; ++i) {
      SteadyRound r;
      r.ddp_first = i % 2 == 0;
      seg.workdir = o.workdir + "/round" + std::to_string(i + 1);
      std::vector<std::string> order = {"ddp", "lockstep_hot"};
      if (has("torchft")) order.insert(order.end(), {"ddp_torch2", "torchft"});
      if (!r.ddp_first) std::reverse(order.begin(), order.end());
      for (const auto& arm : order) {
        Log("overhead round " + std::to_string(i + 1) + "/" + std::to_string(overhead_rounds) + ": " +
            (arm == "lockstep_hot" ? "lockstep_hot (idle spare, no faults)" : arm + " (no faults)"));
        ArmResult res = RunArm(t, seg, arm);
        KillDescendants();
        if (arm == "ddp") r.ddp = std::move(res);
        if (arm == "lockstep_hot") r.lockstep = std::move(res);
        if (arm == "ddp_torch2") r.ddp_torch2 = std::move(res);
        if (arm == "torchft") r.torchft = std::move(res);
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
