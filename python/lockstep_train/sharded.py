"""Sharded layouts (FSDP2 `fully_shard` on a device mesh the job owns; torch 2.x).

HSDP as TorchTitan configures it: a 2-D mesh (replicate, shard), global rank
r = i * shard + j at coordinate (i, j). The ranks with the same j hold the same shard
(a "replica set"); a failed rank's shard, optimizer state and step are rebuilt from
another member of its replica set (job.py, _sync_state).

The mesh's process groups are ForwardingGroups: Python `dist.ProcessGroup`s of fixed
rank and size, created once and kept for the life of the process, so the user's
`fully_shard` modules, their DTensor parameters and the optimizer never change. At every
generation the library forms real gloo subgroups (`dist.new_group`) and points each
forwarding group at its current one (`ShardedLayout.form`); at a failure it drops them
(`ShardedLayout.free`). Collectives go through the torch.distributed functions FSDP2
calls (`all_gather_single`, `reduce_scatter_single`, `all_reduce`, ...), which call the
group's methods from Python; their works are waited on with the job's abortable wait.
"""
from __future__ import annotations

import datetime
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from . import _torch_private as private
from .wrappers import UnsupportedWrapper

SUPPORTED = ("supported sharded layouts: FSDP2 fully_shard(module, mesh=job.device_mesh(replicate=R, "
             "shard=S)) with R >= 2 (HSDP: every shard held by R ranks), or R = 1 with "
             "mirror_every=K (pure FSDP: each rank's shard mirrored in its buddy's CPU memory every K "
             "steps), on torch >= 2.15; the mesh's two dimensions only (no tensor, pipeline or context "
             "parallel dimension), every parameter a DTensor on that mesh placed (Replicate(), Shard(0))")


class UnsupportedLayout(UnsupportedWrapper):
    """A sharded layout the library cannot protect (see SUPPORTED)."""


class _Work(dist.Work):
    """A collective's work on the current generation's group, waited on with the job's
    abortable wait (a survivor behind a dead peer leaves on the coordinator's abort)."""

    def __init__(self, inner: Any, wait: Callable[[Any], None]) -> None:
        super().__init__()
        self.inner, self._wait = inner, wait

    def wait(self, timeout: Any = None) -> bool:
        self._wait(self.inner)
        return True

    def is_completed(self) -> bool:
        return self.inner.is_completed()

    def is_success(self) -> bool:
        return self.inner.is_success()

    def exception(self) -> Any:
        return self.inner.exception()

    def get_future(self) -> Any:
        return self.inner.get_future()

    def result(self) -> Any:
        return self.inner.result()


def _forward(name: str) -> Callable[..., Any]:
    def call(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)
    call.__name__ = name
    return call


class ForwardingGroup(dist.ProcessGroup):
    """A process group of fixed rank and size whose collectives run on the current
    generation's gloo group (`inner`); without one (between generations) they raise."""

    def __init__(self, rank: int, size: int, name: str, wait: Callable[[Any], None]) -> None:
        super().__init__(rank, size)
        self.inner: Any = None
        self._wait = wait
        self._name = name
        private.register_process_group(name, self)

    @property
    def group_name(self) -> str:     # c10d reads it from a backend; this group has none
        return self._name

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        g = self.inner
        if g is None:
            raise RuntimeError("lockstep_train: %s on mesh group %s between generations (the group is "
                               "being re-formed)" % (name, self.group_name))
        w = getattr(g, name)(*args, **kwargs)
        return _Work(w, self._wait) if isinstance(w, dist.Work) else w

    for _n in ("allreduce", "allreduce_coalesced", "allgather", "_allgather_base", "allgather_coalesced",
               "allgather_into_tensor_coalesced", "all_gather_single", "all_gather_single_coalesced",
               "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_single",
               "reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced", "broadcast", "barrier",
               "reduce", "gather", "scatter", "alltoall", "alltoall_base", "all_to_all_single", "send", "recv"):
        locals()[_n] = _forward(_n)
    del _n

    def getBackendName(self) -> str:
        return "gloo"

    def name(self) -> str:
        return "lockstep-forwarding"


