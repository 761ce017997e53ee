"""Steady-state cost of the buddy mirror (pure FSDP2, job.device_mesh(replicate=1,
shard=WORLD, mirror_every=K)): the same training processes (tests/support/train_worker.py
--fsdp, the benchmark's MLP: --hidden 1024 is 5.25M parameters, Adam, one thread per
process) with the real coordinator, no spare, no fault, for K = off (mirror_every=10**9:
one exchange at step 0 only), 10 and 1, in ABBA order over ROUNDS rounds. Each worker
reports its median step-to-step time (after 3 warm-up steps), the mirror's exchanges,
seconds and bytes per snapshot, the host memory the mirror holds at the end (its own
snapshot and its predecessor's), and its VmRSS.

    python3 bench/buddy_cost.py COORDINATOR_BIN [WORLD] [HIDDEN] [STEPS] [ROUNDS] [KS]

KS: the arms, comma-separated (default off,10,1). Each exchange is timed inside the same
processes too (`exchange_ms`), so the cost at K is also exchange_ms / K against the step
time of one run, which machine load shifts less than a comparison of runs minutes apart.

Run with the torch 2.x python (FSDP2, torch >= 2.15). Prints a table and ends with one
JSON line. Puts python/ on the path like the other benchmarks (LOCKSTEP_TRAIN_PYTHONPATH
overrides).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(PY, "tests"))
os.environ["PYTHONPATH"] = os.environ.get("LOCKSTEP_TRAIN_PYTHONPATH") or PY

import support.cluster  # noqa: E402
from support.cluster import Cluster  # noqa: E402

support.cluster.SAFETY_S = 900   # 4 torch 2.x imports at load 28 took over 120 s to register

OFF = 10 ** 9


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def run(binary, world, hidden, steps, k):
    c = Cluster(binary, world, ["--heartbeat-timeout", "30s", "--join-timeout", "120s", "--spares", "0"])
    try:
        args = ("--fsdp", "--mirror-every", str(k), "--hidden", str(hidden), "--quiet")
        idx = [c.start("rank", r, steps=steps, args=args) for r in range(world)]
        c.wait_exit(idx)
        ends = [c.of(i, "end") for i in idx]
        if not all(ends):
            raise SystemExit("a worker ended without its end event:\n" + c.dump())
        ends = [e[0] for e in ends]
        mem = [e for i in idx for e in c.of(i, "memory") if e.get("phase") == "end"]
        mir = [e["mirror"] for e in ends]
        return {"k": k, "step_ms": 1000 * mean([e["median_step_s"] for e in ends]),
                "exchanges": mir[0]["exchanges"],
                "exchange_ms": 1000 * mean([m["seconds"] / max(1, m["exchanges"]) for m in mir]),
                "snapshot_mb": mean([m["bytes"] / max(1, m["exchanges"]) for m in mir]) / 2 ** 20,
                "held_mb": mean([m["held_bytes"] for m in mir]) / 2 ** 20,
                "end_rss_mb": mean([e["rss_kb"] for e in mem]) / 1024,
                "hashes": [e["hash"] for e in ends]}
    finally:
        c.stop()


def main():
    binary = sys.argv[1]
    world = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    hidden = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    ks = [OFF if k == "off" else int(k) for k in (sys.argv[6] if len(sys.argv) > 6 else "off,10,1").split(",")]
    runs = {k: [] for k in ks}
    for r in range(rounds):
        for k in (ks if r % 2 == 0 else ks[::-1]) + (ks[::-1] if r % 2 == 0 else ks):
            res = run(binary, world, hidden, steps, k)
            runs[k].append(res)
            print("round %d K=%s: step %.1f ms, %d exchanges of %.2f ms, snapshot %.1f MB, held %.1f MB, RSS %.0f MB"
                  % (r, "off" if k == OFF else k, res["step_ms"], res["exchanges"], res["exchange_ms"],
                     res["snapshot_mb"], res["held_mb"], res["end_rss_mb"]), flush=True)
    base = median([x["step_ms"] for x in runs[OFF]]) if OFF in runs else None
    out = {"benchmark": "buddy_cost", "world": world, "hidden": hidden, "steps": steps, "rounds": rounds, "arms": {}}
    print("| K | step ms (median of runs) | vs off | exchange ms | snapshot MB | mirror holds MB | RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for k in ks:
        rs = runs[k]
        step = median([x["step_ms"] for x in rs])
        ex = median([x["exchange_ms"] for x in rs])
        arm = {"step_ms": step, "overhead_percent": 100 * (step / base - 1) if base else None,
               "exchange_ms": ex, "snapshot_mb": rs[0]["snapshot_mb"],
               # the exchange's share, within the same processes: one exchange every K steps
               # (from the K = 1 run, whose median step holds one exchange: the step without it is step - ex)
               "inrun_percent_at": {str(kk): 100 * ex / kk / (step - ex) for kk in (1, 10, 100)} if k == 1 else None,
               "held_mb": rs[0]["held_mb"], "end_rss_mb": median([x["end_rss_mb"] for x in rs]),
               "same_final_shards": all(x["hashes"] == rs[0]["hashes"] for x in rs),
               "runs_step_ms": [round(x["step_ms"], 2) for x in rs]}
        out["arms"]["off" if k == OFF else "k%d" % k] = arm
        print("| %s | %.1f | %s | %.2f | %.2f | %.2f | %.0f |"
              % ("off" if k == OFF else k, step, "-" if base is None else "%+.2f%%" % arm["overhead_percent"],
                 arm["exchange_ms"], arm["snapshot_mb"], arm["held_mb"], arm["end_rss_mb"]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
