"""Every private (underscore) or undocumented torch API the library uses, in one place.

Each entry says what it is for and the torch versions it was checked on. The whole test
suite runs on both ends of the supported range on every test run: Debian's torch 1.13
(1.13.0a0) and PyPI's torch 2.15 (python/torch2-requirements.txt). A torch outside
[1.13, 2.15] fails here, when the library first needs one of these, with a message
naming what it needs (LOCKSTEP_UNCHECKED_TORCH=1 tries anyway, with a warning), and a
torch inside the range that lacks one fails with a message naming it, never silently.

| what | used for | checked on |
|---|---|---|
| `dist._DEFAULT_FIRST_BUCKET_BYTES` | DDP's first rebuilt bucket size (bit identity with DDP) | 1.13, 2.15 |
| `dist._compute_bucket_assignment_by_size` | DDP's own bucket assignment (bit identity with DDP) | 1.13, 2.15 |
| `AccumulateGrad` node via `p.expand_as(p).grad_fn.next_functions` | gradient-ready hook before torch 2.1 (`register_post_accumulate_grad_hook` after) | 1.13 |
| `optimizer.step` replaced on the instance | "step committed" before torch 2.0 (`register_step_post_hook` after) | 1.13 |
| `dist.ProcessGroup(store, rank, size)`, `._register_backend`, `._set_default_backend` | the size-1 stand-in group a kept DDP wrapper is built on (torch 2.x; 1.13: the public `dist.ProcessGroupGloo`) | 2.15 |
| `c10d._abort_process_group`; `pg._get_backend`, NCCL backend `abort`/`_shutdown` | aborting NCCL communicators at a re-form | 2.15 (untested: no GPU) |
| `torch._C._distributed_c10d._register_process_group`, `ProcessGroup._set_group_name`, a Python subclass of `dist.ProcessGroup` | the job's forwarding groups of a sharded layout, resolvable by name like torch's own | 2.15 |
| `distributed_c10d._world.pg_map`, `.pg_group_ranks`, `.pg_names` | entering the forwarding groups in torch's group tables each generation (c10d's exception logger looks a failed collective's group up there) | 2.15 |
| `DeviceMesh(..., _init_backend=False, _rank=r)`, `mesh._dim_group_names`, `mesh._pg_registry` | `job.device_mesh()`: a mesh over the forwarding groups (public `DeviceMesh.from_group` needs the default group, which a spare has not formed yet) | 2.15 |
| `FSDPModule._get_fsdp_state()`, `state._is_root`, `state._fsdp_param_groups`, `group._all_gather_result` | finding the root `fully_shard` module for the public `reset_iter_state()` after a failed step, and dropping a failed all-gather it would wait on | 2.15 |
| DDP attributes `module`, `process_group`, `find_unused_parameters`, `gradient_as_bucket_view`, `static_graph`, `bucket_bytes_cap`, `parameters_to_ignore`, `will_sync_module_buffers()` (undocumented, no underscore) | checking a kept DDP wrapper's options | 1.13, 2.15 |
"""
from __future__ import annotations

import datetime
import logging
import os
import re
import types
from typing import Any, Callable, List, Sequence, Tuple

import torch
import torch.distributed as dist

log = logging.getLogger("lockstep_train")

CHECKED = ((1, 13), (2, 15))          # the versions this module was checked on (both ends)
_warned = set()


class UnsupportedTorch(RuntimeError):
    """This torch lacks a private API the library needs, or is outside the checked range."""


def torch_version(v: str = None) -> Tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", v or torch.__version__)
    if not m:
        raise UnsupportedTorch("lockstep_train: cannot parse torch version %r" % (v or torch.__version__))
    return int(m.group(1)), int(m.group(2))


def require(what: str, present: bool = True, version: str = None) -> None:
    """Fail with a clear message unless torch is in the checked range and has `what`."""
    v = torch_version(version)
    if not CHECKED[0] <= v <= CHECKED[1]:
        msg = ("lockstep_train needs %s, a private torch API checked on torch %s to %s only; this is "
               "torch %s. Use a torch in that range, or set LOCKSTEP_UNCHECKED_TORCH=1 to try anyway"
               % (what, "%d.%d" % CHECKED[0], "%d.%d" % CHECKED[1], version or torch.__version__))
        if os.environ.get("LOCKSTEP_UNCHECKED_TORCH") != "1":
            raise UnsupportedTorch(msg)
        if what not in _warned:
            _warned.add(what)
            log.warning("lockstep: %s (LOCKSTEP_UNCHECKED_TORCH=1: trying anyway)", msg)
    if not present:
        raise UnsupportedTorch("lockstep_train needs %s, which torch %s does not have (checked on %s and %s)"
                               % (what, version or torch.__version__, "%d.%d" % CHECKED[0], "%d.%d" % CHECKED[1]))


