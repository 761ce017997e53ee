"""A tiny data-parallel training process for test_migration: data fixed by (step, rank),
Adam, JSON lines on stdout ({"ev": ...}). Modes:
  lockstep  the library (LOCKSTEP_* environment: coordinator, role, rank)
  ddp       plain torch DistributedDataParallel, no library (the reference)
  hsdp      plain FSDP2 HSDP (fully_shard on init_device_mesh((2, WORLD/2)), no library: the
            reference of --hsdp runs)
  fsdp      plain FSDP2 on init_device_mesh((1, WORLD)), no library: the reference of --fsdp runs
--hsdp: the library with FSDP2 HSDP, fully_shard on job.device_mesh(replicate=2, shard=WORLD/2)
(torch >= 2.15); the hash covers this rank's shard of the parameters and of Adam's state.
--fsdp: pure FSDP2, job.device_mesh(replicate=1, shard=WORLD, mirror_every=--mirror-every)
(the buddy mirror).
Options: --steps N, --step-sleep S (pacing, so a planned migration has steps left),
--hold-at K (with LOCKSTEP_TEST_HOLD=1: stop inside step K, before the gradient
all-reduce, and wait to be killed or stopped). LOCKSTEP_TEST_HOLD_PLAN=1: stop as soon
as a plan arrives (before forming the group). LOCKSTEP_TEST_DEVICE=cuda: the model, its
optimizer state and the batches on the GPU (gloo with CUDA tensors; the batches are drawn
on the CPU, so the data is the same on every device). LOCKSTEP_TEST_WRAP=ddp: the script
keeps torch's DistributedDataParallel (built on job.ddp_group) instead of calling
job.all_reduce_gradients()."""
import argparse
import datetime
import hashlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

IN, HID, OUT, BATCH = 16, 64, 8, 8   # --hidden H: the benchmark's H-2H-H-H model instead
DEVICE = torch.device(os.environ.get("LOCKSTEP_TEST_DEVICE", "cpu"))


def emit(ev, **fields):
    fields.update(ev=ev, pid=os.getpid(), t=time.time())
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


BATCHNORM = "--batchnorm" in sys.argv   # a BatchNorm layer: buffers DDP broadcasts from rank 0 in forward


def build():
    torch.manual_seed(1)
    norm = [nn.BatchNorm1d(HID)] if BATCHNORM else []
    model = nn.Sequential(nn.Linear(IN, HID), *norm, nn.ReLU(), nn.Linear(HID, HID), nn.ReLU(),
                          nn.Linear(HID, OUT)).to(DEVICE)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def set_hidden(h):
    """The spike's model: Linear(h,2h)-ReLU-Linear(2h,h)-ReLU-Linear(h,h) (5.25M params at 1024)."""
    global IN, HID, OUT, BATCH, build

    def build_big():
        torch.manual_seed(1)
        model = nn.Sequential(nn.Linear(h, 2 * h), nn.ReLU(), nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, h)).to(DEVICE)
        return model, torch.optim.Adam(model.parameters(), lr=1e-3)
    IN, OUT, BATCH, build = h, h, 16, build_big


