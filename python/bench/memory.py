"""Extra host memory the library takes per rank: the same training processes
(tests/support/train_worker.py, the benchmark's model: --hidden 1024 is the 5.25M-parameter
MLP, Adam) run as plain torch DDP (no library), as the library with the script's DDP
wrapper kept, and as the library with its own reducer (job.all_reduce_gradients()), each
with WORLD ranks and the real coordinator. Each worker reports its VmRSS after building
and wrapping/tracking the model, and VmRSS and VmHWM (peak) after the last step.

    python3 bench/memory.py COORDINATOR_BIN [WORLD] [HIDDEN] [STEPS]

Prints one JSON object: per arm the mean over ranks (kB), and each library arm minus
plain DDP. Host memory only (CPU tensors); puts python/ on the path like the other
benchmarks (LOCKSTEP_TRAIN_PYTHONPATH overrides).
"""
import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(PY, "tests"))
os.environ["PYTHONPATH"] = os.environ.get("LOCKSTEP_TRAIN_PYTHONPATH") or PY

from support.cluster import WORKER, Cluster  # noqa: E402


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def summary(events_by_rank):
    out = {}
    for key, phase, field in (("tracked_rss_kb", "tracked", "rss_kb"), ("end_rss_kb", "end", "rss_kb"),
                              ("peak_kb", "end", "hwm_kb"), ("start_rss_kb", "start", "rss_kb")):
        out[key] = mean([e[field] for evs in events_by_rank for e in evs if e.get("phase") == phase])
    return out


def plain_ddp(world, args):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = [subprocess.Popen([sys.executable, WORKER, "--mode", "ddp", "--port", str(port), *args],
                              env=dict(os.environ, LOCKSTEP_RANK=str(r), LOCKSTEP_WORLD_SIZE=str(world)),
                              stdout=subprocess.PIPE, text=True) for r in range(world)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    return summary([[json.loads(line) for line in o.splitlines() if '"memory"' in line] for o in outs])


def library(binary, world, args, env):
    c = Cluster(binary, world, ["--heartbeat-timeout", "5s", "--spares", "0"])
    try:
        idx = [c.start("rank", r, args=args, env=env) for r in range(world)]
        c.wait_exit(idx)
        return summary([c.of(i, "memory") for i in idx])
    finally:
        c.stop()


def main():
    binary = sys.argv[1]
    world = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    hidden = sys.argv[3] if len(sys.argv) > 3 else "1024"
    steps = sys.argv[4] if len(sys.argv) > 4 else "20"
    args = ["--hidden", hidden, "--steps", steps, "--quiet"]
    res = {"world": world, "hidden": int(hidden), "steps": int(steps), "arms": {}}
    res["arms"]["plain_ddp"] = plain_ddp(world, args)
    res["arms"]["library_ddp_wrapper"] = library(binary, world, args, {"LOCKSTEP_TEST_WRAP": "ddp"})
    res["arms"]["library_reducer"] = library(binary, world, args, {})
    base = res["arms"]["plain_ddp"]
    for arm in ("library_ddp_wrapper", "library_reducer"):
        a = res["arms"][arm]
        a["extra_vs_plain_ddp_kb"] = {k: round(a[k] - base[k]) for k in ("tracked_rss_kb", "end_rss_kb", "peak_kb")
                                      if a.get(k) is not None and base.get(k) is not None}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