# -- DDP's bucket layout -------------------------------------------------------------------
def first_bucket_bytes() -> int:
    require("dist._DEFAULT_FIRST_BUCKET_BYTES", hasattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES"))
    return dist._DEFAULT_FIRST_BUCKET_BYTES


def compute_bucket_assignment_by_size(tensors: Sequence[torch.Tensor], limits: Sequence[int],
                                      sparse: Sequence[bool], order: Sequence[int] = None) -> List[List[int]]:
    require("dist._compute_bucket_assignment_by_size", hasattr(dist, "_compute_bucket_assignment_by_size"))
    if order is None:
        buckets, _ = dist._compute_bucket_assignment_by_size(list(tensors), list(limits), list(sparse))
    else:
        buckets, _ = dist._compute_bucket_assignment_by_size(list(tensors), list(limits), list(sparse),
                                                             list(order))
    return [list(b) for b in buckets]


# -- gradient hooks before torch 2.1 --------------------------------------------------------
def accumulate_grad_node(p: torch.Tensor) -> Any:
    """p's AccumulateGrad autograd node (its post hooks run once p.grad was accumulated)."""
    fn = p.expand_as(p).grad_fn
    require("the AccumulateGrad node (grad_fn.next_functions)", fn is not None and bool(fn.next_functions))
    return fn.next_functions[0][0]


# -- "the step is committed" -----------------------------------------------------------------
def wrap_optimizer_step(optimizer: torch.optim.Optimizer, on_step: Callable[[], None]) -> None:
    """torch < 2.0 has no optimizer step hooks: replace the instance's step by a bound
    method that calls on_step() after the real step returned (LR schedulers wrap it in
    turn, so it must stay a bound method)."""
    require("optimizer.step replaced on the instance (no register_step_post_hook before torch 2.0)")
    if getattr(optimizer.step, "_lockstep_wrapped", False):
        return
    inner = optimizer.step

    def step(opt, *args, **kwargs):
        out = inner(*args, **kwargs)
        on_step()
        return out
    setattr(step, "_lockstep_wrapped", True)
    setattr(optimizer, "step", types.MethodType(step, optimizer))


# -- the stand-in group a kept DDP wrapper is built on ---------------------------------------
def local_process_group(timeout: datetime.timedelta) -> Any:
    """A process group of size 1 (rank 0) on a private in-memory store, usable by DDP's
    constructor and reducer: its collectives involve this process only. Not registered
    with torch.distributed (destroy_process_group() never touches it)."""
    store = dist.HashStore()
    if torch_version() < (2, 0):
        return dist.ProcessGroupGloo(store, 0, 1, timeout)      # a ProcessGroup in torch 1.x (public)
    PG = dist.ProcessGroup
    require("dist.ProcessGroup(store, rank, size)._register_backend/_set_default_backend",
            hasattr(PG, "_register_backend") and hasattr(PG, "_set_default_backend"))
    pg = PG(dist.PrefixStore("lockstep-local/", store), 0, 1)
    backend = dist.ProcessGroupGloo(dist.PrefixStore("cpu/", store), 0, 1, timeout)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for d in devices:
        pg._register_backend(torch.device(d), PG.BackendType.GLOO, backend)
    pg._set_default_backend(PG.BackendType.GLOO)
    return pg


# -- sharded layouts (FSDP2 / HSDP, torch 2.x) ------------------------------------------------
def register_process_group(name: str, pg: Any) -> None:
    """Name `pg` and register it with c10d, so that DTensor and DeviceMesh resolve it
    by name (torch registers its own groups the same way)."""
    try:
        from torch._C._distributed_c10d import _register_process_group
    except ImportError:
        _register_process_group = None
    require("torch._C._distributed_c10d._register_process_group, ProcessGroup._set_group_name",
            _register_process_group is not None and hasattr(dist.ProcessGroup, "_set_group_name"))
    pg._set_group_name(name)
    _register_process_group(name, pg)


def world_register(pg: Any, ranks: Sequence[int], name: str) -> None:
    """Enter `pg` (global ranks `ranks`) in torch.distributed's group tables, as
    dist.new_group does, so that dist.get_backend/get_rank(group) work on it (c10d's
    exception logger calls them when a collective fails). Undone by world_unregister;
    destroy_process_group() clears the tables too."""
    from torch.distributed import distributed_c10d as c10d
    w = getattr(c10d, "_world", None)
    require("torch.distributed.distributed_c10d._world.pg_map/pg_group_ranks/pg_names",
            w is not None and all(hasattr(w, a) for a in ("pg_map", "pg_group_ranks", "pg_names")))
    w.pg_map[pg] = ("gloo", None)
    w.pg_group_ranks[pg] = {g: i for i, g in enumerate(ranks)}
    w.pg_names[pg] = name


def world_unregister(pg: Any) -> None:
    from torch.distributed import distributed_c10d as c10d
    w = c10d._world
    for table in (w.pg_map, w.pg_group_ranks, w.pg_names):
        table.pop(pg, None)


def device_mesh(device_type: str, mesh: torch.Tensor, names: Sequence[str], groups: Sequence[Any],
                rank: int) -> Any:
    """A DeviceMesh whose dimension i is served by groups[i] (registered), for global
    rank `rank`, built without a default process group."""
    from torch.distributed.device_mesh import DeviceMesh
    import inspect
    params = inspect.signature(DeviceMesh.__init__).parameters
    require("DeviceMesh(_init_backend=, _rank=), DeviceMesh._dim_group_names/_pg_registry",
            "_init_backend" in params and "_rank" in params)
    m = DeviceMesh(device_type, mesh, mesh_dim_names=tuple(names), _init_backend=False, _rank=rank)
    m._dim_group_names = [g.group_name for g in groups]
    for g in groups:
        m._pg_registry[g.group_name] = g
    return m


def fsdp_states(model: torch.nn.Module) -> List[Any]:
    """The FSDP2 states of every fully_shard module in `model`."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return []
    out = []
    for m in model.modules():
        if isinstance(m, FSDPModule):
            require("FSDPModule._get_fsdp_state", hasattr(m, "_get_fsdp_state"))
            out.append(m._get_fsdp_state())
    return out


def reset_fsdp(model: torch.nn.Module) -> None:
    """After a step failed inside a collective: put the fully_shard modules back in the
    state between two iterations with FSDP2's own public `FSDPModule.reset_iter_state()`
    (torch 2.15) on the root. A pending all-gather of the failed group whose wait raises
    is dropped (private `_fsdp_param_group._all_gather_result`) and the reset retried."""
    roots = [m for m in model.modules() if hasattr(m, "reset_iter_state")
             and getattr(m._get_fsdp_state(), "_is_root", None) is not False]
    require("FSDPModule.reset_iter_state (torch 2.15)", bool(roots) or not fsdp_states(model))
    for root in roots[:1]:
        try:
            root.reset_iter_state()
        except AttributeError as e:
            if "reduce_scatter_states" not in str(e):
                raise
            # torch 2.15: a root that never ran a backward has no reduce-scatter states yet
            # ("'FSDPCommContext' object has no attribute 'reduce_scatter_states'"): a
            # step that failed before its first backward left nothing to reset.
            log.info("lockstep: FSDP reset before the first backward: %s; nothing to reset", e)
        except RuntimeError as e:
            log.info("lockstep: FSDP reset waited on a failed collective (%s); dropping it", str(e).splitlines()[0])
            for st in fsdp_states(model):
                for pg in getattr(st, "_fsdp_param_groups", []) or []:
                    pg._all_gather_result = None
            root.reset_iter_state()


# -- NCCL abort ------------------------------------------------------------------------------
def abort_nccl() -> None:
    """Abort the default group's NCCL communicators (torch 2.x APIs, whichever exists)."""
    c10d = dist.distributed_c10d
    try:
        if hasattr(c10d, "_abort_process_group"):          # torch >= 2.4
            c10d._abort_process_group()
            return
        pg = dist.group.WORLD
        backend = pg._get_backend(torch.device("cuda")) if hasattr(pg, "_get_backend") else pg
        abort = getattr(backend, "abort", None) or getattr(backend, "_shutdown", None)
        if abort is not None:
            abort()
    except Exception as e:
        log.warning("lockstep: aborting the NCCL group failed: %r", e)


# -- a kept DistributedDataParallel wrapper ----------------------------------------------------
DDP_ATTRIBUTES = ("module", "process_group", "find_unused_parameters", "gradient_as_bucket_view",
                  "bucket_bytes_cap")


def ddp_options(ddp: Any) -> dict:
    """The options of a DDP wrapper the library checks (undocumented attributes)."""
    missing = [a for a in DDP_ATTRIBUTES if not hasattr(ddp, a)]
    require("DistributedDataParallel attributes %s" % ", ".join(DDP_ATTRIBUTES), not missing)
    return {"module": ddp.module, "process_group": ddp.process_group,
            "find_unused_parameters": bool(ddp.find_unused_parameters),
            "gradient_as_bucket_view": bool(ddp.gradient_as_bucket_view),
            "static_graph": bool(getattr(ddp, "static_graph", False)),
            "bucket_bytes_cap": int(ddp.bucket_bytes_cap),
            "parameters_to_ignore": list(getattr(ddp, "parameters_to_ignore", None) or [])}


def ddp_will_sync_buffers(ddp: Any) -> bool:
    """Whether DDP's forward broadcasts the module's buffers from rank 0 this time."""
    f = getattr(ddp, "will_sync_module_buffers", None)
    require("DistributedDataParallel.will_sync_module_buffers()", f is not None)
    return bool(f())
