"""Gradient averaging across data-parallel ranks, in a layout that survives re-forms.

GradientReducer("ddp") reproduces what torch's DistributedDataParallel computes with its
defaults (find_unused_parameters=False, bucket_cap_mb=25, no comm hook): the first
iteration reduces one bucket holding every parameter in parameter order; from then on
DDP's rebuilt buckets are used (parameters in the order their gradients became ready,
a first bucket of dist._DEFAULT_FIRST_BUCKET_BYTES, then bucket_cap_mb). Each gradient
is multiplied by 1/world_size while copied into its bucket, the bucket is summed with
all_reduce and copied back. The bucket layout depends only on the model (never on the
history of process groups), so a re-formed group reduces exactly as the fault-free run.
GradientReducer("flat") is one flat buffer in parameter order (the spike's layout).

Overlap, as DDP does it: after begin(iteration), a hook that runs once a parameter's
gradient has been accumulated copies it into its bucket, and a bucket whose gradients
are all in is all-reduced at once (asynchronously, buckets strictly in layout order so
that every rank issues the same collectives in the same order) while backward goes on.
reduce() then launches what is left (buckets with a parameter that got no gradient: it
counts as zeros), waits, and copies the buckets back. The numbers are the same as
without overlap: the same products summed by the same collectives. A second backward
before reduce() (gradient accumulation outside no_sync()) is detected: the early
reductions are dropped and reduce() reduces the accumulated gradients after backward.

Used from the training thread only (gradient hooks run inside backward()). After a
failed collective call reset(): it drops the in-flight work and the buckets, which hold
the old process group.
"""
from __future__ import annotations

import logging
import sys
from typing import Any, Callable, Iterable, List, Optional, Sequence

import torch
import torch.distributed as dist

from . import _torch_private as private

MODES = ("ddp", "flat")
log = logging.getLogger("lockstep_train")


class _Round:
    """One iteration's overlapped reduction: which buckets are full and launched."""

    def __init__(self, iteration, buckets, group):
        self.iteration = iteration
        self.buckets = buckets
        self.group = group
        self.scale = 1.0 / dist.get_world_size(group)
        self.bucket_of = {}
        for b, idx in enumerate(buckets):
            for i in idx:
                self.bucket_of[i] = b
        self.pending = [len(idx) for idx in buckets]
        self.filled = set()         # parameters copied into their bucket this round
        self.works = []             # launched, in bucket order
        self.spoiled = False        # a gradient arrived twice: reduce after backward


