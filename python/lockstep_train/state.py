"""The training state a spare receives: parameters, buffers, optimizer state, RNG and
extra state (docs/migration.md), as flat tensors plus one pickled "meta" record.

TrackedState is used from the training thread only (not thread-safe). The transfer
itself (broadcast) lives in sync.py; everything here is local and unit-tested.
"""
import pickle
import random
import sys

import torch


def _optimizer_params(optimizer):
    return [p for g in optimizer.param_groups for p in g["params"]]


class TrackedState:
    """What job.track() registered: a model, an optimizer and optional extra state.

    extra: None, an object with state_dict()/load_state_dict() (a LR scheduler, a data
    loader position), or a dict of picklable values (replaced in place on a receiver).
    """

    def __init__(self, model, optimizer, extra=None):
        self.model = model
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
    def skeleton(self):
        """Structure of the optimizer state: per optimizer parameter (in param_groups
        order) {key: ("tensor", shape, dtype, on_param_device) | ("value", v)} or None."""
        if self.optimizer is None:
            return []
        out = []
        for p in _optimizer_params(self.optimizer):
            st = self.optimizer.state.get(p)
            if not st:
                out.append(None)
                continue
            d = {}
            for k, v in st.items():
                if torch.is_tensor(v):
                    d[k] = ("tensor", tuple(v.shape), str(v.dtype).replace("torch.", ""),
                            v.device == p.device)
                else:
                    d[k] = ("value", v)
            out.append(d)
        return out

    def materialise(self, skeleton):
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
                    shape, dtype, on_param = rest
                    st[k] = torch.zeros(shape, dtype=getattr(torch, dtype),
                                        device=p.device if on_param else "cpu")
            self.optimizer.state[p] = st

    def optimizer_tensors(self):
        if self.optimizer is None:
            return []
        out = []
        for p in _optimizer_params(self.optimizer):
            st = self.optimizer.state.get(p) or {}
            out += [v for _, v in sorted(st.items()) if torch.is_tensor(v)]
        return out

    def sync_tensors(self):
        """Every tensor that is sent, in a fixed order (the same on every member once the
        optimizer state was materialised from the source's skeleton)."""
        return self.params + self.buffers + self.optimizer_tensors()

    # -- meta (small, pickled) -------------------------------------------------------------
    def meta(self, step, extra_fields=None):
        groups = []
        if self.optimizer is not None:
            for g in self.optimizer.param_groups:
                groups.append({k: v for k, v in g.items() if k != "params"})
        m = {"step": step, "skeleton": self.skeleton(), "param_groups": groups,
             "rng": capture_rng(), "extra": self._extra_state()}
        m.update(extra_fields or {})
        return m

    def apply_meta_before(self, meta):
        """On a receiver, before the tensors arrive: optimizer structure and hyperparameters."""
        self.materialise(meta["skeleton"])
        if self.optimizer is not None:
            if len(meta["param_groups"]) != len(self.optimizer.param_groups):
                raise ValueError("state sync: the source's optimizer has %d param groups, this one %d"
                                 % (len(meta["param_groups"]), len(self.optimizer.param_groups)))
            for g, src in zip(self.optimizer.param_groups, meta["param_groups"]):
                g.update(src)

    def apply_meta_after(self, meta):
        """On a receiver, after the tensors arrived: RNG and extra state."""
        restore_rng(meta["rng"])
        self._load_extra(meta["extra"])

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