class StepTimer:
    """Median time from one step's start to the next one's (everything the loop and the
    library do per step), and the process's CPU time (all threads) per step, skipping
    the first `warmup` steps."""

    def __init__(self, warmup=3):
        self.warmup, self.times, self.last = warmup, [], None
        self.cpu0, self.cpu1, self.counted = None, None, 0

    def tick(self, step):
        now = time.perf_counter()
        if self.last is not None and step > self.warmup:
            self.times.append(now - self.last)
            self.cpu1 = time.process_time()
        elif step == self.warmup:
            self.cpu0 = time.process_time()
        self.last = now

    def median(self):
        ts = sorted(self.times)
        return ts[len(ts) // 2] if ts else None

    def cpu_per_step(self):
        if self.cpu0 is None or self.cpu1 is None or not self.times:
            return None
        return (self.cpu1 - self.cpu0) / len(self.times)


def memory(phase):
    """This process's resident memory now and its peak (kB, from /proc/self/status)."""
    got = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    got[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        return
    emit("memory", phase=phase, rss_kb=got.get("VmRSS"), hwm_kb=got.get("VmHWM"))


HSDP = any(a in sys.argv for a in ("--hsdp", "hsdp", "--fsdp", "fsdp"))
if HSDP:   # as a script would: imported before ls.join() (seconds of CPU, no heartbeats missed)
    from torch.distributed.fsdp import fully_shard  # noqa: F401
    from torch.distributed.tensor import DTensor  # noqa: F401


def build_sharded(mesh):
    """The same model as build(), each Linear and the root fully_shard-ed on `mesh` (HSDP)."""
    from torch.distributed.fsdp import fully_shard
    model, _ = build()
    for m in model:
        if isinstance(m, nn.Linear):
            fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def digest_sharded(model, opt):
    """This rank's shard of the parameters and of the optimizer state."""
    ts = [p.to_local() for p in model.parameters()]
    for p in model.parameters():
        for _, v in sorted(opt.state.get(p, {}).items()):
            if torch.is_tensor(v):
                ts.append(v.to_local() if hasattr(v, "to_local") else v)
    return hashlib.sha256(b"".join(t.detach().cpu().numpy().tobytes() for t in ts)).hexdigest()


def run_hsdp_reference(a):
    from torch.distributed.device_mesh import init_device_mesh
    rank, world = int(os.environ["LOCKSTEP_RANK"]), int(os.environ["LOCKSTEP_WORLD_SIZE"])
    store = dist.TCPStore("127.0.0.1", a.port, world, rank == 0, datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    shape = (1, world) if a.mode == "fsdp" else (2, world // 2)
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=("replicate", "shard"))
    model, opt = build_sharded(mesh)
    for step in range(a.steps):
        x, y = batch(step, rank)
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    emit("end", rank=rank, step=a.steps, hash=digest_sharded(model, opt))
    dist.destroy_process_group()


def batch(step, rank):
    import lockstep_train as ls
    ls.seeding.seed(step, rank)
    return torch.randn(BATCH, IN).to(DEVICE), torch.randn(BATCH, OUT).to(DEVICE)


def digest(model):
    """Parameters, and with --batchnorm the buffers too (running statistics)."""
    ts = list(model.parameters()) + (list(model.buffers()) if BATCHNORM else [])
    return hashlib.sha256(b"".join(t.detach().cpu().numpy().tobytes() for t in ts)).hexdigest()


def run_ddp(a):
    rank, world = int(os.environ["LOCKSTEP_RANK"]), int(os.environ["LOCKSTEP_WORLD_SIZE"])
    store = dist.TCPStore("127.0.0.1", a.port, world, rank == 0, datetime.timedelta(seconds=60))
    memory("start")
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    model, opt = build()
    ddp = nn.parallel.DistributedDataParallel(model)
    memory("tracked")
    timer = StepTimer()
    for step in range(a.steps):
        timer.tick(step)
        x, y = batch(step, rank)
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        opt.zero_grad()
    timer.tick(a.steps)
    memory("end")
    emit("end", rank=rank, step=a.steps, hash=digest(model), median_step_s=timer.median(), cpu_per_step_s=timer.cpu_per_step())
    dist.destroy_process_group()


def run_lockstep(a):
    import lockstep_train as ls
    hold_plan = os.environ.get("LOCKSTEP_TEST_HOLD_PLAN") == "1"

    def on_event(name, **f):
        emit(name, **{k: v for k, v in f.items() if k != "t"})
        if hold_plan and name == "plan_received":   # a spare that dies while joining
            emit("holding", rank=f.get("rank"), step=f.get("step"))
            while True:
                time.sleep(1)
    memory("start")
    job = ls.join(on_event=on_event, overlap=not a.no_overlap, heartbeat_interval=a.heartbeat_interval)
    wrapped = os.environ.get("LOCKSTEP_TEST_WRAP") == "ddp"
    if a.fsdp:    # pure FSDP with the buddy mirror
        mesh = job.device_mesh(replicate=1, shard=int(os.environ["LOCKSTEP_WORLD_SIZE"]),
                               mirror_every=a.mirror_every)
        model, opt = build_sharded(mesh)
        a.hsdp = True
    elif a.hsdp:    # the mesh first: a spare waits in device_mesh() for its rank (its shard)
        mesh = job.device_mesh(replicate=2, shard=int(os.environ["LOCKSTEP_WORLD_SIZE"]) // 2)
        model, opt = build_sharded(mesh)
    else:
        model, opt = build()
    if wrapped:   # the user keeps DDP: built on the library's group, it reduces the gradients
        net = nn.parallel.DistributedDataParallel(model, process_group=job.ddp_group)
        job.track(net, opt)
    else:
        net = model
        job.track(model, opt)
    memory("tracked")
    hold = os.environ.get("LOCKSTEP_TEST_HOLD") == "1"
    timer = StepTimer()
    for step in job.steps(a.steps):
        timer.tick(step)
        with job.step_guard():
            x, y = batch(step, job.rank)
            if hold and step == a.hold_at and (wrapped or a.hsdp):   # DDP/FSDP reduce in backward: hold before it
                emit("holding", rank=job.rank, step=step)
                while True:
                    time.sleep(1)
            nn.functional.mse_loss(net(x), y).backward()
            if hold and step == a.hold_at:
                emit("holding", rank=job.rank, step=step)
                while True:
                    time.sleep(1)
            if not wrapped and not a.hsdp:
                job.all_reduce_gradients()
            opt.step()
            opt.zero_grad()
        if not job.failed and not a.quiet:
            emit("committed", rank=job.rank, step=step + 1, generation=job.generation)
            time.sleep(a.step_sleep)
    timer.tick(a.steps)
    memory("end")
    emit("end", rank=job.rank, step=job.step, generation=job.generation,
         hash=digest_sharded(model, opt) if a.hsdp else digest(model),
         median_step_s=timer.median(), cpu_per_step_s=timer.cpu_per_step(),
         slow_iterations=job._ddp.slow_iterations if wrapped else None,
         mirror=dict(job.mirror_stats, held_bytes=job.mirror_bytes()) if a.fsdp else None,
         pause_agree=dict(job.pause_stats))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("lockstep", "ddp", "hsdp", "fsdp"), default="lockstep")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--step-sleep", type=float, default=0.0)
    ap.add_argument("--hold-at", type=int, default=-1)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--hidden", type=int, default=0)
    ap.add_argument("--quiet", action="store_true", help="no per-step events (benchmark)")
    ap.add_argument("--no-overlap", action="store_true", help="reduce after backward (benchmark)")
    ap.add_argument("--heartbeat-interval", type=float, default=0.75)
    ap.add_argument("--batchnorm", action="store_true", help="a BatchNorm1d after the first layer")
    ap.add_argument("--hsdp", action="store_true", help="FSDP2 HSDP on job.device_mesh (2 x WORLD/2)")
    ap.add_argument("--fsdp", action="store_true", help="pure FSDP2 on job.device_mesh (1 x WORLD), buddy mirror")
    ap.add_argument("--mirror-every", type=int, default=10, help="--fsdp: the buddy mirror's K")
    a = ap.parse_args()
    if a.hidden:
        set_hidden(a.hidden)
    torch.set_num_threads(1)
    emit("started", role=os.environ.get("LOCKSTEP_ROLE", "rank"))
    if a.mode == "ddp":
        run_ddp(a)
    elif a.mode in ("hsdp", "fsdp"):
        run_hsdp_reference(a)
    else:
        run_lockstep(a)


if __name__ == "__main__":
    main()
