"""Job: one training process's membership in a Lockstep job (docs/migration.md).

join() registers with the coordinator; Job.steps() forms the process group of each
generation, syncs state from the source replica, yields step numbers, and on a failed
or paused step frees the group, reports, waits for the next plan and replays the step.
Used from the training thread only; the heartbeat runs in its own daemon thread.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import gc
import hashlib
import logging
import os
import socket
import time
import urllib.parse
from typing import Any, Callable, ContextManager, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist

from . import _torch_private as private
from . import faults, seeding, sharded
from .client import CoordinatorClient, Unavailable
from .heartbeat import Heartbeat
from .protocol import (ProtocolError, Settings, new_member_id, parse_plan, register_body, registered_role,
                       settings_from)
from .reduce import GradientReducer
from .state import TrackedState, allocate, buckets, decode_meta, encode_meta, fingerprint, flatten, pack
from .wrappers import DDPAdapter, check_module

log = logging.getLogger("lockstep_train")

# on_event(name, t=..., member=..., rank=..., generation=..., step=..., **fields)
EventHook = Callable[..., Any]

POLL_S = 0.02             # plan polling while waiting, when the coordinator does not hold polls
PLAN_WAIT_S = 1.0         # long poll: the coordinator holds GET /v1/plan up to this until news
WAIT_LOG_S = 10.0         # "waiting for a spare" at most this often
MAX_STEP_FAILURES = 3     # the same step failing this often in a row is not a peer's fault
WAIT_SLICE = datetime.timedelta(milliseconds=100)   # a collective's wait, between abort checks
POKE_S = 0.25             # blocked this long: heartbeat now (its reply may say "abort")
TRANSFER_BUCKET_MB = 32   # the state transfer's bucket size (LOCKSTEP_TRANSFER_BUCKET_MB)
FINGERPRINT_EVERY = 100   # replicas compare fingerprints every this many steps (0: never)
PAUSE_AGREE_EVERY = 1     # the ranks agree on the pause step every this many steps (see _agree_pause)


class Aborted(RuntimeError):
    """The coordinator ended the generation while this member waited in a collective
    (a peer will never arrive): the collective is abandoned and the step fails."""


class Exit(SystemExit):
    """Raised out of job.steps() when the coordinator tells this member to leave (it was
    replaced, migrated away or fenced). Exit status 0; catch it to clean up first."""

    def __init__(self, reason: str) -> None:
        super().__init__(0)
        self.reason = reason


class JobFailed(RuntimeError):
    """Raised out of job.steps() when the coordinator declared the job failed (terminal,
    e.g. "no replica holds step s"): the process should exit non-zero."""


class UsageError(RuntimeError):
    """The script uses the library wrongly (e.g. iterates job.steps() twice, tracks after
    the first step). Never taken for a failed collective by job.step_guard()."""


class JoinError(RuntimeError):
    """The coordinator refused this member (e.g. its rank is held by a live member)."""


class _Guard:
    """job.step_guard(): a failing collective inside the block marks the step failed
    (the exception is dropped with its traceback, so the old group can be freed)."""

    def __init__(self, job):
        self.job = job

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None or not issubclass(et, (RuntimeError, OSError)) or issubclass(et, (JobFailed, UsageError)):
            return False
        return self.job._record_failure(ev)


class Job:
    """One process's membership in a job; made by join() (not constructed directly)."""

    def __init__(self, settings: Settings, client: CoordinatorClient, member: str, host: str,
                 store_server: dist.TCPStore, backend: str, hang_timeout: float,
                 on_event: Optional[EventHook], reduction: str, bucket_cap_mb: float,
                 heartbeat_interval: float, overlap: bool = True,
                 fingerprint_every: int = FINGERPRINT_EVERY,
                 transfer_bucket_mb: float = TRANSFER_BUCKET_MB,
                 pause_agree_every: int = PAUSE_AGREE_EVERY) -> None:
        self.settings = settings
        self.client = client
        self.member = member
        self.host = host
        self.backend = backend
        self.hang_timeout = hang_timeout
        self.on_event = on_event
        self.reduction = reduction
        self.bucket_cap_mb = bucket_cap_mb
        self.overlap = overlap
        self.rank: Optional[int] = settings.rank
        self.world_size: Optional[int] = settings.world_size
        self.generation = -1          # the generation this member last formed (or tried)
        self.step = 0                 # committed steps
        self._store_server = store_server   # this member's own TCPStore (kept open)
        self._state: Optional[TrackedState] = None
        self._reducer: Optional[GradientReducer] = None
        self._ddp: Optional[DDPAdapter] = None   # a kept DistributedDataParallel wrapper
        self._ddp_group: Any = None   # the size-1 group such a wrapper is built on
        self._layout: Optional[sharded.ShardedLayout] = None   # job.device_mesh() (FSDP2 / HSDP)
        self._sharded = False         # the tracked model is sharded on that mesh
        self._early_plan = None       # a spare's plan, taken by device_mesh() before steps()
        self._standin = False         # the default group is device_mesh()'s stand-in
        self._commit_hook: Any = None # the optimizer step hook's handle (torch >= 2.0)
        self._steps_started = False   # job.steps() began (track() is refused from then on)
        self._formed = False
        self._failure = None          # message of the current step's failure
        self._applied = False         # optimizer.step() returned during the current step
        self._fail_count = 0
        self._fail_step = -1
        self._pending_report = None
        self.fingerprint_every = fingerprint_every
        self.transfer_bucket_bytes = max(1, int(transfer_bucket_mb * 1024 * 1024))
        self._check_replicas_next = False   # compare fingerprints before the next step
        # The pause step every rank of the generation agreed on (None: no pause known to
        # any rank at the last agreement); see _agree_pause.
        self.pause_agree_every = max(1, int(pause_agree_every))
        self._pause_at: Optional[int] = None
        self.pause_stats = {"agreements": 0, "seconds": 0.0}
        self._zombies: List[tuple] = []   # (since, group, work) abandoned by an abort (see _reap_zombies)
        # The buddy mirror (pure FSDP, job.device_mesh(replicate=1, mirror_every=K)):
        self.mirror_every = 0         # K (0: no mirror)
        self._own: dict = {}          # step -> (meta blob, packed shard): this rank's snapshots
        self._held: dict = {}         # step -> (meta blob, packed shard): the predecessor's, mirrored here
        self._mirrored = -1           # the step of the last exchange every rank completed
        self._mirror_next = False     # exchange before the next step (after a restore)
        self.mirror_stats = {"exchanges": 0, "seconds": 0.0, "bytes": 0}
        self.heartbeat = Heartbeat(client, member, heartbeat_interval)
        # A member holds a verified copy of the training state once it formed a
        # generation (a rank of generation 0 holds its own initial state). A spare holds
        # none until its first transfer completes; until then it must never be a source.
        self.heartbeat.update(state_intact=settings.role == "rank")

    # -- public ---------------------------------------------------------------------------
    @property
    def store_port(self) -> int:
        return self._store_server.port

    @property
    def ddp_group(self) -> Any:
        """The process group to build a kept DistributedDataParallel wrapper on:
        `DistributedDataParallel(model, process_group=job.ddp_group)`. It has size 1 and
        belongs to the library; DDP's gradients go over the current generation's group
        through a communication hook (wrappers.py). Not for the script's own collectives:
        those use the default group, which the library forms for every generation."""
        if self._ddp_group is None:
            self._ddp_group = private.local_process_group(datetime.timedelta(seconds=self.hang_timeout))
        return self._ddp_group

    def device_mesh(self, replicate: int, shard: int,
                    mesh_dim_names: Tuple[str, str] = ("replicate", "shard"),
                    device_type: str = "cpu", mirror_every: Optional[int] = None) -> Any:
        """The job's 2-D DeviceMesh for HSDP (replicate x shard, rank = i * shard + j, as
        torch's init_device_mesh lays it out), to pass to FSDP2's fully_shard(module,
        mesh=...) in place of init_device_mesh(device_type, (replicate, shard),
        mesh_dim_names=...). Its process groups belong to the library, which re-forms them
        at every generation; the modules, their DTensor parameters and the optimizer stay.
        torch >= 2.15. A spare waits here until the coordinator gives it a rank (fully_shard
        shards by the mesh coordinate), so it builds its model after being assigned.
        Pure FSDP: replicate=1 with mirror_every=K: every K steps each rank's shard, its
        optimizer state, RNG and extra state are mirrored into its buddy's (rank + 1 mod N)
        CPU memory; a failed rank is rebuilt from its buddy's copy and every rank replays
        the (at most K) steps since it."""
        if self._steps_started:
            raise UsageError("lockstep_train: job.device_mesh() after job.steps() started; build the mesh, "
                             "the model and track() before the first step")
        if self._layout is not None:
            raise UsageError("lockstep_train: job.device_mesh() was already called; one mesh per job "
                             "(keep the DeviceMesh it returned)")
        if private.torch_version() < (2, 15) and os.environ.get("LOCKSTEP_UNCHECKED_TORCH") != "1":
            raise sharded.UnsupportedLayout(
                "lockstep_train: job.device_mesh() (FSDP2 / HSDP) needs torch >= 2.15 (FSDPModule."
                "reset_iter_state, checked on 2.15); this is torch %s. Plain data parallel (a module or "
                "DistributedDataParallel) works on 1.13 and later" % torch.__version__)
        names = tuple(mesh_dim_names)
        sharded.check_mesh_args(replicate, shard, names, mirror_every)
        world = replicate * shard
        if self.world_size is not None and self.world_size != world:
            raise ValueError("lockstep_train: job.device_mesh(replicate=%d, shard=%d) has %d ranks, the job %d"
                             % (replicate, shard, world, self.world_size))
        if self.rank is None:       # a spare: its coordinate is its rank, known once assigned
            sharded.warm_up(device_type)   # FSDP2's first use costs seconds: pay them in the pool
            self.heartbeat.update(state="waiting")
            plan = self._wait_for_plan()
            self._early_plan = plan       # job.steps() forms this generation
            self.rank, self.world_size = plan.rank, plan.world_size
            if plan.world_size != world:
                raise ValueError("lockstep_train: job.device_mesh() has %d ranks, the coordinator's plan %d"
                                 % (world, plan.world_size))
        # torch's DeviceMesh reads the global rank from the default group while fully_shard
        # builds sub-meshes: until job.steps() forms the generation's group, a stand-in of
        # this rank and size (no communication) is the default group.
        sharded.init_standin(self.rank, world)
        self._standin = True
        self._layout = sharded.ShardedLayout(replicate, shard, (names[0], names[1]), device_type,
                                             self.rank, self._wait)
        self.mirror_every = mirror_every or 0
        return self._layout.mesh

    def track(self, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer] = None,
              extra: Any = None) -> None:
        """Register what a spare receives: the model's parameters and buffers, the
        optimizer's state and hyperparameters, and `extra` (see state.TrackedState).
        `model` is a plain module (the script calls job.all_reduce_gradients()) or a
        DistributedDataParallel wrapper built with process_group=job.ddp_group (it reduces
        the gradients itself). Sharded and tensor-parallel models are refused
        (wrappers.SUPPORTED). Call it before job.steps()."""
        if self._steps_started:
            raise UsageError("lockstep_train: job.track() after job.steps() started: what a spare "
                               "receives is fixed before the first step; call job.track(model, optimizer) "
                               "once, before iterating job.steps()")
        is_sharded = self._layout is not None and sharded.check_model(model, self._layout)
        if self._layout is not None and not is_sharded:
            raise sharded.UnsupportedLayout(
                "lockstep_train: job.track(): job.device_mesh() was built but the model has no parameter "
                "sharded on it (fully_shard(module, mesh=mesh) before track()); %s" % sharded.SUPPORTED)
        if not is_sharded:
            check_module(model)
        is_ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel)
        if self._reducer is not None:
            self._reducer.close()
        if self._ddp is not None:
            self._ddp.close()
            self._ddp = None
        inner = model.module if is_ddp else model
        state = TrackedState(inner, optimizer, extra, local=sharded.local if is_sharded else None)
        self._sharded = is_sharded
        if is_sharded:              # fully_shard reduces the gradients itself, on the job's mesh
            reducer = _NoReducer()
        elif is_ddp:
            cap_mb = private.ddp_options(model)["bucket_bytes_cap"] / (1024.0 * 1024.0)
            reducer = GradientReducer(state.params, "ddp", cap_mb, overlap=False, wait=self._wait)
            try:
                self._ddp = DDPAdapter(self, model, reducer)
            except BaseException:
                reducer.close()
                raise
        else:
            reducer = GradientReducer(state.params, self.reduction, self.bucket_cap_mb,
                                      overlap=self.overlap, wait=self._wait)
        self._state, self._reducer = state, reducer
        if self._commit_hook is not None:
            self._commit_hook.remove()
            self._commit_hook = None
        if optimizer is not None:
            if hasattr(optimizer, "register_step_post_hook"):      # torch >= 2.0 (public)
                self._commit_hook = optimizer.register_step_post_hook(lambda *_: self._committed())
            else:
                private.wrap_optimizer_step(optimizer, self._committed)

    def _committed(self) -> None:
        self._applied = True   # the step is committed once optimizer.step() returned

    def steps(self, total: int) -> Iterator[int]:
        """Yield the step numbers to run, from the committed step to total-1. Forms and
        re-forms the process group; a failed or paused step is yielded again after the
        re-form. Raises Exit when this member must leave. Iterated once per process."""
        self._tracked("steps")
        if self._steps_started:
            raise UsageError("lockstep_train: job.steps() is iterated once per process (this job "
                               "already ran its steps, or is running them); one job.steps() loop runs "
                               "the whole training")
        self._steps_started = True
        while True:
            if not self._formed:
                self._form()
            if self.step >= total:
                self._finish()
                return
            d = faults.seen(self.heartbeat.directive(), self.step)
            if d is not None and d.kind == "exit":   # replaced or fenced: leave at once
                self._emit("exit", reason="exit directive")
                self.close()
                raise Exit("the coordinator replaced this member")
            if self._pause_at is None and self.step % self.pause_agree_every == 0:
                self._failure = None
                with self.step_guard():
                    self._agree_pause(d)
                if self._failure is not None:
                    self._leave("error", self._failure)
                    continue
            if self._pause_at is not None and self.step > self._pause_at:
                if self._mirror_due(pausing=True):   # the leaving rank's state at its buddy: no replay
                    self._failure = None
                    with self.step_guard():
                        self._mirror()
                    if self._failure is not None:
                        self._leave("error", self._failure)
                        continue
                self._emit("pause", pause_at_step=self._pause_at,
                           read=d is not None and d.kind == "pause")   # read: this rank's own heartbeat had it
                self._leave("pause", None)
                continue
            step = self.step
            self._failure = None
            self._applied = False
            if self._mirror_due():
                with self.step_guard():
                    self._mirror()
                if self._failure is not None:
                    self._leave("error", self._failure)
                    continue
            if self._check_replicas_next or (self.fingerprint_every and step % self.fingerprint_every == 0):
                with self.step_guard():
                    self._check_replicas()
                if self._failure is not None:
                    self._leave("error", self._failure)
                    continue
            faults.hit("step", self.generation, step, on_corrupt=self._corrupt)
            self._tracked("steps")[1].begin(step)   # bucket all-reduces overlap the coming backward
            yield step
            if self._applied or self._failure is None:
                self.step = step + 1      # optimizer.step() returned: committed, even if
                self.heartbeat.update(step=self.step)   # something failed after it
            else:
                for p in self._tracked("steps")[0].params:
                    p.grad = None         # the replay starts from clean gradients
            if self._failure is not None:
                self._leave("error", self._failure)   # outside every except block

    def _agree_pause(self, d):
        """The pause step, agreed in band. The coordinator's `pause` directive (pause at
        the first boundary past step P) reaches each rank through its own heartbeat
        thread, at a time of its own: a rank that read it after passing P would run a step
        the others never run, and their collectives would mismatch (a failure instead of
        a pause). So no rank pauses on its own reading: at every agreement step (every
        step by default) all ranks all-reduce (MAX) the P each read, or -1; from the first
        agreement where some rank knows P, every rank holds the same P and pauses at the
        same boundary: the first at which its committed step is > P, which is this one
        when the agreement came late (then the pause step is later than P, the same on
        every rank; the coordinator takes the reports' committed step as the resume
        step). One 8-byte all-reduce on the generation's group; its failure is a step
        failure (the caller's step_guard)."""
        known = d.pause_at_step if d is not None and d.kind == "pause" else -1
        if self.world_size is None or self.world_size <= 1:
            self._pause_at = known if known >= 0 else None
            return
        t0 = time.perf_counter()
        v = torch.tensor([known], dtype=torch.int64, device=self._comm_device())
        self._wait(dist.all_reduce(v, op=dist.ReduceOp.MAX, async_op=True))
        agreed = int(v.item())
        self.pause_stats["agreements"] += 1
        self.pause_stats["seconds"] += time.perf_counter() - t0
        if agreed >= 0:
            self._pause_at = agreed
            if agreed != known:
                log.info("lockstep: pausing after step %d, read by another rank (this rank is at step %d)",
                         agreed, self.step)

    def step_guard(self) -> ContextManager[Any]:
        """Context manager around one step's body: a collective failure inside it marks
        the step failed; steps() then re-forms and yields the same step again."""
        return _Guard(self)

    def all_reduce_gradients(self) -> None:
        """Average gradients over the ranks in DDP's bucket layout (see reduce.py): waits
        for the bucket reductions that backward started and launches the rest. Not with a
        kept DDP wrapper (it reduces during backward)."""
        reducer = self._tracked("all_reduce_gradients")[1]
        if self._ddp is not None:
            raise UsageError("lockstep_train: job.all_reduce_gradients() with a DistributedDataParallel "
                               "wrapper: DDP already reduced the gradients in backward; remove the call")
        if self._sharded:
            raise UsageError("lockstep_train: job.all_reduce_gradients() with a fully_shard model: FSDP2 "
                             "already reduced the gradients in backward; remove the call")
        reducer.reduce(self.step)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Like DDP's no_sync(): backward passes inside only accumulate gradients (for
        gradient-accumulation micro-batches); the backward after it reduces them."""
        reducer = self._tracked("no_sync")[1]
        if self._sharded:
            raise UsageError("lockstep_train: job.no_sync() with a fully_shard model: use FSDP2's "
                             "model.set_requires_gradient_sync(False) for accumulation micro-batches")
        if self._ddp is not None:
            with self._ddp.ddp.no_sync():
                yield
            return
        reducer.enabled = False
        try:
            yield
        finally:
            reducer.enabled = True

    @property
    def failed(self) -> bool:
        """True when the current step failed (the rest of its body should be skipped)."""
        return self._failure is not None

    def close(self) -> None:
        """Stop heartbeating, remove the gradient hooks and free the process group."""
        self.heartbeat.stop()
        if self._reducer is not None:
            self._reducer.close()
        if self._ddp is not None:
            self._ddp.reset()
        self._free_group()

    # -- internals ------------------------------------------------------------------------
    def _tracked(self, what: str) -> Tuple[TrackedState, GradientReducer]:
        if self._state is None or self._reducer is None:
            raise UsageError("job.%s(): call job.track(model, optimizer) first" % what)
        return self._state, self._reducer

    def _emit(self, name, **fields):
        if self.on_event is None:
            return
        try:
            self.on_event(name, t=time.time(), member=self.member, rank=self.rank,
                          generation=self.generation, step=self.step, **fields)
        except Exception as e:   # a harness hook must never break training
            log.warning("lockstep: on_event(%r) raised %r", name, e)

    def _record_failure(self, exc):
        msg = ("%s: %s" % (type(exc).__name__, exc)).splitlines()[0][:300]
        if self._fail_step == self.step:
            self._fail_count += 1
        else:
            self._fail_step, self._fail_count = self.step, 1
        if self._fail_count >= MAX_STEP_FAILURES:
            return False   # re-raise: the same step failed in every generation tried
        self._failure = msg
        self._emit("failure_detected", error=msg)
        return True

    def _wait(self, work):
        """Wait for a collective, giving it up when the coordinator says the generation
        ended (heartbeat directive "abort": a peer will never arrive). While blocked the
        heartbeat says so ("in_collective": the coordinator does not take this member for
        hung) and is sent every POKE_S. NCCL waits are not sliced (NCCL's own timeout
        and the abort in _free_group end them)."""
        if self.backend == "nccl":
            work.wait()
            return
        hb = self.heartbeat
        t0 = None
        try:
            while True:
                try:
                    work.wait(WAIT_SLICE)
                    return
                except RuntimeError:
                    # The slice ran out, or the collective failed (then it is completed,
                    # and waiting again raises its own error).
                    if work.is_completed():
                        work.wait()
                        return
                now = time.monotonic()
                if t0 is None:
                    t0 = now
                    hb.update(in_collective=True, send_now=True)
                elif now - t0 >= POKE_S:
                    t0 = now
                    hb.update(send_now=True)
                d = hb.directive()
                if d is not None and d.kind in ("abort", "exit"):
                    self._zombie(work)
                    raise Aborted("generation %d ended while waiting in a collective (%s)"
                                  % (self.generation, d.reason or d.kind))
        finally:
            if t0 is not None:
                hb.update(in_collective=False)

    def _zombie(self, work):
        """Keep the group of an abandoned collective alive until the collective ends (by
        its timeout): destroying a group whose worker is blocked would block with it."""
        if dist.is_initialized():
            self._zombies.append((time.monotonic(), dist.group.WORLD, work))

    def _reap_zombies(self):
        # Dropped once the abandoned collective ended and long enough after it that the
        # group's other queued work timed out too (its destructor waits for its queue).
        now = time.monotonic()
        self._zombies = [z for z in self._zombies
                         if not z[2].is_completed() or now - z[0] < 3 * self.hang_timeout]

    def _free_group(self):
        self._reap_zombies()
        if self._layout is not None:
            self._layout.free()
        self._standin = False
        if dist.is_initialized():
            if self.backend == "nccl":
                private.abort_nccl()   # NCCL: without an abort the communicator can block forever
            try:
                dist.destroy_process_group()
            except Exception as e:
                log.warning("lockstep: destroy_process_group failed: %r", e)
        gc.collect()

    def _leave(self, reason, error):
        # Report first, from this thread, then free the group: freeing (gloo's
        # destructor, gc) holds the GIL, and under load that starved the heartbeat
        # thread past the coordinator's timeout, so a healthy rank was fenced. A member
        # that reported is between groups: the coordinator judges it by its join
        # deadline from then on, not by heartbeats.
        self._formed = False
        body = {"member": self.member, "generation": self.generation,
                "committed_step": self.step, "reason": reason,
                "state_intact": self.heartbeat.state_intact()}
        if error:
            body["error"] = error
        restored = self.heartbeat.restored_step()
        if restored is not None:   # the step this generation's state sync went back to (the mirror)
            body["restored_step"] = restored
        self.heartbeat.update(step=self.step, state="waiting")
        self._pending_report = body
        self._send_report()
        t0 = time.time()
        if self._reducer is not None:
            self._reducer.reset()    # in-flight bucket reductions hold the old group
        if self._ddp is not None:
            self._ddp.reset()
        if self._sharded and reason == "error":
            private.reset_fsdp(self._state.model)   # the replay starts like a fresh iteration
        self._free_group()
        self._emit("group_freed", seconds=time.time() - t0, reason=reason)

    def _send_report(self):
        body = self._pending_report
        try:
            status, reply = self.client.report(body)
        except Unavailable:
            return False
        self._pending_report = None
        if status == 200:
            self._emit("reported", reason=body["reason"], committed_step=body["committed_step"])
        else:
            log.info("lockstep: report for generation %d answered %d: %s",
                     body["generation"], status, reply)
        return True

    def _register(self):
        body = register_body(self.member, self.settings.role, self.host, self.store_port,
                             os.getpid(), self.settings.rank)
        status, reply = self.client.register(body)
        if status != 200:
            raise JoinError("lockstep: the coordinator refused registration (%d): %s" % (status, reply))
        role = registered_role(reply, self.settings.role)
        if role != self.settings.role:
            # Our rank is held by a live member (it took the rank over when this
            # process's predecessor died: a container restarted in place, a pod recreated
            # at its index): the coordinator keeps this process as a spare of the job.
            log.warning("lockstep: rank %s is held by another member; joining as a spare",
                        self.settings.rank)
            self.settings = dataclasses.replace(self.settings, role=role, rank=None)
            self.rank = None
            self.heartbeat.update(state_intact=False)
        self._emit("registered", role=self.settings.role)

    def _wait_for_plan(self):
        last_log = 0.0
        delay = POLL_S
        while True:
            if self._pending_report is not None:
                self._send_report()
            # A long poll, unless a report still has to go out (it is retried per poll).
            wait_s = PLAN_WAIT_S if self._pending_report is None else None
            try:
                status, reply = self.client.plan(self.member, wait_s=wait_s, generation=self.generation)
            except Unavailable as e:
                status, reply = None, str(e)
            if status is None or status >= 500:   # down, restarting, overloaded: retry
                if time.monotonic() - last_log > WAIT_LOG_S:
                    log.warning("lockstep: waiting for the coordinator: %s", reply)
                    last_log = time.monotonic()
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            delay = POLL_S
            if status == 404:   # the coordinator forgot us (restarted without its state)
                self._register()
                continue
            if status != 200:
                raise JoinError("lockstep: GET /v1/plan answered %d: %s" % (status, reply))
            try:
                plan = parse_plan(reply)
            except ProtocolError as e:
                raise JoinError("lockstep: %s" % e)
            if plan.action == "exit":
                self._emit("exit", reason=plan.reason)
                self.close()
                if plan.reason.startswith("the job failed"):
                    raise JobFailed("lockstep: " + plan.reason)
                raise Exit(plan.reason)
            if plan.action == "train" and plan.generation > self.generation:
                return plan
            if time.monotonic() - last_log > WAIT_LOG_S:
                why = plan.reason or "waiting for the next generation"
                # A spare in the pool waits by design; a rank that trained waits for help.
                log.log(logging.WARNING if self.generation >= 0 else logging.INFO, "lockstep: %s", why)
                self._emit("waiting", reason=why)
                last_log = time.monotonic()
            if not (isinstance(reply, dict) and "held_ms" in reply):
                time.sleep(POLL_S)   # answered at once (no long poll): poll again shortly

    def _form(self):
        self.heartbeat.update(state="waiting")
        while True:
            plan, self._early_plan = self._early_plan or self._wait_for_plan(), None
            if self._layout is not None and (plan.rank != self._layout.rank
                                             or plan.world_size != self._layout.world_size):
                self.close()
                raise JobFailed("lockstep: this member's mesh was built for rank %d of %d; the coordinator "
                                "now gives it rank %d of %d (a sharded model cannot change its shard)"
                                % (self._layout.rank, self._layout.world_size, plan.rank, plan.world_size))
            self.generation, self.rank, self.world_size = plan.generation, plan.rank, plan.world_size
            self.heartbeat.update(generation=plan.generation, state="waiting", send_now=True)
            self._emit("plan_received", src_rank=plan.src_rank, resume_step=plan.resume_step,
                       reason=plan.reason)
            error = None
            try:
                faults.hit("plan_received", plan.generation)
                self._init_group(plan)
                faults.hit("group_formed", plan.generation)
                self._sync_state(plan)
            except JobFailed as e:
                # Terminal, decided alike by every member from the same all-gathered rows
                # (a shard nobody holds): re-forming would fail the same way for ever.
                error = str(e).splitlines()[0][:300]
                self._emit("failure_detected", error=error, during="reform", terminal=True)
                log.error("%s", e)
                self.close()
                raise
            except (RuntimeError, OSError, ValueError) as e:
                error = ("%s: %s" % (type(e).__name__, e)).splitlines()[0][:300]
            if error is None:
                break
            # A member died or never joined during the re-form: report, wait for g+1.
            self._emit("failure_detected", error=error, during="reform")
            self._leave("error", error)
        self._formed = True
        self._pause_at = None     # a pause is agreed anew in each generation
        self._check_replicas_next = self.fingerprint_every > 0 and self.world_size > 1
        self.heartbeat.update(step=self.step, state="training", send_now=True)
        self._emit("state_synced", src_rank=plan.src_rank)
        faults.hit("state_synced", plan.generation)

    def _init_group(self, plan):
        t0 = time.time()
        if self._standin:             # device_mesh()'s stand-in default group gives way
            self._standin = False
            dist.destroy_process_group()
        timeout = datetime.timedelta(seconds=self.hang_timeout)
        store = dist.PrefixStore(plan.store.prefix,
                                 dist.TCPStore(plan.store.host, plan.store.port, None, False, timeout))
        faults.hit("store_connected", plan.generation)
        self._await_members(plan, store)
        dist.init_process_group(self.backend, store=store, rank=plan.rank,
                                world_size=plan.world_size, timeout=timeout)
        if self._layout is not None:
            self._layout.form(timeout)
        self._emit("group_formed", seconds=time.time() - t0)

    def _await_members(self, plan, store):
        """Wait (polling, never blocking) until every rank of the plan is at the store, and
        give up as soon as the coordinator no longer plans this generation (it failed: a
        member died before reaching the store; or a newer one exists). Without this,
        members stuck in the blocking rendezvous of a generation that already failed
        enter each later one at different times and every rendezvous times out."""
        key = "lockstep/present"      # a counter: add(key, 0) reads it without blocking
        store.add(key, 1)
        deadline = time.monotonic() + self.hang_timeout
        next_poll = 0.0
        while store.add(key, 0) < plan.world_size:
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError("generation %d: not every rank reached the store within %.1f s"
                                   % (plan.generation, self.hang_timeout))
            if now >= next_poll:
                next_poll = now + 0.1
                try:
                    status, reply = self.client.plan(self.member)
                    ended = status == 200 and isinstance(reply, dict) and (
                        reply.get("action") != "train" or reply.get("generation") != plan.generation)
                except Unavailable:
                    ended = False
                if ended:
                    raise RuntimeError("generation %d ended while forming (the coordinator now says "
                                       "%s in generation %s: %s)" % (plan.generation, reply.get("action"),
                                                                     reply.get("generation"), reply.get("reason")))
            time.sleep(0.01)

    def _comm_device(self):
        p = self._state.params[0] if self._state.params else None
        if self.backend == "nccl" and p is not None:
            return p.device
        return torch.device("cpu") if p is None or p.device.type == "cpu" else p.device

    def _sync_state(self, plan):
        """The state transfer of a generation, all or nothing on every member:
        1. the source broadcasts its meta record (step, optimizer structure, RNG, extra,
           and a digest of every tensor bucket), then the buckets one at a time;
        2. a receiver takes them into buffers of its own (its live state is untouched)
           and checks each bucket against the source's digest;
        3. a vote (all-reduce of "verified") over every member: only when every member
           verified does anyone apply what it received. A failure anywhere (a member
           dead, a digest mismatch, an abort) leaves every member with the state it had,
           and its heartbeats and reports go on describing exactly that state.
        Generation 0 goes through it too (rank 0's initial state reaches everyone)."""
        t0 = time.time()
        g, src, me = plan.generation, plan.src_rank, plan.rank
        dev = self._comm_device()
        group = None
        if self._sharded and self.mirror_every:
            return self._sync_buddy(plan, t0)
        if self._sharded:
            src, group = self._shard_source(plan, dev), self._layout.current_rep
        bucket_bytes = self.transfer_bucket_bytes
        if me == src:
            flats = flatten(self._state.sync_tensors(), dev)
            chunks = buckets(flats, bucket_bytes)
            extra = {"layout": self._reducer.rebuilt} if self._reducer.rebuilt else {}
            extra["digest"] = [fingerprint(c) for c in chunks]
            extra["bucket_bytes"] = bucket_bytes
            blob = encode_meta(self._state.meta(self.step, extra))
            head = torch.tensor([len(blob), _blob_sum(blob)], dtype=torch.int64, device=dev)
        else:
            head = torch.zeros(2, dtype=torch.int64, device=dev)
        self._wait(dist.broadcast(head, src, group=group, async_op=True))
        if me == src:
            buf = torch.frombuffer(bytearray(blob), dtype=torch.uint8).to(dev)
        else:
            buf = torch.empty(int(head[0].item()), dtype=torch.uint8, device=dev)
        self._wait(dist.broadcast(buf, src, group=group, async_op=True))
        if me != src:
            blob = buf.cpu().numpy().tobytes()
            if _blob_sum(blob) != int(head[1].item()):
                raise RuntimeError("state transfer of generation %d: the meta record arrived damaged" % g)
        meta = decode_meta(blob)
        faults.hit("meta_sent" if me == src else "meta_received", g)
        if me != src:
            flats = allocate(self._state.receive_layout(meta), dev)
            chunks = buckets(flats, meta["bucket_bytes"])
            if len(chunks) != len(meta["digest"]):
                raise ValueError("state sync: the source sends %d buckets, this member expects %d: every "
                                 "member must build the same model and optimizer"
                                 % (len(meta["digest"]), len(chunks)))
        nbytes = 0
        for k, c in enumerate(chunks):
            self._wait(dist.broadcast(c, src, group=group, async_op=True))
            nbytes += c.numel() * c.element_size()
            faults.hit("bucket_sent" if me == src else "bucket_received", g, k)
        ok = 1
        if me != src:
            bad = [k for k, c in enumerate(chunks) if fingerprint(c) != tuple(meta["digest"][k])]
            if bad:
                ok = 0
                log.error("lockstep: state transfer of generation %d: %d of %d buckets from rank %d do not "
                          "match their digest (first: %d); nothing applied", g, len(bad), len(chunks), src, bad[0])
        faults.hit("verified", g)
        vote = torch.tensor([ok], dtype=torch.int32, device=dev)
        self._wait(dist.all_reduce(vote, op=dist.ReduceOp.MIN, async_op=True))
        if int(vote.item()) != 1:
            raise RuntimeError("state transfer of generation %d failed verification on a member; "
                               "nothing applied" % g)
        if me != src:
            self._state.apply_received(meta, flats)
            if meta.get("layout"):
                self._reducer.rebuilt = meta["layout"]
        if meta["step"] != plan.resume_step:
            log.warning("lockstep: source sent step %d, the plan said %d", meta["step"], plan.resume_step)
        self.step = meta["step"]
        self.heartbeat.update(step=self.step, state_intact=True, restored_step=self.step)
        self._emit("state_received", seconds=time.time() - t0, bytes=nbytes + len(blob), buckets=len(chunks),
                   src_rank=src)

    # -- the buddy mirror (pure FSDP) ---------------------------------------------------------
    def _mirror_due(self, pausing=False):
        if not (self.mirror_every and self._sharded and self._formed):
            return False
        if self._mirrored == self.step:
            return False
        return pausing or self._mirror_next or self.step % self.mirror_every == 0

    def _send_recv_snapshot(self, snap, dst, src, fault_step=None):
        """Collective over the generation's group: send the snapshot `snap` (blob,
        packed) to rank dst (None: send nothing) and receive one from rank src (None:
        nothing); returns the (blob, packed) received and verified, or None. A header
        all-gather, then two all_to_all_single with all but one split empty (gloo's
        point-to-point works cannot be waited on in slices: a timed-out wait closes the
        pair), so the job's abortable wait applies. fault_step: the mirror's step, for the
        test-only fault point between the meta record and the shard (faults.py)."""
        n = self.world_size
        if snap is not None:
            blob, packed = snap
            fp = fingerprint(packed)
            head = torch.tensor([dst, len(blob), packed.numel(), fp[0], fp[1], _blob_sum(blob)], dtype=torch.int64)
        else:
            head = torch.tensor([-1, 0, 0, 0, 0, 0], dtype=torch.int64)
        heads = [torch.empty_like(head) for _ in range(n)]
        self._wait(dist.all_gather(heads, head, async_op=True))
        rows = [[int(x) for x in h.tolist()] for h in heads]
        if src is not None and rows[src][0] != self.rank:
            raise RuntimeError("buddy mirror: rank %d sends to %d, not to this rank %d" % (src, rows[src][0], self.rank))
        out = []
        for k, part in ((1, torch.frombuffer(bytearray(snap[0]), dtype=torch.uint8) if snap is not None else None),
                        (2, snap[1] if snap is not None else None)):
            send_split, recv_split = [0] * n, [0] * n
            if part is None:
                part = torch.empty(0, dtype=torch.uint8)
            else:
                send_split[dst] = part.numel()
            if src is not None:
                recv_split[src] = rows[src][k]
            buf = torch.empty(sum(recv_split), dtype=torch.uint8)
            self._wait(dist.all_to_all_single(buf, part, recv_split, send_split, async_op=True))
            out.append(buf)
            if k == 1 and fault_step is not None:
                faults.hit("mirror_meta", self.generation, fault_step)
        if src is None:
            return None
        blob = out[0].numpy().tobytes()
        if _blob_sum(blob) != rows[src][5] or fingerprint(out[1]) != (rows[src][3], rows[src][4]):
            raise RuntimeError("buddy mirror: the snapshot from rank %d arrived damaged" % src)
        return blob, out[1]

    def _vote(self, ok):
        vote = torch.tensor([1 if ok else 0], dtype=torch.int32)
        self._wait(dist.all_reduce(vote, op=dist.ReduceOp.MIN, async_op=True))
        return int(vote.item()) == 1

    def _mirror(self):
        """Every rank snapshots its shard, optimizer state, RNG and extra state at the
        committed step (a copy in its own CPU memory), sends it to its buddy (rank + 1)
        and receives its predecessor's; a vote then makes the new pair current on every
        rank (until then the previous pair stays, so a failure mid-exchange leaves a
        complete older mirror)."""
        t0 = time.time()
        n, me, step = self.world_size, self.rank, self.step
        st = self._state
        own = (encode_meta(st.meta(step)), pack(st.sync_tensors()))
        self._own[step] = own
        faults.hit("mirror_begin", self.generation, step)
        held = self._send_recv_snapshot(own, (me + 1) % n, (me - 1) % n, fault_step=step)
        self._held[step] = held
        faults.hit("mirror_sent", self.generation, step)
        if not self._vote(True):
            raise RuntimeError("buddy mirror at step %d failed on a rank" % step)
        self._own = {step: own}
        self._held = {step: held}
        self._mirrored, self._mirror_next = step, False
        self.mirror_stats["exchanges"] += 1
        self.mirror_stats["seconds"] += time.time() - t0
        self.mirror_stats["bytes"] += len(own[0]) + own[1].numel()
        self._emit("mirrored", seconds=time.time() - t0, bytes=len(own[0]) + own[1].numel())

    def mirror_bytes(self) -> int:
        """Host memory the buddy mirror holds now (this rank's snapshots and its predecessor's)."""
        return sum(len(b) + p.numel() for d in (self._own, self._held) for b, p in d.values())

    def _sync_buddy(self, plan, t0):
        """A generation's state with the buddy mirror: every member all-gathers which
        snapshots it holds (its own, and its predecessor's); the latest step m for which
        every rank has either its own snapshot or one at its buddy is restored everywhere
        (a new member receives its rank's from the buddy, rank + 1), and every rank then
        replays the steps from m. Generation 0 (nothing mirrored yet) keeps the initial
        state every rank built."""
        n, me = self.world_size, self.rank
        own, held = sorted(self._own)[-2:], sorted(self._held)[-2:]
        row = [1 if self.heartbeat.state_intact() else 0, self.step] + (own + [-1, -1])[:2] + (held + [-1, -1])[:2]
        mine = torch.tensor(row, dtype=torch.int64)
        got = [torch.empty_like(mine) for _ in range(n)]
        self._wait(dist.all_gather(got, mine, async_op=True))
        rows = [[int(x) for x in t.tolist()] for t in got]
        owns = [{x for x in r[2:4] if x >= 0} for r in rows]
        helds = [{x for x in r[4:6] if x >= 0} for r in rows]
        if not any(owns) and not any(helds):
            if all(r[0] == 1 and r[1] == rows[0][1] for r in rows):
                self.heartbeat.update(step=self.step, state_intact=True, restored_step=self.step)
                self._emit("state_received", seconds=time.time() - t0, bytes=0, buckets=0, src_rank=me)
                return
            raise JobFailed("lockstep: a rank is new and nothing was mirrored yet (no buddy holds a "
                            "snapshot); the shard is lost")
        steps = sorted(set().union(*owns, *helds), reverse=True)
        m = next((s for s in steps if all(s in owns[r] or s in helds[(r + 1) % n] for r in range(n))), None)
        if m is None:
            raise JobFailed("lockstep: no mirrored step is held for every rank (own snapshots %s, held for "
                            "the predecessor %s): a rank and its buddy failed together; the shard is lost"
                            % (owns, helds))
        need = [r for r in range(n) if m not in owns[r]]
        prv, nxt = (me - 1) % n, (me + 1) % n
        faults.hit("meta_sent", plan.generation)
        got_snap = self._send_recv_snapshot(self._held[m] if prv in need else None,
                                            prv if prv in need else None, nxt if me in need else None)
        faults.hit("verified", plan.generation)
        if not self._vote(True):
            raise RuntimeError("buddy restore of generation %d failed on a rank" % plan.generation)
        snap = got_snap if me in need else self._own[m]
        self._state.apply_snapshot(decode_meta(snap[0]), snap[1])
        self._own = {m: snap}
        self._held = {m: self._held[m]} if m in self._held else {}
        replayed = self.step - m if me not in need else None
        self.step = m
        self._mirrored, self._mirror_next = -1, True   # re-mirror at m: a new member's buddy gets its copy
        # The coordinator planned this generation at the survivors' committed step; every
        # rank went back to m, and a failure while they replay is judged against m.
        self.heartbeat.update(step=self.step, state_intact=True, restored_step=m)
        self._emit("state_received", seconds=time.time() - t0, bytes=len(snap[0]) + snap[1].numel(), buckets=1,
                   src_rank=nxt if me in need else me, mirror_step=m, replayed=replayed)

    def _shard_source(self, plan, dev):
        """Sharded layouts: the rank this member's replica set (the ranks holding its shard)
        receives from: its lowest member that holds a verified state of the plan's resume
        step. Every member learns every other's (state intact, step) by an all-gather."""
        mine = torch.tensor([1 if self.heartbeat.state_intact() else 0, self.step], dtype=torch.int64, device=dev)
        got = [torch.empty_like(mine) for _ in range(self.world_size)]
        self._wait(dist.all_gather(got, mine, async_op=True))
        held = {r: (int(t[0]), int(t[1])) for r, t in enumerate(got)}
        for members in self._layout.replica_sets():
            if not any(held[r] == (1, plan.resume_step) for r in members):
                raise JobFailed("lockstep: no member of replica set %s (ranks holding the same shard) holds step "
                                "%d (state intact, step: %s); the shard is lost"
                                % (members, plan.resume_step, [held[r] for r in members]))
        return min(r for r in self._layout.replica_set if held[r] == (1, plan.resume_step))

    def _check_replicas(self):
        """Every rank holds a replica of the same state: compare their fingerprints
        (two 64-bit sums over parameters, buffers and optimizer state; an all-gather of
        16 bytes per rank). A rank that disagrees with a strict majority is reported
        and moved away (a pre-emptive migration: its replacement takes the majority's
        state); without a majority the job stops, since nobody knows which is right."""
        self._check_replicas_next = False
        dev = self._comm_device()
        mine = torch.tensor(self._state.fingerprint(), dtype=torch.int64, device=dev)
        got = [torch.empty_like(mine) for _ in range(self.world_size)]
        self._wait(dist.all_gather(got, mine, async_op=True))
        fps = [tuple(int(v) for v in t.tolist()) for t in got]
        sets = self._layout.replica_sets() if self._sharded else [list(range(self.world_size))]
        for members in sets:
            self._check_set(members, [fps[r] for r in members])

    def _check_set(self, members, fps):
        """Fingerprints `fps` of the ranks `members`, which hold replicas of the same state."""
        counts = {}
        for fp in fps:
            counts[fp] = counts.get(fp, 0) + 1
        if len(counts) == 1:
            return
        top = max(counts.values())
        majority = [fp for fp, n in counts.items() if n == top]
        agree = [r for r, fp in zip(members, fps) if len(majority) == 1 and fp == majority[0]]
        odd = [r for r in members if r not in agree]
        msg = ("replica divergence at step %d in generation %d: rank%s %s disagree%s with %s"
               % (self.step, self.generation, "s" if len(odd) > 1 else "", ",".join(map(str, odd)),
                  "" if len(odd) > 1 else "s", "ranks " + ",".join(map(str, agree)) if agree else "each other"))
        log.error("lockstep: %s", msg)
        self._emit("divergence", ranks=odd, agree=agree, message=msg)
        if len(majority) != 1 or top * 2 <= len(members):
            raise JobFailed("lockstep: %s; no majority to trust, stopping" % msg)
        if self.rank == agree[0]:
            for r in odd:
                try:
                    status, reply = self.client.migrate({"rank": r, "kind": "preemptive", "reason": msg})
                    log.warning("lockstep: asked to move rank %d away: %d %s", r, status, reply)
                except Unavailable as e:
                    log.warning("lockstep: could not ask to move rank %d away: %s", r, e)

    def _corrupt(self):
        """Fault injection (faults.py "corrupt"): silent data corruption of this replica."""
        with torch.no_grad():
            self._state.params[0].view(-1)[0] += 1e-3

    def _finish(self):
        """All ranks leave together (a barrier), so that the coordinator does not take the
        first exit for a failure while the others still run; then heartbeat "done"."""
        try:
            self._wait(dist.barrier(async_op=True))
        except RuntimeError as e:
            log.warning("lockstep: the final barrier failed (%s); every rank committed step %d",
                        str(e).splitlines()[0], self.step)
        self._formed = False
        # "done" first, sent from this thread (the heartbeat thread dies with the
        # interpreter's finalization, which can start before it wakes up), then the group
        # is freed: freeing holds the GIL (gloo's destructor, gc.collect() of torch 2.x's
        # few hundred thousand objects: 1.2 s at load 20, several seconds for 4 ranks
        # under nice on 2 cores), so no heartbeat leaves meanwhile. Before "done", the
        # coordinator took that silence for death: the migration benchmark's torch 2.15
        # run had every rank fenced after its last step ("no replica holds step 119").
        # Once a member said "done", the coordinator never fences the generation's members.
        self.heartbeat.update(step=self.step, state="done")
        self.heartbeat.beat()
        self._free_group()      # a gloo group left to the interpreter's exit can delay it
        self._emit("finished")


class _NoReducer:
    """The reducer of a fully_shard model: FSDP2 reduces the gradients itself."""
    rebuilt = None
    enabled = True

    def begin(self, step):
        pass

    def reset(self):
        pass

    def close(self):
        pass


def _blob_sum(blob):
    """A 63-bit checksum of the meta record (it travels before the digests it holds)."""
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little") >> 1


def _local_address(coordinator):
    """The local address a peer would use to reach us (the route to the coordinator)."""
    u = urllib.parse.urlsplit(coordinator)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((u.hostname, u.port or 80))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


_seed_base = int(os.environ.get("LOCKSTEP_SEED", "0") or 0)


def seed(step: int, rank: int) -> int:
    """Reseed torch/random/numpy from (seed, step, rank); seed = join(seed=) or LOCKSTEP_SEED."""
    return seeding.seed(step, rank, _seed_base)


def _env_number(name, default, kind):
    v = os.environ.get(name)
    if not v:
        return default
    try:
        x = kind(v)
    except ValueError:
        raise ValueError("lockstep_train.join: %s must be a number (got %r)" % (name, v))
    return x


def join(coordinator: Optional[str] = None, role: Optional[str] = None, rank: Optional[int] = None,
         world_size: Optional[int] = None, backend: str = "gloo", hang_timeout: Optional[float] = None,
         on_event: Optional[EventHook] = None, seed: Optional[int] = None, reduction: str = "ddp",
         bucket_cap_mb: float = 25, host: Optional[str] = None, heartbeat_interval: Optional[float] = None,
         overlap: bool = True, fingerprint_every: Optional[int] = None,
         pause_agree_every: Optional[int] = None) -> Job:
    """Register this process with the coordinator and start heartbeating. Returns a Job;
    the process group is formed by job.steps() (a spare waits there until assigned).
    fingerprint_every: replicas compare fingerprints every this many steps and after
    every re-form (default LOCKSTEP_FINGERPRINT_EVERY or 100; 0: never).
    pause_agree_every: the ranks agree on a pending pause's step every this many steps
    (default LOCKSTEP_PAUSE_AGREE_EVERY or 1): an all-reduce of 8 bytes; a pause then
    happens up to this many steps after the coordinator's pause step."""
    global _seed_base
    settings = settings_from(os.environ, coordinator, role, rank, world_size)
    if hang_timeout is None:
        try:
            hang_timeout = float(os.environ.get("LOCKSTEP_HANG_TIMEOUT") or 10.0)
        except ValueError:
            raise ValueError("lockstep_train.join: LOCKSTEP_HANG_TIMEOUT must be seconds (got %r)"
                             % os.environ.get("LOCKSTEP_HANG_TIMEOUT"))
    if hang_timeout <= 0:
        raise ValueError("lockstep_train.join: hang_timeout must be > 0 (got %r)" % hang_timeout)
    if heartbeat_interval is None:   # the operator sets it from the TrainingJob's spec.detection
        heartbeat_interval = _env_number("LOCKSTEP_HEARTBEAT_INTERVAL", 0.75, float)
    if heartbeat_interval <= 0:
        raise ValueError("lockstep_train.join: heartbeat_interval must be > 0 (got %r)" % heartbeat_interval)
    if fingerprint_every is None:
        fingerprint_every = _env_number("LOCKSTEP_FINGERPRINT_EVERY", FINGERPRINT_EVERY, int)
    if fingerprint_every < 0:
        raise ValueError("lockstep_train.join: fingerprint_every must be >= 0 (got %r)" % fingerprint_every)
    if pause_agree_every is None:
        pause_agree_every = _env_number("LOCKSTEP_PAUSE_AGREE_EVERY", PAUSE_AGREE_EVERY, int)
    if pause_agree_every < 1:
        raise ValueError("lockstep_train.join: pause_agree_every must be >= 1 (got %r)" % pause_agree_every)
    transfer_bucket_mb = _env_number("LOCKSTEP_TRANSFER_BUCKET_MB", TRANSFER_BUCKET_MB, float)
    if transfer_bucket_mb <= 0:
        raise ValueError("lockstep_train.join: LOCKSTEP_TRANSFER_BUCKET_MB must be > 0 (got %r)"
                         % transfer_bucket_mb)
    if seed is not None:
        _seed_base = int(seed)
    host = host or os.environ.get("LOCKSTEP_HOST") or _local_address(settings.coordinator)
    client = CoordinatorClient(settings.coordinator)
    store_server = dist.TCPStore(host, 0, None, True, datetime.timedelta(seconds=hang_timeout),
                                 wait_for_workers=False)
    job = Job(settings, client, new_member_id(), host, store_server, backend, hang_timeout,
              on_event, reduction, bucket_cap_mb, heartbeat_interval, overlap, fingerprint_every,
              transfer_bucket_mb, pause_agree_every)
    job._register()
    job.heartbeat.start()
    return job
