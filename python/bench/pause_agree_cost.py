"""What the in-band pause agreement costs (job.py _agree_pause: one all-reduce of 8 bytes
on the generation's group before every step). Two arms of the same lockstep_train run
(coordinator, WORLD ranks of tests/support/train_worker.py, the benchmark's model
Linear(h,2h)-ReLU-Linear(2h,h)-ReLU-Linear(h,h), h=1024: 5.25M parameters, gloo, CPU),
alternating in ABBA order: `agree` (LOCKSTEP_PAUSE_AGREE_EVERY=1, the default) and `off`
(LOCKSTEP_PAUSE_AGREE_EVERY=10**9: one agreement at step 0). Reports, per round, the
mean over ranks of each rank's median step time in both arms, and inside the `agree`
processes the agreement's own time (job.pause_stats: wall time of the all-reduce and its
wait, per agreement, and as a share of the median step). Prints a table and one JSON line.
    /usr/bin/python3 python/bench/pause_agree_cost.py COORDINATOR_BIN [--world 4]
        [--hidden 1024] [--steps 60] [--rounds 4]
The checkout's lockstep_train is measured (PYTHONPATH is set to it). The agreement's
time inside a training step includes waiting for the last rank to reach the boundary
(time the step's gradient all-reduce would otherwise wait). The collective alone:
    /usr/bin/python3 python/bench/pause_agree_cost.py --micro [--world 4] [--reps 200]
WORLD gloo processes, no training: a barrier, then one timed all-reduce of one int64
(as the agreement sends it), REPS times; the median over reps and ranks."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "tests", "support", "train_worker.py")
PKG = os.path.abspath(os.path.join(HERE, ".."))


def run(binary, world, hidden, steps, every, tmp):
    port_file = os.path.join(tmp, "port")
    for f in (port_file, os.path.join(tmp, "state.json")):
        if os.path.exists(f):
            os.unlink(f)
    coord = subprocess.Popen([binary, "--job", "pause-agree-bench", "--world-size", str(world), "--listen",
                              "127.0.0.1:0", "--port-file", port_file, "--state-file",
                              os.path.join(tmp, "state.json"), "--log-level", "warn"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                break
            time.sleep(0.02)
        with open(port_file) as f:
            url = "http://127.0.0.1:%s" % f.read().strip()
        env = dict(os.environ, PYTHONPATH=PKG + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
                   LOCKSTEP_COORDINATOR=url, LOCKSTEP_ROLE="rank", LOCKSTEP_WORLD_SIZE=str(world),
                   LOCKSTEP_PAUSE_AGREE_EVERY=str(every))
        procs = [subprocess.Popen([sys.executable, WORKER, "--mode", "lockstep", "--steps", str(steps), "--hidden",
                                   str(hidden), "--quiet"], env=dict(env, LOCKSTEP_RANK=str(r)),
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                 for r in range(world)]
        ends = []
        for p in procs:
            out, _ = p.communicate(timeout=1800)
            for line in out.splitlines():
                if '"ev": "end"' in line:
                    ends.append(json.loads(line))
        if len(ends) != world:
            raise SystemExit("pause_agree_cost: a rank did not finish (%d of %d ends)" % (len(ends), world))
        return ends
    finally:
        coord.kill()
        coord.wait()


def micro_rank(rank, world, port, reps):
    import datetime
    import torch
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    times = []
    for _ in range(reps):
        dist.barrier()
        v = torch.tensor([rank], dtype=torch.int64)
        t0 = time.perf_counter()
        dist.all_reduce(v, op=dist.ReduceOp.MAX, async_op=True).wait()
        int(v.item())
        times.append(time.perf_counter() - t0)
    dist.destroy_process_group()
    print(json.dumps({"rank": rank, "median_s": statistics.median(times)}))


def micro(world, reps):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    load0 = os.getloadavg()
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--micro-rank", str(r), "--world", str(world),
                               "--port", str(port), "--reps", str(reps)], stdout=subprocess.PIPE, text=True)
             for r in range(world)]
    meds = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1])["median_s"] for p in procs]
    load1 = os.getloadavg()
    out = {"benchmark": "pause_agree_cost", "mode": "micro", "world": world, "reps": reps,
           "median_ms": statistics.median(meds) * 1000, "per_rank_median_ms": [m * 1000 for m in meds],
           "loadavg_start": load0, "loadavg_end": load1}
    print("gloo all-reduce of one int64 over %d processes (after a barrier): median %.3f ms; load average %.1f -> %.1f"
          % (world, out["median_ms"], load0[0], load1[0]))
    print(json.dumps(out))


def main():
    if "--micro" in sys.argv or "--micro-rank" in sys.argv:
        ap = argparse.ArgumentParser(description=__doc__)
        ap.add_argument("--micro", action="store_true")
        ap.add_argument("--micro-rank", type=int, default=-1)
        ap.add_argument("--world", type=int, default=4)
        ap.add_argument("--port", type=int, default=0)
        ap.add_argument("--reps", type=int, default=200)
        a = ap.parse_args()
        if a.micro_rank >= 0:
            micro_rank(a.micro_rank, a.world, a.port, a.reps)
        else:
            micro(a.world, a.reps)
        return
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("coordinator")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="lockstep-pause-agree.") as tmp:
        print("%-6s %12s %12s %10s %14s %14s" % ("round", "off_step_s", "agree_step_s", "diff_%",
                                                 "agreement_ms", "agree_%_step"))
        for i in range(a.rounds):
            order = ("off", "agree") if i % 2 == 0 else ("agree", "off")
            got = {}
            for arm in order:
                got[arm] = run(a.coordinator, a.world, a.hidden, a.steps, 1 if arm == "agree" else 10 ** 9, tmp)
            off = statistics.mean(e["median_step_s"] for e in got["off"])
            agree = statistics.mean(e["median_step_s"] for e in got["agree"])
            per = statistics.mean(e["pause_agree"]["seconds"] / max(1, e["pause_agree"]["agreements"])
                                  for e in got["agree"])
            hashes = {e["hash"] for arm in got.values() for e in arm}
            row = {"off_step_s": off, "agree_step_s": agree, "diff_percent": (agree - off) / off * 100,
                   "agreement_s": per, "agreement_percent_of_step": per / agree * 100,
                   "agreements_per_rank": got["agree"][0]["pause_agree"]["agreements"], "same_hash": len(hashes) == 1}
            rows.append(row)
            print("%-6d %12.4f %12.4f %10.2f %14.3f %14.3f" % (i + 1, off, agree, row["diff_percent"], per * 1000,
                                                               row["agreement_percent_of_step"]))
    load1 = os.getloadavg()
    out = {"benchmark": "pause_agree_cost", "world": a.world, "hidden": a.hidden, "steps": a.steps,
           "rounds": rows, "median_diff_percent": statistics.median(r["diff_percent"] for r in rows),
           "median_agreement_ms": statistics.median(r["agreement_s"] for r in rows) * 1000,
           "median_agreement_percent_of_step": statistics.median(r["agreement_percent_of_step"] for r in rows),
           "bit_identical": all(r["same_hash"] for r in rows), "loadavg_start": load0, "loadavg_end": load1}
    print("agreement: median %.3f ms per step (%.3f%% of the step inside the processes); step-time difference "
          "agree vs off: median %.2f%% over %d rounds; load average %.1f -> %.1f"
          % (out["median_agreement_ms"], out["median_agreement_percent_of_step"], out["median_diff_percent"],
             len(rows), load0[0], load1[0]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
