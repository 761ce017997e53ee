"""Per-step reseeding: RNG streams depend only on (base seed, step, rank).

Pure apart from seeding the global generators of torch, random and (if already
imported) numpy. Not thread-safe: call it from the training thread.
"""
from __future__ import annotations

import hashlib
import random
import sys


def derive_seed(base: int, step: int, rank: int) -> int:
    """A 63-bit seed from (base, step, rank); the same on every machine and version."""
    h = hashlib.sha256(("lockstep/%d/%d/%d" % (base, step, rank)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def seed(step: int, rank: int, base: int = 0) -> int:
    """Reseed torch (CPU and CUDA), random and numpy (if imported) for (base, step, rank).
    Returns the derived seed."""
    s = derive_seed(base, step, rank)
    random.seed(s)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(s % (1 << 32))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(s)
    return s