class GradientReducer:
    def __init__(self, params: Iterable[torch.Tensor], mode: str = "ddp", bucket_cap_mb: float = 25,
                 overlap: bool = True, wait: Optional[Callable[[Any], Any]] = None) -> None:
        if mode not in MODES:
            raise ValueError("reduction must be one of %s (got %r)" % ("|".join(MODES), mode))
        self.mode = mode
        self.wait = wait or (lambda work: work.wait())   # Job passes its abortable wait
        self.overlap = overlap and mode == "ddp"
        self.params = [p for p in params if p.requires_grad]
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
        self.first_bucket_bytes = private.first_bucket_bytes()
        self.rebuilt: Optional[List[List[int]]] = None           # DDP's steady-state buckets (lists of param indices)
        self.enabled = True           # False inside no_sync(): hooks only record
        self.overlapped = 0           # buckets launched from a hook (during backward)
        self._ready: List[int] = []              # gradient-ready order seen in the current backward
        self._round: Optional[_Round] = None   # the armed overlapped reduction, if any
        self._bufs = None             # (layout, bucket buffers, {param: view}) kept between iterations
        self._hooks = []
        self._accumulators: List[Any] = []       # torch < 2.1: the AccumulateGrad nodes hooked
        if mode == "ddp":
            with torch.enable_grad():
                for i, p in enumerate(self.params):
                    self._hooks.append(self._hook_accumulated(p, self._make_hook(i)))

    def _hook_accumulated(self, p, fn):
        """Call fn() after p's gradient has been accumulated into p.grad."""
        if hasattr(p, "register_post_accumulate_grad_hook"):        # torch >= 2.1
            return p.register_post_accumulate_grad_hook(lambda _p: fn())
        acc = private.accumulate_grad_node(p)                       # p's AccumulateGrad node
        self._accumulators.append(acc)                              # it must stay alive
        return acc.register_hook(lambda *_: fn())

    def _make_hook(self, i):
        def hook():
            self._ready.append(i)
            r = self._round
            if r is not None and self.enabled and not r.spoiled:
                self._fill(r, i)
        return hook

    def stop_recording(self) -> None:
        """Remove the gradient hooks (a kept DDP wrapper reduces; the hooks were only
        needed to record the gradient-ready order of the first iteration)."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._accumulators = []

    def close(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._accumulators = []
        self.reset()

    def reset(self) -> None:
        """Forget the armed round, its in-flight work and the bucket buffers (after a
        failed collective: they reference the old process group)."""
        self._round = None
        self._bufs = None
        self._ready = []

    def first_buckets(self) -> List[List[int]]:
        """DDP's first-iteration layout: one bucket per dtype, parameter order."""
        buckets = private.compute_bucket_assignment_by_size(self.params, [sys.maxsize], [False] * len(self.params))
        return list(reversed(buckets))

    def rebuilt_buckets(self, order: Sequence[int]) -> List[List[int]]:
        """DDP's rebuilt layout for a gradient-ready order (list of param indices)."""
        seen, uniq = set(), []
        for i in order:
            if i not in seen:
                seen.add(i)
                uniq.append(i)
        uniq += [i for i in range(len(self.params)) if i not in seen]   # unused: last
        return private.compute_bucket_assignment_by_size(
            [self.params[i] for i in uniq], [self.first_bucket_bytes, self.bucket_bytes_cap],
            [False] * len(uniq), uniq)

    def layout_for(self, iteration: int) -> List[List[int]]:
        """The buckets used for the job's `iteration`-th reduction (0 = the first)."""
        if self.mode == "flat":
            return self.first_buckets()
        if iteration == 0:
            return self.first_buckets()
        if self.rebuilt is None:
            self.rebuilt = self.rebuilt_buckets(self._ready)
        return self.rebuilt

    def begin(self, iteration: int, group: Optional[Any] = None) -> None:
        """Arm the overlapped reduction for the coming backward of `iteration` (no-op
        without overlap, and for the first iteration: DDP reduces it after backward)."""
        self._round = None
        self._ready = []
        if not self.overlap or iteration == 0 or self.rebuilt is None:
            return
        self._round = _Round(iteration, self.rebuilt, group)

    def _buffers(self, buckets):
        """The bucket buffers of a layout, and each parameter's view into its bucket
        (kept between iterations, as DDP keeps its buckets)."""
        if self._bufs is None or self._bufs[0] is not buckets:
            bufs, views = [], {}
            for b in buckets:
                p = self.params[b[0]]
                buf = torch.empty(sum(self.params[i].numel() for i in b), dtype=p.dtype, device=p.device)
                off = 0
                for i in b:
                    n = self.params[i].numel()
                    views[i] = buf.narrow(0, off, n).view(self.params[i].shape)
                    off += n
                bufs.append(buf)
            self._bufs = (buckets, bufs, views)
        return self._bufs[1], self._bufs[2]

    def _fill(self, r, i, from_hook=True):
        """Parameter i's gradient is final: scale it into its bucket; a full bucket is
        launched when its turn comes."""
        if i in r.filled:                # a second backward before reduce()
            r.spoiled = True
            log.warning("lockstep: a gradient was accumulated twice before all_reduce_gradients(); "
                        "reducing after backward this step (use job.no_sync() for accumulation "
                        "micro-batches)")
            return
        r.filled.add(i)
        # DDP's mul_out(bucket view, grad, 1/world): one torch call per parameter.
        torch.mul(self.params[i].grad, r.scale, out=self._buffers(r.buckets)[1][i])
        b = r.bucket_of[i]
        r.pending[b] -= 1
        if r.pending[b] == 0:
            self._launch_ready(r, from_hook)

    def _launch_ready(self, r, from_hook=False):
        bufs = self._buffers(r.buckets)[0]
        while len(r.works) < len(r.buckets) and r.pending[len(r.works)] == 0:
            b = len(r.works)
            r.works.append(dist.all_reduce(bufs[b], group=r.group, async_op=True))
            if from_hook:
                self.overlapped += 1

    def reduce(self, iteration: int, group: Optional[Any] = None) -> None:
        """Average the gradients over `group` (default group if None). A missing
        gradient counts as zeros (every rank must send the same layout)."""
        r, self._round = self._round, None
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if r is not None and r.iteration == iteration and not r.spoiled and r.group is group:
            self._finish_round(r)
        else:
            if r is not None:
                for w in r.works:       # launched before the round was spoiled
                    self.wait(w)
            self._reduce_after_backward(iteration, group)
        if self.mode == "ddp" and self.rebuilt is None and self._ready:
            # DDP rebuilds its buckets after the first iteration, from the order its
            # gradients became ready in; the order is the same in every iteration.
            self.rebuilt = self.rebuilt_buckets(self._ready)
        self._ready = []

    def _finish_round(self, r):
        for i in range(len(self.params)):
            if i not in r.filled:        # no gradient this backward: zeros (already set)
                self._fill(r, i, from_hook=False)
        self._launch_ready(r)
        for w in r.works:
            self.wait(w)
        views = self._buffers(r.buckets)[1]
        with torch.no_grad():
            for i, p in enumerate(self.params):
                p.grad.copy_(views[i])
        del r.works

    def _reduce_after_backward(self, iteration, group):
        world = dist.get_world_size(group)
        buckets = self.layout_for(iteration)
        grads = [p.grad for p in self.params]
        bufs = self._buffers(buckets)[0] if self.mode == "ddp" else None
        works = []
        scale = 1.0 / world
        for k, b in enumerate(buckets):
            if bufs is not None:
                buf = bufs[k]
            else:
                g0 = grads[b[0]]
                buf = torch.empty(sum(grads[i].numel() for i in b), dtype=g0.dtype, device=g0.device)
            off = 0
            for i in b:
                n = grads[i].numel()
                if self.mode == "ddp":
                    torch.mul(grads[i], scale, out=buf.narrow(0, off, n).view(grads[i].shape))
                else:
                    buf.narrow(0, off, n).copy_(grads[i].reshape(-1))
                off += n
            works.append((dist.all_reduce(buf, group=group, async_op=True), buf))
        for w, _ in works:
            self.wait(w)
        with torch.no_grad():
            for b, (_, buf) in zip(buckets, works):
                off = 0
                for i in b:
                    n = grads[i].numel()
                    view = buf.narrow(0, off, n).view(grads[i].shape)
                    if self.mode == "flat":
                        view.div_(world)
                    grads[i].copy_(view)
                    off += n
        del works
