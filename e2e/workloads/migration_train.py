#!/usr/bin/python3
"""Training workload of the `migration` benchmark (issue 9): an MLP trained with Adam.

Run with Debian's /usr/bin/python3 (torch 1.13, gloo, CPU), one thread per process.

  --mode ddp       plain torch DDP, written as users write it (env:// rendezvous:
                   RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as torchrun sets them).
                   With --checkpoint-dir: rank 0 saves a checkpoint every
                   --checkpoint-every steps (torch.save, write + rename) and every
                   rank resumes from the latest one at start: the
                   checkpoint-restart arm under `torchrun --max-restarts N`.
                   With --save-on-sigterm too (what users of checkpoint-restart
                   write for drains and pre-emptions): a rank sent SIGTERM saves a
                   checkpoint at the next step boundary (its replica is every
                   rank's under DDP), logs it and exits 143, so torchrun restarts
                   the group from that step and no committed step is run again.
                   A collective error logs an `error` event and exits 1.
  --mode lockstep  the same loop on the lockstep_train library (python/lockstep_train,
                   docs/migration.md): LOCKSTEP_COORDINATOR, LOCKSTEP_ROLE=rank|spare,
                   LOCKSTEP_RANK from the environment.
  --mode torchft   the same loop on TorchFT (PyPI torchft, torch >= 2.7), configured as
                   its train_ddp.py example: one replica group per rank (REPLICA_GROUP_ID,
                   NUM_REPLICA_GROUPS; each under its own `torchrun --max-restarts`, whose
                   store the Manager uses), torchft.ProcessGroupGloo (timeout 5 s),
                   PGTransport (10 s), Manager(min_replica_size=1, timeout 30 s),
                   torchft.DistributedDataParallel and torchft.Optimizer; the lighthouse
                   at TORCHFT_LIGHTHOUSE. The batch of a step is drawn for the step the
                   Manager is at (manager.current_step()), so a step retried after a
                   failed commit uses the same data; a group outside the quorum of a step
                   (failed, or healing) contributes no batch: the log's `participants`.
                   The first processes wait for all groups (a file barrier in
                   --marker-dir) so that the first quorum holds every group.

Determinism: the initial weights come from --seed (equal on every rank); the batch of
step s on rank r is drawn from a generator seeded by (seed, s, r) only.

Faults (--faults "kill:2@30,stop:1@60"): the process holding rank 2 SIGKILLs itself when it
is about to run step 30 for the first time; `stop` SIGSTOPs itself (a hang). Each fault
fires once: an O_EXCL marker file in --marker-dir is created before it fires, so the
restarted processes of checkpoint-restart (which run step 30 again), the replay of an
interrupted step and the spare that took the rank over never repeat it.

Log (--log-file FILE, appended, one JSON line per event, `t` = time.time()):
  {"event":"launch","pid":..,"mode":..,"role":..}                 first, before `import torch`
  {"event":"start","pid":..,"mode":..,"role":..,"rank":..,"params":..}
  {"event":"step","rank":r,"step":s,"pid":..,"loss":..,"t":..}   step s committed (optimizer applied it)
      torchft adds "participants" (replica groups whose batches the step averaged) and
      "participating" (whether this group's batch was one of them)
  {"event":"fault","kind":"kill"|"stop","rank":r,"step":s,"pid":..,"t":..}
  {"event":"error","rank":r,"step":s,"error":..,"t":..}          ddp: a collective failed
  {"event":"checkpoint","step":s,"t":..,"reason":"periodic"|"sigterm"} / {"event":"resume","step":s,"t":..}
  {"event":"lib", ...}                                            lockstep_train's on_event events
  {"event":"end","rank":r,"steps":n,"sha256":..(rank 0; torchft: every group),"t":..}
Rank 0 writes the sha256 of the final parameters (their exact bytes, in
model.parameters() order) to --hash-file.
"""
import argparse
import datetime
import glob
import hashlib
import json
import os
import signal
import sys
import time

LOG = {"fd": None}


