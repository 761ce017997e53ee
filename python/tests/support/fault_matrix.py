"""Faults during a recovery (issue 20): one run = a real coordinator, 4 ranks and 2 hot
spares (support/train_worker.py, Adam, gloo); a first fault (rank V kills itself at the
start of step S) starts a recovery, and a second fault, injected by the library's
test-only hooks (lockstep_train/faults.py), kills or stops a chosen member at a chosen
phase of that recovery. Every run is checked against a fault-free DDP run bit for bit
and for steps committed exactly once. Used by test_faults.py (a sample, in the test
command) and e2e/bench/migration-faults (every scenario over several seeds).
"""
import random
import signal

from .cluster import Cluster

WORLD = 4
STEPS = 24
SPARES = 2
COORD_ARGS = ["--heartbeat-timeout", "3s", "--report-grace", "2s", "--join-timeout", "20s",
              "--fence", "local", "--spares", "0"]
# Small transfer buckets, so that the state (about 70 kB) goes in many.
WORKER_ENV = {"LOCKSTEP_TRANSFER_BUCKET_MB": "0.008", "LOCKSTEP_HANG_TIMEOUT": "10"}

# (name, victim, fault): the victim is "source" (the lowest surviving rank, which sends
# the state), "receiver" (another survivor), or "spare" (the spare that takes the first
# victim's rank); the fault is a LOCKSTEP_TEST_FAULT entry in generation 1 (the recovery).
SCENARIOS = [
    ("source killed after the meta record", "source", "meta_sent@1"),
    ("source killed between tensor buckets", "source", "bucket_sent#3@1"),
    ("source hung between tensor buckets", "source", "bucket_sent#1@1:stop"),
    ("source killed after the vote", "source", "state_synced@1"),
    ("source killed in the first step after the re-form", "source", "step@1"),
    ("receiver killed mid-transfer", "receiver", "bucket_received#2@1"),
    ("receiver hung after the meta record", "receiver", "meta_received@1:stop"),
    ("receiver killed after verifying", "receiver", "verified@1"),
    ("survivor killed before the store", "receiver", "plan_received@1"),
    ("survivor killed at the store", "receiver", "store_connected@1"),
    ("survivor killed in the re-formed group", "receiver", "group_formed@1"),
    ("spare killed at the store", "spare", "store_connected@1"),
    ("spare hung mid-transfer", "spare", "bucket_received#1@1:stop"),
    ("spare killed after verifying", "spare", "verified@1"),
]


def draw(seed):
    """The first fault of a seed: (victim rank, step)."""
    r = random.Random(seed)
    return r.choice([1, 2, 3]), r.randint(3, 8)


def run(binary, ref, scenario, seed, worker_env=None):
    """One run. Returns {name, seed, ok, error, recovery_s, generations, detail}.
    worker_env: more environment for every worker (e.g. LOCKSTEP_TEST_WRAP=ddp)."""
    base_env = dict(WORKER_ENV, **(worker_env or {}))
    name, role, fault = scenario
    first_rank, first_step = draw(seed)
    survivors = [r for r in range(WORLD) if r != first_rank]
    source = survivors[0]
    receiver = survivors[1 + seed % (len(survivors) - 1)]
    victim_rank = {"source": source, "receiver": receiver}.get(role)
    if fault.startswith("step@"):
        fault = "step#%d@1" % first_step      # the first step after the re-form
    c = Cluster(binary, WORLD, COORD_ARGS)
    out = {"name": name, "seed": seed, "first": "rank %d at step %d" % (first_rank, first_step),
           "fault": fault, "victim": role, "ok": False, "error": ""}
    try:
        ranks = []
        for r in range(WORLD):
            env = dict(base_env)
            if r == first_rank:
                env["LOCKSTEP_TEST_FAULT"] = "step#%d@0" % first_step
            elif r == victim_rank:
                env["LOCKSTEP_TEST_FAULT"] = fault
            ranks.append(c.start("rank", r, steps=STEPS, env=env))
        spare_env = dict(base_env)
        if role == "spare":
            spare_env["LOCKSTEP_TEST_FAULT"] = fault
        spares = [c.start("spare", steps=STEPS, env=spare_env)]
        c.wait_for(lambda: c.of(spares[0], "registered"), "the first spare to register")
        spares.append(c.start("spare", steps=STEPS, env=dict(base_env)))
        victim = {"source": ranks[source], "receiver": ranks[receiver], "spare": spares[0]}[role]
        finishers = [i for i in ranks + spares if i not in (ranks[first_rank], victim)]
        c.wait_exit(finishers)
        # A hung victim is fenced (SIGKILL) by the coordinator; it must be gone too.
        c.wait_for(lambda: c.procs[victim].poll() is not None, "the second victim to be gone")
        out.update(check(c, ref, ranks, spares, first_rank, victim, finishers))
    except AssertionError as e:
        out["error"] = str(e).splitlines()[0][:300]
        out["detail"] = c.dump()
    finally:
        c.stop()
    return out


