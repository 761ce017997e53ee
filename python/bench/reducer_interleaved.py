"""One rank of the interleaved reducer comparison (python/bench/step_overhead.sh runs
WORLD of them): the same processes and process group train three copies of the same
model in alternating blocks of BLOCK steps (order reversed every other block, a barrier
before each block): torch's DistributedDataParallel, the library's GradientReducer
overlapped with backward, and the GradientReducer reducing after backward. Machine load
then hits the three alike, so CPU and wall time per step compare the reductions alone
(no coordinator, heartbeats or process start-up). Rank 0 prints one JSON line.
Usage: reducer_interleaved.py RANK WORLD PORT BLOCKS [HIDDEN=1024] [BLOCK=5]"""
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

from lockstep_train.reduce import GradientReducer  # noqa: E402

ARMS = ("ddp", "overlap", "after_backward")


def main():
    rank, world, port, blocks = (int(a) for a in sys.argv[1:5])
    h = int(sys.argv[5]) if len(sys.argv) > 5 else 1024
    block = int(sys.argv[6]) if len(sys.argv) > 6 else 5
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)

    def build():
        torch.manual_seed(1)
        m = nn.Sequential(nn.Linear(h, 2 * h), nn.ReLU(), nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, h))
        return m, torch.optim.Adam(m.parameters(), lr=1e-3)

    models = {a: build() for a in ARMS}
    ddp = nn.parallel.DistributedDataParallel(models["ddp"][0])
    reducers = {"overlap": GradientReducer(models["overlap"][0].parameters(), "ddp", overlap=True),
                "after_backward": GradientReducer(models["after_backward"][0].parameters(), "ddp",
                                                  overlap=False)}
    done = {a: 0 for a in ARMS}
    cpu = {a: 0.0 for a in ARMS}
    wall = {a: 0.0 for a in ARMS}
    counted = {a: 0 for a in ARMS}

    def step(arm):
        s = done[arm]
        g = torch.Generator().manual_seed(1000 * s + rank)
        x, y = torch.randn(16, h, generator=g), torch.randn(16, h, generator=g)
        model, opt = models[arm]
        if arm == "ddp":
            nn.functional.mse_loss(ddp(x), y).backward()
        else:
            red = reducers[arm]
            red.begin(s)
            nn.functional.mse_loss(model(x), y).backward()
            red.reduce(s)
        opt.step()
        opt.zero_grad()
        done[arm] += 1

    for arm in ARMS:          # warm-up: first iterations, bucket rebuild
        for _ in range(3):
            step(arm)
    for b in range(blocks):
        for arm in (ARMS if b % 2 == 0 else ARMS[::-1]):
            dist.barrier()
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(block):
                step(arm)
            cpu[arm] += time.process_time() - c0
            wall[arm] += time.perf_counter() - w0
            counted[arm] += block
    same = [torch.equal(p, q) for p, q in zip(models["ddp"][0].parameters(), models["overlap"][0].parameters())]
    if rank == 0:
        per = {a: {"cpu_step_s": cpu[a] / counted[a], "wall_step_s": wall[a] / counted[a]} for a in ARMS}
        for a in ARMS:
            per[a]["cpu_percent"] = round((per[a]["cpu_step_s"] / per["ddp"]["cpu_step_s"] - 1) * 100, 2)
            per[a]["wall_percent"] = round((per[a]["wall_step_s"] / per["ddp"]["wall_step_s"] - 1) * 100, 2)
        print(json.dumps({"arms": per, "steps_per_arm": counted["ddp"], "ddp_equals_overlap": all(same)}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