def log(obj):
    obj.setdefault("t", time.time())
    line = json.dumps(obj, separators=(",", ":")) + "\n"
    if LOG["fd"] is None:
        sys.stdout.write(line)
        sys.stdout.flush()
    else:
        os.write(LOG["fd"], line.encode())  # O_APPEND: one write per line


def parse_faults(spec):
    """'kill:2@30,stop:1@60' -> {(rank, step): kind}."""
    out = {}
    for item in filter(None, (s.strip() for s in (spec or "").split(","))):
        try:
            kind, rest = item.split(":")
            rank, step = rest.split("@")
            if kind not in ("kill", "stop"):
                raise ValueError(kind)
            out[(int(rank), int(step))] = kind
        except ValueError:
            raise SystemExit("--faults: bad item %r (want kill:RANK@STEP or stop:RANK@STEP)" % item)
    return out


class Faults:
    def __init__(self, spec, marker_dir):
        self.table = parse_faults(spec)
        self.marker_dir = marker_dir
        if self.table and not marker_dir:
            raise SystemExit("--faults needs --marker-dir")

    def maybe_fire(self, rank, step):
        kind = self.table.get((rank, step))
        if kind is None:
            return
        path = os.path.join(self.marker_dir, "fault-%s-r%d-s%d" % (kind, rank, step))
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return
        log({"event": "fault", "kind": kind, "rank": rank, "step": step, "pid": os.getpid()})
        os.kill(os.getpid(), signal.SIGKILL if kind == "kill" else signal.SIGSTOP)


def build(a):
    import torch
    from torch import nn

    torch.manual_seed(a.seed)  # the same initial weights on every rank
    h = a.hidden
    layers, width = [], h
    for i in range(a.layers):
        out = h if i == a.layers - 1 else 2 * h if i == 0 else h
        layers += [nn.Linear(width, out), nn.ReLU()]
        width = out
    model = nn.Sequential(*layers[:-1])
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    return model, opt


def batch(a, step, rank):
    import torch

    g = torch.Generator().manual_seed(a.seed * 1_000_003 + step * 1009 + rank)
    return torch.randn(a.batch, a.hidden, generator=g), torch.randn(a.batch, a.hidden, generator=g)


def params_sha256(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def write_hash(path, digest):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(digest + "\n")
    os.replace(tmp, path)


def latest_checkpoint(d):
    best = None
    for p in glob.glob(os.path.join(d, "ckpt-*.pt")):
        try:
            s = int(os.path.basename(p)[5:-3])
        except ValueError:
            continue
        if best is None or s > best[0]:
            best = (s, p)
    return best


def save_checkpoint(a, rank, step, model, opt, reason):
    """Write ckpt-<step>.pt (write + rename; the temporary name is this process's own, as
    ranks sent SIGTERM together may save the same step) and remove older ones."""
    import torch

    path = os.path.join(a.checkpoint_dir, "ckpt-%d.pt" % step)
    tmp = "%s.tmp%d" % (path, os.getpid())
    torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, tmp)
    os.replace(tmp, path)
    for old in glob.glob(os.path.join(a.checkpoint_dir, "ckpt-*.pt")):
        if old != path:
            try:
                os.unlink(old)
            except FileNotFoundError:  # another rank's save removed it first
                pass
    log({"event": "checkpoint", "rank": rank, "step": step, "pid": os.getpid(), "reason": reason})


