"""The training state a spare receives: parameters, buffers, optimizer state, RNG and
extra state (docs/migration.md), as flat tensors plus one pickled "meta" record.

TrackedState is used from the training thread only (not thread-safe). The transfer
itself (broadcasts, digests, the vote) lives in job.py; everything here is local and
unit-tested. A receiver's live state is changed only by apply_received(), after every
bucket arrived and was verified.
"""
from __future__ import annotations

import pickle
import random
import sys

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

# A tensor the source sends, as a receiver allocates it: (shape, dtype, device).
Layout = List[Tuple[Tuple[int, ...], torch.dtype, torch.device]]


def _optimizer_params(optimizer):
    return [p for g in optimizer.param_groups for p in g["params"]]


class TrackedState:
    """What job.track() registered: a model, an optimizer and optional extra state.

    extra: None, an object with state_dict()/load_state_dict() (a LR scheduler, a data
    loader position), or a dict of picklable values (replaced in place on a receiver).
    """

    def __init__(self, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer],
                 extra: Any = None, local: Optional[Callable[[torch.Tensor], torch.Tensor]] = None) -> None:
        # local: for a sharded model (DTensor parameters), the function that gives a
        # tensor's local shard; what is sent, compared and received is this rank's shard.
        self.model = model
        self.local = local or (lambda t: t)
        self.sharded = local is not None
        self.optimizer = optimizer
        self.extra = extra
        if extra is not None and not isinstance(extra, dict) and not (
                hasattr(extra, "state_dict") and hasattr(extra, "load_state_dict")):
            raise TypeError("track(extra=...) must be None, a dict, or have state_dict()/"
                            "load_state_dict() (got %s)" % type(extra).__name__)
        self.params = list(model.parameters())
        self.buffers = list(model.buffers())
        if optimizer is not None:
            known = {id(p) for p in self.params}
            stray = [p for p in _optimizer_params(optimizer) if id(p) not in known]
            if stray:
                raise ValueError("track(): the optimizer holds %d tensors that are not parameters "
                                 "of the model; pass the model whose parameters it optimises"
                                 % len(stray))

    # -- optimizer state ------------------------------------------------------------------
    def skeleton(self) -> List[Optional[Dict[str, tuple]]]:
        """Structure of the optimizer state: per optimizer parameter (in param_groups
        order) {key: ("tensor", shape, dtype, on_param_device) | ("value", v)} or None."""
        if self.optimizer is None:
            return []
        out: List[Optional[Dict[str, tuple]]] = []
        for p in _optimizer_params(self.optimizer):
            st = self.optimizer.state.get(p)
            if not st:
                out.append(None)
                continue
            d: Dict[str, tuple] = {}
            for k, v in st.items():
                if torch.is_tensor(v):
                    lv = self.local(v)
                    d[k] = ("tensor", tuple(lv.shape), str(v.dtype).replace("torch.", ""),
                            v.device == p.device, lv is not v)   # last: sharded like the parameter
                else:
                    d[k] = ("value", v)
            out.append(d)
        return out

    def materialise(self, skeleton: Sequence[Optional[Dict[str, tuple]]]) -> None:
        """Make this optimizer's state match `skeleton` (zeros where tensors go), so
        that a fresh optimizer (Adam creates its state lazily) can receive into it."""
        if self.optimizer is None:
            if skeleton:
                raise ValueError("state sync: the source has optimizer state but no optimizer "
                                 "was passed to track()")
            return
        ps = _optimizer_params(self.optimizer)
        if len(ps) != len(skeleton):
            raise ValueError("state sync: the source's optimizer has %d parameters, this one %d: "
                             "every member must build the same model and optimizer"
                             % (len(skeleton), len(ps)))
        for p, sk in zip(ps, skeleton):
            if sk is None:
                self.optimizer.state.pop(p, None)
                continue
            st = {}
            for k, (kind, *rest) in sk.items():
                if kind == "value":
                    st[k] = rest[0]
                else:
                    shape, dtype, on_param = rest[:3]
                    if len(rest) > 3 and rest[3]:     # a DTensor sharded like its parameter
                        st[k] = torch.zeros_like(p, dtype=getattr(torch, dtype))
                    else:
                        st[k] = torch.zeros(shape, dtype=getattr(torch, dtype),
                                            device=p.device if on_param else "cpu")
            self.optimizer.state[p] = st

    def optimizer_tensors(self) -> List[torch.Tensor]:
        if self.optimizer is None:
            return []
        out = []
        for p in _optimizer_params(self.optimizer):
            st = self.optimizer.state.get(p) or {}
            out += [self.local(v) for _, v in sorted(st.items()) if torch.is_tensor(v)]
        return out

    def local_params(self) -> List[torch.Tensor]:
        return [self.local(p) for p in self.params]

    def local_buffers(self) -> List[torch.Tensor]:
        return [self.local(b) for b in self.buffers]

    def sync_tensors(self) -> List[torch.Tensor]:
        """Every tensor that is sent, in a fixed order (the same on every member once the
        optimizer state was materialised from the source's skeleton)."""
        return self.local_params() + self.local_buffers() + self.optimizer_tensors()

    # -- meta (small, pickled) -------------------------------------------------------------
    def meta(self, step: int, extra_fields: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        groups = []
        if self.optimizer is not None:
            for g in self.optimizer.param_groups:
                groups.append({k: v for k, v in g.items() if k != "params"})
        m = {"step": step, "skeleton": self.skeleton(), "param_groups": groups,
             "rng": capture_rng(), "extra": self._extra_state()}
        m.update(extra_fields or {})
        return m

    def receive_layout(self, meta: Dict[str, Any]) -> Layout:
        """[(shape, dtype, device)] of every tensor the source sends, in sync_tensors()
        order, from the source's meta record. Checks that this member can take the state
        and changes nothing: the live state is touched only by apply_received()."""
        skeleton = meta["skeleton"]
        if self.optimizer is None:
            if any(sk is not None for sk in skeleton):
                raise ValueError("state sync: the source has optimizer state but no optimizer "
                                 "was passed to track()")
            ps = []
        else:
            ps = _optimizer_params(self.optimizer)
            if len(ps) != len(skeleton):
                raise ValueError("state sync: the source's optimizer has %d parameters, this one %d: "
                                 "every member must build the same model and optimizer"
                                 % (len(skeleton), len(ps)))
            if len(meta["param_groups"]) != len(self.optimizer.param_groups):
                raise ValueError("state sync: the source's optimizer has %d param groups, this one %d"
                                 % (len(meta["param_groups"]), len(self.optimizer.param_groups)))
        out = [(tuple(t.shape), t.dtype, t.device) for t in self.local_params() + self.local_buffers()]
        for p, sk in zip(ps, skeleton):
            for _, (kind, *rest) in sorted((sk or {}).items()):
                if kind == "tensor":
                    shape, dtype, on_param = rest[:3]
                    out.append((tuple(shape), getattr(torch, dtype), p.device if on_param else torch.device("cpu")))
        return out

    def apply_received(self, meta: Dict[str, Any], flats: Sequence[torch.Tensor]) -> None:
        """On a receiver, once every bucket arrived and was verified: optimizer
        structure and hyperparameters, the tensors, RNG and extra state."""
        self.materialise(meta["skeleton"])
        if self.optimizer is not None:
            for g, src in zip(self.optimizer.param_groups, meta["param_groups"]):
                g.update(src)
        unflatten_into(self.sync_tensors(), flats)
        restore_rng(meta["rng"])
        self._load_extra(meta["extra"])

    def apply_snapshot(self, meta: Dict[str, Any], packed: torch.Tensor) -> None:
        """Load a snapshot (meta(), pack(sync_tensors())) of this rank's state, its own or
        one its buddy mirrored: optimizer structure and hyperparameters, the tensors, RNG
        and extra state (the buddy mirror, job.py)."""
        self.materialise(meta["skeleton"])
        if self.optimizer is not None:
            for g, src in zip(self.optimizer.param_groups, meta["param_groups"]):
                g.update(src)
        unpack_into(self.sync_tensors(), packed)
        restore_rng(meta["rng"])
        self._load_extra(meta["extra"])

    def fingerprint(self) -> Tuple[int, int]:
        """(s1, s2) over the parameters and the optimizer state, each in place (no copy
        of the state), weighted by its position: replicas of the same step have the same.
        Not the buffers: under DDP they legitimately differ between ranks (BatchNorm's
        running statistics are updated from each rank's own batch after rank 0's are
        broadcast), so they would make healthy replicas look diverged."""
        s1 = s2 = 0
        for i, t in enumerate(self.local_params() + self.optimizer_tensors()):
            a, b = fingerprint(t)
            s1, s2 = _wrap(s1 + (2 * i + 1) * a), _wrap(s2 + (2 * i + 1) * b)
        return s1, s2

    def _extra_state(self):
        if self.extra is None:
            return None
        if isinstance(self.extra, dict):
            return dict(self.extra)
        return self.extra.state_dict()

    def _load_extra(self, value):
        if self.extra is None or value is None:
            return
        if isinstance(self.extra, dict):
            self.extra.clear()
            self.extra.update(value)
        else:
            self.extra.load_state_dict(value)


def capture_rng():
    st = {"torch": torch.get_rng_state(), "random": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        st["cuda"] = torch.cuda.get_rng_state_all()
    np = sys.modules.get("numpy")
    if np is not None:
        st["numpy"] = np.random.get_state()
    return st


def restore_rng(st):
    torch.set_rng_state(st["torch"])
    random.setstate(st["random"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])
    np = sys.modules.get("numpy")
    if np is not None and "numpy" in st:
        np.random.set_state(st["numpy"])


def encode_meta(meta):
    return pickle.dumps(meta, protocol=pickle.HIGHEST_PROTOCOL)


def decode_meta(data):
    return pickle.loads(data)


def _wrap(v):
    """v as a signed 64-bit integer (two's complement), as torch's int64 sums wrap."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


_WEIGHTS: Dict[Any, torch.Tensor] = {}      # device -> odd int64 weights 1, 3, 5, ... (FP_CHUNK of them)
FP_CHUNK = 1 << 20


def fingerprint(t):
    """(s1, s2): two 64-bit sums over the bytes of a contiguous tensor read as int64
    words (zero-padded): s1 the plain sum, s2 the sum weighted by odd position weights.
    Any change of one word changes both; a swap of two words changes s2. Exact and
    deterministic on every device (integer sums wrap), so a source and a receiver, or
    two replicas, compare them bit for bit. Not a cryptographic hash: it detects
    corruption and bugs, not an adversary."""
    b = t.detach().contiguous().reshape(-1).view(torch.uint8)
    pad = (-b.numel()) % 8
    if pad:
        b = torch.cat([b, torch.zeros(pad, dtype=torch.uint8, device=b.device)])
    words = b.view(torch.int64)
    w = _WEIGHTS.get(words.device)
    if w is None:
        w = _WEIGHTS[words.device] = torch.arange(FP_CHUNK, dtype=torch.int64, device=words.device) * 2 + 1
    s1 = int(words.sum())
    s2 = 0
    for k, off in enumerate(range(0, words.numel(), FP_CHUNK)):
        c = words[off:off + FP_CHUNK]
        s2 = _wrap(s2 + (2 * k + 1) * int((c * w[:c.numel()]).sum()))
    return s1, s2


def allocate(layout, device=None):
    """Flat receive buffers for a receive_layout(), grouped as flatten() groups the
    source's tensors (one per dtype, dtypes in first-seen order)."""
    sizes = {}
    for shape, dtype, dev in layout:
        n = 1
        for d in shape:
            n *= d
        sizes.setdefault(dtype, [0, device if device is not None else dev])[0] += n
    return [(dtype, torch.empty(n, dtype=dtype, device=dev)) for dtype, (n, dev) in sizes.items()]


def buckets(flats, bucket_bytes):
    """The flat buffers cut into views of at most bucket_bytes (at least one element),
    in order: what the transfer sends one at a time."""
    out = []
    for _, flat in flats:
        n = max(1, bucket_bytes // flat.element_size())
        out += list(flat.split(n)) if flat.numel() else [flat]
    return out


def flatten(tensors, device=None):
    """[(dtype, flat)] with one flat buffer per dtype, dtypes in first-seen order."""
    groups = {}
    for t in tensors:
        groups.setdefault(t.dtype, []).append(t)
    out = []
    for dtype, ts in groups.items():
        dev = device if device is not None else ts[0].device
        out.append((dtype, torch.cat([t.detach().reshape(-1).to(dev) for t in ts])))
    return out


def unflatten_into(tensors, flats):
    """Copy flat buffers (from flatten() of tensors of the same shapes) back into tensors."""
    bydtype = dict(flats)
    offsets = {d: 0 for d in bydtype}
    with torch.no_grad():
        for t in tensors:
            flat = bydtype[t.dtype]
            o = offsets[t.dtype]
            n = t.numel()
            t.copy_(flat[o:o + n].view(t.shape))
            offsets[t.dtype] = o + n
    for d, flat in bydtype.items():
        if offsets[d] != flat.numel():
            raise ValueError("state sync: %s buffer has %d elements, the tensors %d"
                             % (d, flat.numel(), offsets[d]))


def _padded(nbytes):
    return (nbytes + 7) // 8 * 8


def pack(tensors, device="cpu"):
    """One uint8 buffer on `device` (a copy) holding every tensor's bytes in order, each
    padded to 8 bytes (so that every tensor starts aligned for unpack_into's views)."""
    parts = []
    for t in tensors:
        b = t.detach().reshape(-1).contiguous().to(device).view(torch.uint8)
        parts.append(b)
        pad = _padded(b.numel()) - b.numel()
        if pad:
            parts.append(torch.zeros(pad, dtype=torch.uint8, device=device))
    if not parts:
        return torch.zeros(0, dtype=torch.uint8, device=device)
    return torch.cat(parts)


def unpack_into(tensors, packed):
    """Copy a pack() of tensors of the same shapes and dtypes back into `tensors`."""
    o = 0
    with torch.no_grad():
        for t in tensors:
            nb = t.numel() * t.element_size()
            if o + nb > packed.numel():
                raise ValueError("snapshot: %d bytes, the tensors need more" % packed.numel())
            t.copy_(packed[o:o + nb].view(t.dtype).view(t.shape))
            o += _padded(nb)
    if o != packed.numel():
        raise ValueError("snapshot: %d bytes, the tensors %d" % (packed.numel(), o))
