"""The user's own wrappers: which are kept (DistributedDataParallel), which are refused.

A kept DDP wrapper is built on job.ddp_group, a process group of size 1 that the library
owns and that never changes: DDP's constructor and its reducer talk to nobody through it
(the library syncs the state at every re-form instead, from rank 0 at the start as DDP's
constructor does). The gradients go through a DDP communication hook (public
`register_comm_hook`) that all-reduces each bucket over the current generation's group,
whatever that is; nothing in the wrapper is replaced at a re-form. (TorchFT does the same
with its own DDP subclass; here the user's plain torch DDP object is kept.)

Bit identity with a fault-free DDP run. Each bucket is scaled by 1/world_size (the same
multiply DDP does while copying into its bucket) and all-reduced. The layout must be
the fault-free run's: DDP's first iteration (step 0) reduces one bucket of every
parameter in parameter order, later ones use the buckets DDP rebuilt from the
gradient-ready order of the first. A wrapper that lived through the job so far has
exactly those. A spare's wrapper is new: its first iteration uses the one-bucket layout
while the others use the rebuilt one (and a survivor replaying a failed step 0 has
already rebuilt). The hook compares DDP's bucket with the expected one (the layout the
source sent with the state, or computed from the ready order of step 0, which the
library records with gradient hooks during that step only); from the first bucket that
differs it holds DDP's buckets until the last one arrives, then reduces the expected
layout (the same products and collectives as everyone else) and hands the results back
to DDP. From its second iteration on the spare's wrapper has rebuilt the same layout.
The hook never raises into DDP's reducer: a failed collective fails the bucket's future,
so DDP ends backward cleanly and backward() raises inside job.step_guard(). DDP never
waits on a collective itself: the buckets' all-reduces start as their buckets fill (as
DDP's own), and the last bucket's hook waits for them with the job's abortable wait
(heartbeating in_collective, giving up on the coordinator's abort) before it completes
DDP's futures.

Buffers: when DDP would broadcast them (broadcast_buffers=True and the model has some),
a forward pre-hook broadcasts them from rank 0 over the current group (the same values
DDP's forward would broadcast; its own broadcast runs on the stand-in and changes nothing).
"""
from __future__ import annotations

import logging
from typing import Any, List, Optional

import torch
import torch.distributed as dist

from . import _torch_private as private

log = logging.getLogger("lockstep_train")

SUPPORTED = ("supported: a plain torch.nn.Module (pure data parallel: every rank holds the whole "
             "model), or torch.nn.parallel.DistributedDataParallel(model, process_group=job.ddp_group) "
             "with its default find_unused_parameters=False, gradient_as_bucket_view=False, "
             "static_graph=False and no communication hook of its own; or, on torch >= 2.15, FSDP2 "
             "fully_shard on job.device_mesh(replicate=R, shard=S) with R >= 2 (HSDP)")


class UnsupportedWrapper(TypeError):
    """job.track() refuses a model the library cannot protect (see SUPPORTED)."""


def _names(obj) -> List[str]:
    return ["%s.%s" % (c.__module__, c.__name__) for c in type(obj).__mro__]


def _is_ddp(m) -> bool:
    return isinstance(m, torch.nn.parallel.DistributedDataParallel)


def _refuse(what: str) -> UnsupportedWrapper:
    return UnsupportedWrapper("lockstep_train: job.track() cannot protect %s; %s" % (what, SUPPORTED))


def check_module(model: Any) -> None:
    """Refuse what the library cannot protect: sharded or tensor/pipeline-parallel
    layouts (FSDP, fully_shard, DTensor or ShardedTensor parameters) and wrappers nested
    inside the model. A DDP wrapper at the top is checked by DDPAdapter."""
    if not isinstance(model, torch.nn.Module):
        raise _refuse("a %s (not a torch.nn.Module)" % type(model).__name__)
    inner = model.module if _is_ddp(model) else model
    for name, m in inner.named_modules():
        names = _names(m)
        where = "submodule %r" % name if name else "the model"
        if _is_ddp(m):
            raise _refuse("%s: a DistributedDataParallel nested inside the model (wrap the whole model once)" % where)
        if any(n.endswith(("FullyShardedDataParallel", ".FSDPModule")) for n in names):
            raise _refuse("%s: FSDP / fully_shard shards the parameters across ranks, and a rank's shard "
                          "has no replica here" % where)
    for name, p in inner.named_parameters():
        names = _names(p)
        if any(n.endswith((".DTensor", ".ShardedTensor")) for n in names):
            raise _refuse("parameter %r: a %s (sharded or tensor-parallel across a device mesh or "
                          "process group the library does not own)" % (name, type(p).__name__))