def run_ddp(a, faults):
    import torch
    import torch.distributed as dist
    from torch import nn

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    log({"event": "start", "pid": os.getpid(), "mode": "ddp", "role": "rank", "rank": rank,
         "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))})
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=a.hang_s))
    model, opt = build(a)
    start = 0
    if a.checkpoint_dir:
        ck = latest_checkpoint(a.checkpoint_dir)
        if ck is not None:
            state = torch.load(ck[1])
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            start = state["step"]
            log({"event": "resume", "rank": rank, "step": start, "pid": os.getpid()})
    ddp = nn.parallel.DistributedDataParallel(model)
    step = start
    term = {"asked": False}
    if a.save_on_sigterm:
        # Only a flag here: the save happens between steps, where the state is consistent.
        signal.signal(signal.SIGTERM, lambda *_: term.__setitem__("asked", True))
    try:
        while step < a.steps:
            t0 = time.time()
            faults.maybe_fire(rank, step)
            x, y = batch(a, step, rank)
            opt.zero_grad()
            loss = nn.functional.mse_loss(ddp(x), y)
            loss.backward()  # DDP all-reduces the gradients here
            opt.step()
            log({"event": "step", "rank": rank, "step": step, "pid": os.getpid(), "loss": round(loss.item(), 6)})
            pad(a, t0)
            step += 1
            if term["asked"] and step < a.steps:
                save_checkpoint(a, rank, step, model, opt, "sigterm")
                log({"event": "exit", "rank": rank, "step": step, "pid": os.getpid(), "reason": "sigterm"})
                return 143  # as if the signal had ended it: torchrun restarts the group
            if a.checkpoint_dir and rank == 0 and step % a.checkpoint_every == 0 and step < a.steps:
                save_checkpoint(a, rank, step, model, opt, "periodic")
    except Exception as e:  # noqa: BLE001 - a collective failed: a peer died or hung past the timeout
        log({"event": "error", "rank": rank, "step": step, "pid": os.getpid(), "error": str(e).splitlines()[0][:300]})
        return 1
    finish(a, rank, step, model)
    dist.destroy_process_group()
    return 0


def run_lockstep(a, faults):
    from torch import nn
    import lockstep_train as ls

    role = os.environ.get("LOCKSTEP_ROLE", "rank")
    log({"event": "start", "pid": os.getpid(), "mode": "lockstep", "role": role,
         "rank": int(os.environ["LOCKSTEP_RANK"]) if role == "rank" else None})

    def on_event(name, **fields):  # the library's events, as they happen
        fields.update(event="lib", lib_event=name, pid=os.getpid())
        log(fields)

    job = ls.join(on_event=on_event)
    model, opt = build(a)
    job.track(model, opt)
    for step in job.steps(a.steps):
        t0 = time.time()
        faults.maybe_fire(job.rank, step)
        with job.step_guard():
            ls.seed(step, job.rank)
            x, y = batch(a, step, job.rank)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            job.all_reduce_gradients()  # instead of DDP's reducer
            opt.step()
            opt.zero_grad()
        if not job.failed:  # committed; a failed step is yielded again after the re-form
            log({"event": "step", "rank": job.rank, "step": step, "pid": os.getpid(), "loss": round(loss.item(), 6)})
            pad(a, t0)
    finish(a, job.rank, a.steps, model)
    return 0