class ShardedLayout:
    """The job's mesh: `replicate` x `shard` ranks, forwarding groups, and the real
    subgroups of the current generation."""

    def __init__(self, replicate: int, shard: int, names: Tuple[str, str], device_type: str, rank: int,
                 wait: Callable[[Any], None]) -> None:
        self.replicate, self.shard, self.names = replicate, shard, names
        self.world_size = replicate * shard
        if not 0 <= rank < self.world_size:
            raise ValueError("lockstep_train: rank %d is outside the %d x %d mesh" % (rank, replicate, shard))
        self.rank = rank
        i, j = divmod(rank, shard)
        # dimension 0 (replicate): the ranks holding shard j; dimension 1 (shard): replica i's ranks
        self.replica_set = [k * shard + j for k in range(replicate)]
        self.shard_group_ranks = [i * shard + k for k in range(shard)]
        self.rep_group = ForwardingGroup(i, replicate, "lockstep/%s" % names[0], wait)
        self.shard_group = ForwardingGroup(j, shard, "lockstep/%s" % names[1], wait)
        mesh = torch.arange(self.world_size, dtype=torch.int).reshape(replicate, shard)
        self.mesh = private.device_mesh(device_type, mesh, names, [self.rep_group, self.shard_group], rank)
        self.current_rep: Any = None      # the real subgroup of replica_set this generation

    def replica_sets(self) -> List[List[int]]:
        return [[k * self.shard + j for k in range(self.replicate)] for j in range(self.shard)]

    def form(self, timeout: datetime.timedelta) -> None:
        """After the generation's default group formed: every rank creates every subgroup,
        in the same order (dist.new_group is collective over the default group)."""
        reps: Dict[int, Any] = {}
        shards: Dict[int, Any] = {}
        for j in range(self.shard):
            reps[j] = dist.new_group([k * self.shard + j for k in range(self.replicate)], timeout=timeout)
        for i in range(self.replicate):
            shards[i] = dist.new_group([i * self.shard + k for k in range(self.shard)], timeout=timeout)
        i, j = divmod(self.rank, self.shard)
        self.rep_group.inner, self.shard_group.inner = reps[j], shards[i]
        self.current_rep = reps[j]
        private.world_register(self.rep_group, self.replica_set, self.rep_group.group_name)
        private.world_register(self.shard_group, self.shard_group_ranks, self.shard_group.group_name)

    def free(self) -> None:
        for g in (self.rep_group, self.shard_group):
            private.world_unregister(g)
        self.rep_group.inner = self.shard_group.inner = self.current_rep = None


class _StandIn(dist.ProcessGroup):
    """The default group between job.device_mesh() and the first generation: it has the
    rank and size torch's DeviceMesh reads while fully_shard builds, and communicates
    with nobody (a collective on it raises)."""

    def getBackendName(self) -> str:
        return STANDIN


STANDIN = "lockstep_standin"


def init_standin(rank: int, world: int) -> None:
    """Make a stand-in of this rank and world size the default group (public
    dist.Backend.register_backend + dist.init_process_group)."""
    if STANDIN not in dist.Backend.backend_list:
        dist.Backend.register_backend(STANDIN, lambda store, r, n, timeout: _StandIn(r, n), devices=["cpu"])
    if dist.is_initialized():
        raise RuntimeError("lockstep_train: job.device_mesh(): a default process group exists already; the "
                           "library forms it (remove init_process_group / init_device_mesh from the script)")
    dist.init_process_group(STANDIN, store=dist.HashStore(), rank=rank, world_size=world)


_warm = False


def warm_up(device_type: str) -> None:
    """Run fully_shard once on a one-rank mesh (stand-in group), so that the imports and
    first-use set-up of FSDP2 and DTensor (seconds on a loaded machine) are done before
    this spare is assigned a rank and the others wait for it."""
    global _warm
    if _warm:
        return
    _warm = True
    from torch.distributed.fsdp import fully_shard
    init_standin(0, 1)
    try:
        groups = [ForwardingGroup(0, 1, "lockstep/warm-up/%d" % k, lambda w: w.wait()) for k in range(2)]
        mesh = private.device_mesh(device_type, torch.zeros(1, 1, dtype=torch.int), ("r", "s"), groups, 0)
        solo = dist.ProcessGroupGloo(dist.HashStore(), 0, 1, datetime.timedelta(seconds=30))
        for g in groups:
            g.inner = solo
        m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
        fully_shard(m[0], mesh=mesh)
        fully_shard(m, mesh=mesh)
        opt = torch.optim.Adam(m.parameters())
        m(torch.zeros(1, 2)).sum().backward()
        opt.step()
        for g in groups:
            g.inner = None
        del opt, m, solo
    finally:
        dist.destroy_process_group()


