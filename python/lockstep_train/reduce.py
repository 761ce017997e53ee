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

Used from the training thread only (gradient hooks run inside backward()).
"""
import sys

import torch
import torch.distributed as dist

MODES = ("ddp", "flat")


class GradientReducer:
    def __init__(self, params, mode="ddp", bucket_cap_mb=25):
        if mode not in MODES:
            raise ValueError("reduction must be one of %s (got %r)" % ("|".join(MODES), mode))
        self.mode = mode
        self.params = [p for p in params if p.requires_grad]
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
        self.first_bucket_bytes = dist._DEFAULT_FIRST_BUCKET_BYTES
        self.rebuilt = None           # DDP's steady-state buckets (lists of param indices)
        self._ready = []              # gradient-ready order seen in the current backward
        self._hooks = []
        if mode == "ddp":
            for i, p in enumerate(self.params):
                self._hooks.append(p.register_hook(self._make_hook(i)))

    def _make_hook(self, i):
        def hook(grad):
            self._ready.append(i)
            return None
        return hook

    def close(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def first_buckets(self):
        """DDP's first-iteration layout: one bucket per dtype, parameter order."""
        buckets, _ = dist._compute_bucket_assignment_by_size(
            self.params, [sys.maxsize], [False] * len(self.params))
        return [list(b) for b in reversed(buckets)]

    def rebuilt_buckets(self, order):
        """DDP's rebuilt layout for a gradient-ready order (list of param indices)."""
        seen, uniq = set(), []
        for i in order:
            if i not in seen:
                seen.add(i)
                uniq.append(i)
        uniq += [i for i in range(len(self.params)) if i not in seen]   # unused: last
        buckets, _ = dist._compute_bucket_assignment_by_size(
            [self.params[i] for i in uniq], [self.first_bucket_bytes, self.bucket_bytes_cap],
            [False] * len(uniq), uniq)
        return [list(b) for b in buckets]

    def layout_for(self, iteration):
        """The buckets used for the job's `iteration`-th reduction (0 = the first)."""
        if self.mode == "flat":
            return self.first_buckets()
        if iteration == 0:
            return self.first_buckets()
        if self.rebuilt is None:
            self.rebuilt = self.rebuilt_buckets(self._ready)
        return self.rebuilt

    def reduce(self, iteration, group=None):
        """Average the gradients over `group` (default group if None). A missing
        gradient counts as zeros (every rank must send the same layout)."""
        world = dist.get_world_size(group)
        buckets = self.layout_for(iteration)
        self._ready = []
        grads = []
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        works, bufs = [], []
        scale = 1.0 / world
        for b in buckets:
            dtype, device = grads[b[0]].dtype, grads[b[0]].device
            buf = torch.empty(sum(grads[i].numel() for i in b), dtype=dtype, device=device)
            off = 0
            for i in b:
                n = grads[i].numel()
                if self.mode == "ddp":
                    torch.mul(grads[i], scale, out=buf.narrow(0, off, n).view(grads[i].shape))
                else:
                    buf.narrow(0, off, n).copy_(grads[i].reshape(-1))
                off += n
            works.append(dist.all_reduce(buf, group=group, async_op=True))
            bufs.append(buf)
        for w in works:
            w.wait()
        with torch.no_grad():
            for b, buf in zip(buckets, bufs):
                off = 0
                for i in b:
                    n = grads[i].numel()
                    view = buf.narrow(0, off, n).view(grads[i].shape)
                    if self.mode == "flat":
                        view.div_(world)
                    grads[i].copy_(view)
                    off += n
        del works, bufs