def check(c, ref, ranks, spares, first_rank, victim, finishers):
    """What every run must show; raises AssertionError with the reason."""
    dump = c.dump()
    for i in (ranks[first_rank], victim):
        rc = c.procs[i].wait(timeout=30)
        assert rc == -signal.SIGKILL, "victim %d exited %s, not killed:\n%s" % (i, rc, dump)
    ended = {}
    for i in finishers:
        rc = c.procs[i].returncode
        ends = c.of(i, "end")
        if i in spares and rc == 0 and not ends:
            continue          # a spare that was never needed: it exits when the job finished
        assert rc == 0, "worker %d exited %s:\n%s" % (i, rc, dump)
        assert len(ends) == 1, "worker %d: %d end events:\n%s" % (i, len(ends), dump)
        end = ends[0]
        assert end["step"] == STEPS, "worker %d ended at step %s:\n%s" % (i, end["step"], dump)
        assert end["hash"] == ref, "worker %d: final parameters differ from the fault-free run:\n%s" % (i, dump)
        assert end["rank"] not in ended, "rank %d finished twice:\n%s" % (end["rank"], dump)
        ended[end["rank"]] = i
        assert_committed_once(c, i, dump)
    assert sorted(ended) == list(range(WORLD)), "ranks that finished: %s\n%s" % (sorted(ended), dump)
    for i in ranks:
        if i in finishers:
            assert {e["pid"] for e in c.of(i)} == {c.procs[i].pid}, "a healthy rank was restarted:\n" + dump
    status, state = c.http("GET", "/v1/state")
    assert status == 200, state
    hist = state["history"]
    last = hist[-1]
    assert last["status"] == "complete" or state["phase"] == "finished", dump
    # From the first failure detected to training again after both faults.
    rec = last["complete_at"] - hist[1]["detected_at"] if len(hist) > 1 and last.get("complete_at") else None
    # Members that waited out their timeout at the store instead of learning at once
    # that the generation had ended.
    waited = [e for e in c.of() if "not every rank reached the store" in str(e.get("error", ""))]
    return {"ok": True, "generations": len(hist), "recovery_s": rec, "store_timeouts": len(waited),
            "divergence": sum(len(c.of(i, "divergence")) for i in finishers)}


def assert_committed_once(c, i, dump):
    """In one process, steps are committed in order and never twice; a step it did not
    commit itself is one whose state it received (its plan resumed after it)."""
    steps = [e["step"] for e in c.of(i, "committed")]
    assert steps == sorted(set(steps)), "worker %d committed a step twice or out of order: %s\n%s" % (i, steps, dump)
    plans = [e["resume_step"] for e in c.of(i, "plan_received")]
    first = plans[0] if plans else 0
    have = set(steps)
    for s in range(first + 1, steps[-1] + 1 if steps else 0):
        if s not in have:
            assert any(p >= s for p in plans), "worker %d skipped step %d:\n%s" % (i, s, dump)
            assert c.of(i, "state_received"), dump


def bench_table(results):
    """The benchmark's table rows (one per scenario)."""
    rows = {}
    for r in results:
        row = rows.setdefault(r["name"], {"runs": 0, "ok": 0, "recovery": []})
        row["runs"] += 1
        row["ok"] += 1 if r["ok"] else 0
        if r.get("recovery_s") is not None:
            row["recovery"].append(r["recovery_s"])
    return rows

def main(argv=None):
    """The benchmark mode: every scenario over --seeds seeds; a table and one JSON line."""
    import argparse
    import json
    import os
    import statistics
    import sys
    from .cluster import reference_hash
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("coordinator", help="path to lockstep-coordinator")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=1)
    a = ap.parse_args(argv)
    if not os.access(a.coordinator, os.X_OK):
        ap.error("%s is not an executable" % a.coordinator)
    ref = reference_hash(WORLD, STEPS)
    results = []
    for seed in range(a.first_seed, a.first_seed + a.seeds):
        for sc in SCENARIOS:
            r = run(a.coordinator, ref, sc, seed)
            r.pop("detail", None)
            results.append(r)
            print("seed %d  %-50s %s %s" % (seed, sc[0], "ok" if r["ok"] else "FAILED", r["error"]),
                  file=sys.stderr, flush=True)
    rows = bench_table(results)
    print("%-52s %5s %9s %26s" % ("scenario (then: 4 ranks, 2 hot spares, gloo)", "runs", "correct",
                                  "recovery s median [range]"))
    out = []
    for name, row in rows.items():
        rec = row["recovery"]
        med = statistics.median(rec) if rec else None
        rng = "[%.2f, %.2f]" % (min(rec), max(rec)) if rec else "-"
        print("%-52s %5d %9s %26s" % (name, row["runs"], "%d/%d" % (row["ok"], row["runs"]),
                                      ("%.2f " % med if med is not None else "- ") + rng))
        out.append({"scenario": name, "runs": row["runs"], "correct": row["ok"],
                    "recovery_s_median": med, "recovery_s_min": min(rec) if rec else None,
                    "recovery_s_max": max(rec) if rec else None})
    total = sum(r["ok"] for r in results)
    print("%d of %d runs ended bit-identical to fault-free DDP with every step committed once" % (total, len(results)))
    print(json.dumps({"benchmark": "migration-faults", "world": WORLD, "steps": STEPS, "spares": SPARES,
                      "seeds": a.seeds, "runs": len(results), "correct": total, "scenarios": out}))
    return 0 if total == len(results) else 1
