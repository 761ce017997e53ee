"""One rank of a tiny data-parallel run for test_reduce: `torchddp` (torch's
DistributedDataParallel) or the library's GradientReducer (`ddp`: overlapped with
backward, `ddp-late`: reduced after backward, `ddp-forgot`: overlapped, `flat`). With
ACCUM=1 each step has two micro-batches: torch's DDP skips the first one's reduction
with no_sync(); the library with `enabled = False` (`ddp`), or not at all (`ddp-late`;
`ddp-forgot`: the reducer must notice the second backward). Prints the sha256 of the final parameters, the number of rebuilt
buckets and how many bucket reductions started during backward.
Usage: reduce_worker.py MODE RANK WORLD PORT STEPS [ACCUM]"""
import contextlib
import datetime
import hashlib
import sys

import torch
import torch.distributed as dist
from torch import nn

from lockstep_train.reduce import GradientReducer

CAP_MB = 0.004         # small buckets so that a tiny model spans several of them


def main():
    mode, rank, world, port, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
        int(sys.argv[5])
    accum = len(sys.argv) > 6 and sys.argv[6] == "1"
    torch.set_num_threads(1)
    dist._DEFAULT_FIRST_BUCKET_BYTES = 4096
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(24, 48), nn.ReLU(), nn.Linear(48, 40), nn.ReLU(), nn.Linear(40, 8))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    if mode == "torchddp":
        net, red = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=CAP_MB), None
    else:
        net = model
        red = GradientReducer(model.parameters(), "flat" if mode == "flat" else "ddp",
                              bucket_cap_mb=CAP_MB, overlap=mode in ("ddp", "ddp-forgot"))

    def quiet():
        """The first micro-batch's backward must not reduce."""
        if mode == "torchddp":
            return net.no_sync()
        if mode == "ddp":
            red.enabled = False
            return _restore(red)
        return contextlib.nullcontext()

    for step in range(steps):
        g = torch.Generator().manual_seed(1000 * step + rank)
        if red is not None:
            red.begin(step)
        if accum:
            x, y = torch.randn(8, 24, generator=g), torch.randn(8, 8, generator=g)
            with quiet():
                nn.functional.mse_loss(net(x), y).backward()
        x, y = torch.randn(8, 24, generator=g), torch.randn(8, 8, generator=g)
        nn.functional.mse_loss(net(x), y).backward()
        if red is not None:
            red.reduce(step)
        opt.step()
        opt.zero_grad()
    h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    nb = len(red.layout_for(1)) if red is not None else 0
    print("%s %s %d %d" % (mode, h, nb, red.overlapped if red is not None else 0), flush=True)
    # Every rank is done before any tears the group down: torch 2.x's gloo aborted a rank
    # (std::terminate) once when its peer destroyed the group first (2026-11-29, plain DDP).
    dist.barrier()
    dist.destroy_process_group()


@contextlib.contextmanager
def _restore(red):
    try:
        yield
    finally:
        red.enabled = True


if __name__ == "__main__":
    main()