def run_torchft(a, faults):
    from datetime import timedelta
    import importlib.metadata

    import torch
    from torch import nn
    import torchft
    from torchft.checkpointing.pg_transport import PGTransport

    group = int(os.environ["REPLICA_GROUP_ID"])
    groups = int(os.environ["NUM_REPLICA_GROUPS"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    log({"event": "start", "pid": os.getpid(), "mode": "torchft", "role": "rank", "rank": group,
         "restart": restart, "torchft": importlib.metadata.version("torchft"), "torch": torch.__version__})
    model, opt = build(a)

    def load_state_dict(state):
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optim"])

    def state_dict():
        return {"model": model.state_dict(), "optim": optimizer.state_dict()}

    pg = torchft.ProcessGroupGloo(timeout=timedelta(seconds=5))
    transport = PGTransport(pg, timeout=timedelta(seconds=10), device="cpu")
    manager = torchft.Manager(pg=pg, min_replica_size=1, load_state_dict=load_state_dict, state_dict=state_dict,
                              replica_id="train_ddp_%d" % group, timeout=timedelta(seconds=30),
                              checkpoint_transport=transport,
                              # The Manager's docs: weights initialised alike from a seed need no sync at step 0.
                              init_sync=False)
    ddp = torchft.DistributedDataParallel(manager, model)
    optimizer = torchft.Optimizer(manager, opt)
    commit = {"last": False}
    should_commit = manager.should_commit

    def observed_should_commit(*args, **kwargs):  # what optimizer.step() decided, for the log
        commit["last"] = should_commit(*args, **kwargs)
        return commit["last"]

    manager.should_commit = observed_should_commit
    if restart == 0 and a.marker_dir:  # the same start as the other arms: every group is up
        open(os.path.join(a.marker_dir, "torchft-ready-%d" % group), "w").close()
        deadline = time.time() + 300
        while len(glob.glob(os.path.join(a.marker_dir, "torchft-ready-*"))) < groups and time.time() < deadline:
            time.sleep(0.05)
    while manager.current_step() < a.steps:
        t0 = time.time()
        step = manager.current_step()
        faults.maybe_fire(group, step)
        x, y = batch(a, step, group)
        optimizer.zero_grad()  # starts the quorum
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # the comm hook all-reduces through the Manager
        optimizer.step()  # only if should_commit()
        if commit["last"]:
            log({"event": "step", "rank": group, "step": manager.current_step() - 1, "pid": os.getpid(),
                 "loss": round(loss.item(), 6), "participants": manager.num_participants(),
                 "participating": manager.is_participating()})
            pad(a, t0)
        else:
            log({"event": "error", "rank": group, "step": step, "pid": os.getpid(),
                 "error": "should_commit=False: %s" % (manager.errored(),)})
    # Every group logs its hash: group 0 may be out of the last quorum (restarting).
    finish(a, group, a.steps, model, every_rank=True)
    manager.shutdown(wait=True)
    # torchft 0.2.0 with torch 2.15 aborts at interpreter exit ("terminate called without an
    # active exception", exit -6), and torchrun would then restart the finished group.
    os._exit(0)


def pad(a, t0):
    left = a.min_step_s - (time.time() - t0)
    if left > 0:
        time.sleep(left)


def finish(a, rank, steps, model, every_rank=False):
    digest = params_sha256(model) if rank == 0 or every_rank else None
    if rank == 0:
        write_hash(a.hash_file, digest)
    log({"event": "end", "rank": rank, "steps": steps, "pid": os.getpid(), "sha256": digest})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["ddp", "lockstep", "torchft"], required=True)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--hidden", type=int, default=1024, help="MLP width (1024, 3 layers: 5.25M parameters)")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=7)
    # --log-file: torch 2.x's torchrun takes a script's --log for an abbreviation of its own --log-dir
    p.add_argument("--log-file", "--log", dest="log", help="append JSON lines here (default: stdout)")
    p.add_argument("--faults", default="", help="kill:RANK@STEP,stop:RANK@STEP,...")
    p.add_argument("--marker-dir", help="where fault markers live (each fault fires once)")
    p.add_argument("--checkpoint-dir", help="ddp: checkpoint here and resume from the latest")
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--save-on-sigterm", action="store_true",
                   help="ddp with --checkpoint-dir: on SIGTERM, checkpoint at the next step boundary and exit 143")
    p.add_argument("--hash-file", help="rank 0 writes the final parameters' sha256 here")
    p.add_argument("--hang-s", type=float, default=30.0, help="ddp: process group timeout (gloo default: 1800)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--min-step-s", type=float, default=0.0,
                   help="sleep after a step that took less (the benchmark's quick mode: time for spares to start)")
    a = p.parse_args()
    if a.save_on_sigterm and not a.checkpoint_dir:
        p.error("--save-on-sigterm needs --checkpoint-dir")
    if a.log:
        LOG["fd"] = os.open(a.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    # Before the seconds of `import torch`: the benchmark leaves a spare's start out of
    # the steady-state step time (it competes with the ranks for the CPU).
    log({"event": "launch", "pid": os.getpid(), "mode": a.mode,
         "role": os.environ.get("LOCKSTEP_ROLE", "rank") if a.mode == "lockstep" else "rank"})
    import torch

    torch.set_num_threads(a.threads)
    faults = Faults(a.faults, a.marker_dir)
    if a.mode == "torchft":
        return run_torchft(a, faults)
    return run_ddp(a, faults) if a.mode == "ddp" else run_lockstep(a, faults)


if __name__ == "__main__":
    sys.exit(main())