class DDPAdapter:
    """Drives a kept DistributedDataParallel wrapper for a Job (see the module doc)."""

    def __init__(self, job: Any, ddp: Any, reducer: Any) -> None:
        opts = private.ddp_options(ddp)
        if opts["process_group"] is not job.ddp_group:
            raise _refuse("a DistributedDataParallel built on a process group the library does not own "
                          "(build it with process_group=job.ddp_group; the library re-forms the real "
                          "group at every migration)")
        for key in ("find_unused_parameters", "gradient_as_bucket_view", "static_graph"):
            if opts[key]:
                raise _refuse("a DistributedDataParallel with %s=True" % key)
        if getattr(ddp, "buffer_hook", None) is not None:
            raise _refuse("a DistributedDataParallel with a buffer communication hook")
        if opts["parameters_to_ignore"]:
            raise _refuse("a DistributedDataParallel with parameters to ignore (%s)"
                          % ", ".join(opts["parameters_to_ignore"][:3]))
        self.job = job
        self.ddp = ddp
        self.reducer = reducer          # GradientReducer(overlap=False): layouts, ready order of step 0
        self.pos = {id(p): i for i, p in enumerate(reducer.params)}
        self._first = None
        self._slow: List[tuple] = []    # (bucket index, DDP's bucket buffer, param indices, future) held
        self._launched: List[tuple] = []  # (work, DDP's bucket buffer, future) all-reduced this iteration
        self.slow_iterations = 0        # iterations reduced in the expected layout, not DDP's (a spare's first)
        try:
            ddp.register_comm_hook(None, self._hook)
        except RuntimeError as e:
            if "once" in str(e):
                raise _refuse("a DistributedDataParallel with a communication hook of its own") from None
            raise
        self._pre = ddp.register_forward_pre_hook(self._sync_buffers)

    # -- the expected layout ----------------------------------------------------------------
    def expected(self) -> Optional[List[List[int]]]:
        if self.job.step == 0:
            if self._first is None:
                self._first = self.reducer.first_buckets()
            return self._first
        return self.reducer.rebuilt

    def reset(self) -> None:
        """A failed step: forget held buckets (their futures fail if still open)."""
        for fut in [f for *_, f in self._slow] + [f for *_, f in self._launched]:
            if not fut.done():
                fut.set_exception(RuntimeError("lockstep: the step failed"))
        self._slow = []
        self._launched = []

    def close(self) -> None:
        self.reset()
        self._pre.remove()

    # -- DDP's communication hook -----------------------------------------------------------
    def _hook(self, _state, bucket):
        try:
            return self._reduce_bucket(bucket)
        except BaseException as e:      # never into DDP's reducer: it would be left mid-iteration
            fut = torch.futures.Future()
            fut.set_exception(e)
            return fut

    def _reduce_bucket(self, bucket):
        b = bucket.index()
        if b == 0:
            self.reset()
        idx = [self.pos[id(p)] for p in bucket.parameters()]
        want = self.expected()
        last = bucket.is_last()
        fut = torch.futures.Future()
        if not self._slow and (want is None or (b < len(want) and want[b] == idx)):
            buf = bucket.buffer()
            torch.mul(buf, 1.0 / self.job.world_size, out=buf)   # DDP's mul_out by 1/world_size
            self._launched.append((dist.all_reduce(buf, async_op=True), buf, fut))
            if last:
                self._wait_launched()
                self._iteration_done()
            return fut
        self._slow.append((b, bucket.buffer(), idx, fut))
        if last:
            self._wait_launched()
            self._reduce_held(want)
            self._iteration_done()
        return fut

    def _wait_launched(self):
        """Wait for this iteration's bucket all-reduces in the last bucket's hook (backward
        is done by then), with the job's abortable wait, and complete DDP's futures: DDP
        itself never blocks on a collective, so a survivor behind a dead peer gives up
        on the coordinator's abort like in the library's own collectives."""
        launched, self._launched = self._launched, []
        err = None
        for work, buf, fut in launched:
            if err is None:
                try:
                    self.job._wait(work)
                except BaseException as e:
                    err = e
            if err is None:
                fut.set_result(buf)
            else:
                fut.set_exception(err)

    def _iteration_done(self):
        if self.reducer.rebuilt is None and self.reducer._ready:
            # The ready order of the first iteration gives DDP's rebuilt layout (every
            # gradient is in once the last bucket is ready).
            self.reducer.rebuilt = self.reducer.rebuilt_buckets(self.reducer._ready)
        if self.reducer.rebuilt is not None:
            self.reducer.stop_recording()   # known (or received with the state): hooks not needed

    def _reduce_held(self, want):
        """DDP's buckets from the first mismatch on, reduced in the expected layout."""
        held, self._slow = self._slow, []
        try:
            # DDP's buckets before the first held one equal the expected ones: the held
            # buckets hold exactly the parameters of the expected buckets from there on.
            layout = want[held[0][0]:]
            if {i for b in layout for i in b} != {i for _, _, idx, _ in held for i in idx}:
                raise RuntimeError("lockstep: DDP's buckets do not match the expected bucket layout "
                                   "(every rank must build the same model)")
            src = {}                    # param index -> its flat slice in DDP's bucket buffer
            for _, buf, idx, _ in held:
                off = 0
                for i in idx:
                    n = self.reducer.params[i].numel()
                    src[i] = buf.narrow(0, off, n)
                    off += n
            scale = 1.0 / self.job.world_size
            bufs = []
            for bk in layout:
                p0 = self.reducer.params[bk[0]]
                out = torch.empty(sum(self.reducer.params[i].numel() for i in bk), dtype=p0.dtype, device=p0.device)
                off = 0
                for i in bk:
                    n = src[i].numel()
                    torch.mul(src[i], scale, out=out.narrow(0, off, n))
                    off += n
                bufs.append((bk, out, dist.all_reduce(out, async_op=True)))
            for bk, out, work in bufs:
                self.job._wait(work)
                off = 0
                for i in bk:
                    n = src[i].numel()
                    src[i].copy_(out.narrow(0, off, n))
                    off += n
            self.slow_iterations += 1
        except BaseException as e:
            for _, _, _, fut in held:
                fut.set_exception(e)
            return
        for _, buf, _, fut in held:
            fut.set_result(buf)

    # -- buffers ----------------------------------------------------------------------------
    def _sync_buffers(self, _module, _inputs):
        job = self.job
        if not job._formed or not job.world_size or job.world_size < 2:
            return
        if not private.ddp_will_sync_buffers(self.ddp):
            return
        bufs = list(self.ddp.module.buffers())
        with torch.no_grad():
            for t in bufs:
                job._wait(dist.broadcast(t, 0, async_op=True))
