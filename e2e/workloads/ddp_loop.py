#!/usr/bin/python3
"""A real PyTorch DDP training loop (CPU, gloo) for the `fabric` benchmark.

One process per host, each in its netlab namespace, talking over the hosts'
host addresses. Run with Debian's /usr/bin/python3 (torch 1.13):

  ip netns exec LAB-h1 /usr/bin/python3 e2e/workloads/ddp_loop.py \
      --rank 1 --world-size 4 --addr 10.77.200.2 --master-addr 10.77.200.1 --master-port 29500

Every step is one JSON line on stdout (flushed):
  {"event": "step", "rank": 1, "step": 17, "t": <time.time() at the end>, "step_ms": 61.2, "loss": 0.98}
plus a "start" line (model size, timeout) and an "end" line. A collective
error (a peer died, the timeout below expired) prints {"event": "error", ...}
and exits 1.

Timeout: gloo's default collective timeout is 30 minutes, far longer than a
benchmark can wait. This loop sets the process group timeout to --hang-s
(default 15 s): a collective that makes no progress for that long raises, and
the loop exits 1 as "hung". The `fabric` benchmark also declares a loop hung
when no rank logged a step for --hang-s.

The data of each step is fixed by (step, rank), so runs are comparable.
Rank 0 decides when to stop (--duration, or SIGTERM) and every rank learns it
from a one-element all-reduce each step, so all ranks leave together.
"""
import argparse
import datetime
import json
import os
import signal
import sys
import time


def log(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--addr", required=True, help="this host's host address (gloo binds it)")
    p.add_argument("--ifname", default="host0", help="interface holding --addr (GLOO_SOCKET_IFNAME)")
    p.add_argument("--master-addr", required=True, help="host 0's host address")
    p.add_argument("--master-port", type=int, default=29500)
    p.add_argument("--hidden", type=int, default=128, help="MLP width (parameters ~ 3 * hidden^2)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of training (rank 0 decides)")
    p.add_argument("--hang-s", type=float, default=15.0, help="collective timeout (gloo default: 1800)")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()

    os.environ.setdefault("GLOO_SOCKET_IFNAME", a.ifname)
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)  # same initial weights on every rank
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))

    try:
        dist.init_process_group(
            "gloo",
            init_method="tcp://%s:%d" % (a.master_addr, a.master_port),
            rank=a.rank,
            world_size=a.world_size,
            timeout=datetime.timedelta(seconds=a.hang_s),
        )
    except Exception as e:  # noqa: BLE001 - report any failure as a JSON line
        log({"event": "error", "rank": a.rank, "where": "init", "error": str(e), "t": time.time()})
        return 1

    h = a.hidden
    model = nn.Sequential(nn.Linear(h, 2 * h), nn.ReLU(), nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, h))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    params = sum(x.numel() for x in model.parameters())
    log({"event": "start", "rank": a.rank, "world_size": a.world_size, "addr": a.addr, "params": params,
         "grad_bytes": params * 4, "hang_s": a.hang_s, "t": time.time()})

    start = time.time()
    step = 0
    flag = torch.zeros(1)
    try:
        while True:
            t0 = time.time()
            g = torch.Generator().manual_seed(a.seed * 1_000_003 + step * 1009 + a.rank)
            x = torch.randn(a.batch, h, generator=g)
            y = torch.randn(a.batch, h, generator=g)
            opt.zero_grad()
            loss = nn.functional.mse_loss(ddp(x), y)
            loss.backward()  # DDP all-reduces the gradients here
            opt.step()
            flag[0] = 1.0 if a.rank == 0 and (stop["now"] or time.time() - start >= a.duration) else 0.0
            dist.all_reduce(flag)
            t1 = time.time()
            log({"event": "step", "rank": a.rank, "step": step, "t": t1, "step_ms": round((t1 - t0) * 1000, 2),
                 "loss": round(loss.item(), 5)})
            step += 1
            if flag[0] > 0:
                break
    except Exception as e:  # noqa: BLE001 - a collective error: peer gone, timeout
        log({"event": "error", "rank": a.rank, "where": "step %d" % step, "error": str(e).splitlines()[0][:300],
             "t": time.time()})
        return 1
    log({"event": "end", "rank": a.rank, "steps": step, "t": time.time()})
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
