"""What the replica fingerprint check costs (issue 20): the fingerprint of the
benchmark's model (Linear(h,2h)-ReLU-Linear(2h,h)-ReLU-Linear(h,h), h=1024: 5.25M
parameters) with its Adam state, against one training step of the same model, on this
machine's CPU, one thread (as the benchmarks train). The check also all-gathers 16 bytes
per rank (one small collective). Prints a table and one JSON line.
    /usr/bin/python3 python/bench/fingerprint_cost.py [--hidden 1024] [--reps 15]"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from lockstep_train.state import TrackedState  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    torch.set_num_threads(1)
    h = a.hidden
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(h, 2 * h), nn.ReLU(), nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, h))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, h), torch.randn(16, h)

    def step():
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    step()
    state = TrackedState(model, opt)
    steps, fps = [], []
    for _ in range(a.reps):          # interleaved, so a load trend hits both alike
        t0 = time.perf_counter()
        step()
        steps.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        state.fingerprint()
        fps.append(time.perf_counter() - t0)
    st, fp = statistics.median(steps), statistics.median(fps)
    nbytes = sum(t.numel() * t.element_size() for t in state.sync_tensors())
    print("state: %.1f MB (parameters, buffers, Adam state); medians of %d interleaved reps" % (nbytes / 1e6, a.reps))
    print("%-34s %10.2f ms  [%.2f, %.2f]" % ("training step (1 thread)", st * 1e3, min(steps) * 1e3, max(steps) * 1e3))
    print("%-34s %10.2f ms  [%.2f, %.2f]  %.2f GB/s" % ("fingerprint", fp * 1e3, min(fps) * 1e3, max(fps) * 1e3,
                                                       nbytes / fp / 1e9))
    rows = []
    for every in (1, 10, 100):
        pct = 100.0 * fp / every / st
        rows.append({"every": every, "overhead_percent": round(pct, 3)})
        print("%-34s %10.3f %%" % ("overhead, a check every %d steps" % every, pct))
    print(json.dumps({"benchmark": "fingerprint-cost", "hidden": h, "state_bytes": nbytes, "reps": a.reps,
                      "step_ms_median": round(st * 1e3, 3), "fingerprint_ms_median": round(fp * 1e3, 3),
                      "fingerprint_ms_min": round(min(fps) * 1e3, 3), "fingerprint_ms_max": round(max(fps) * 1e3, 3),
                      "rows": rows}))


if __name__ == "__main__":
    main()