def check_model(model: torch.nn.Module, layout: Optional[ShardedLayout]) -> bool:
    """True for a model sharded on the job's mesh (every parameter a DTensor on it, placed
    (Replicate(), Shard(0))); False for an unsharded model; UnsupportedLayout otherwise."""
    try:
        from torch.distributed.tensor import DTensor, Replicate, Shard
    except ImportError:
        return False
    params = list(model.named_parameters())
    dts = [(n, p) for n, p in params if isinstance(p, DTensor)]
    if not dts:
        return False
    if layout is None:
        raise UnsupportedLayout("lockstep_train: job.track() cannot protect parameter %r: a DTensor on a "
                                "device mesh the library does not own; build the mesh with "
                                "job.device_mesh(replicate=R, shard=S) and fully_shard on it; %s"
                                % (dts[0][0], SUPPORTED))
    for n, p in params:
        if not isinstance(p, DTensor):
            raise UnsupportedLayout("lockstep_train: job.track() cannot protect parameter %r: not sharded "
                                    "while the rest of the model is (fully_shard the root module too); %s"
                                    % (n, SUPPORTED))
        if p.device_mesh is not layout.mesh:
            raise UnsupportedLayout("lockstep_train: job.track() cannot protect parameter %r: a DTensor on "
                                    "a device mesh %s the library does not own (e.g. a tensor-parallel "
                                    "dimension); %s" % (n, p.device_mesh, SUPPORTED))
        if tuple(p.placements) != (Replicate(), Shard(0)):
            raise UnsupportedLayout("lockstep_train: job.track() cannot protect parameter %r placed %s; %s"
                                    % (n, tuple(p.placements), SUPPORTED))
    return True


def local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (the tensor itself otherwise)."""
    to_local = getattr(t, "to_local", None)
    if to_local is None or not hasattr(t, "device_mesh"):
        return t
    with torch.no_grad():
        return t.to_local()


def check_mesh_args(replicate: int, shard: int, names: Sequence[str], mirror_every: Optional[int] = None) -> None:
    if len(tuple(names)) != 2 or len(set(names)) != 2:
        raise UnsupportedLayout("lockstep_train: job.device_mesh(): two distinct dimension names "
                                "(replicate, shard), got %r; %s" % (names, SUPPORTED))
    if shard < 1 or replicate < 1:
        raise ValueError("lockstep_train: job.device_mesh(): replicate and shard must be >= 1")
    if mirror_every is not None:
        if isinstance(mirror_every, bool) or not isinstance(mirror_every, int) or mirror_every < 1:
            raise ValueError("lockstep_train: job.device_mesh(mirror_every=%r): a number of steps >= 1"
                             % (mirror_every,))
        if replicate != 1:
            raise UnsupportedLayout("lockstep_train: job.device_mesh(replicate=%d, mirror_every=%d): the buddy "
                                    "mirror is for pure FSDP (replicate=1); HSDP rebuilds a shard from its "
                                    "other replica; %s" % (replicate, mirror_every, SUPPORTED))
        if shard < 2:
            raise UnsupportedLayout("lockstep_train: job.device_mesh(replicate=1, shard=%d): the buddy mirror "
                                    "needs at least 2 ranks; %s" % (shard, SUPPORTED))
        return
    if replicate < 2:
        raise UnsupportedLayout("lockstep_train: job.device_mesh(replicate=%d, shard=%d): pure FSDP, no "
                                "second copy of a shard: pass mirror_every=K (a buddy mirror); %s"
                                % (replicate, shard, SUPPORTED))
