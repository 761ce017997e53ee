"""The coordinator protocol as plain values (docs/migration.md): plans, heartbeat replies.

Pure: no I/O, no clock, no torch. Parsing never raises anything but ProtocolError, whose
message says which field was wrong.
"""
from __future__ import annotations

import dataclasses
import os
import secrets
import socket
from typing import Any, List, Mapping, Optional

ACTIONS = ("wait", "train", "exit")
DIRECTIVES = ("none", "pause", "exit", "abort")


class ProtocolError(ValueError):
    """A coordinator reply that does not follow docs/migration.md."""


@dataclasses.dataclass(frozen=True)
class Store:
    host: str
    port: int
    prefix: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """What GET /v1/plan told this member to do."""
    generation: int
    action: str                      # wait | train | exit
    reason: str = ""
    rank: Optional[int] = None
    world_size: Optional[int] = None
    members: tuple = ()
    store: Optional[Store] = None
    src_rank: int = 0
    resume_step: int = 0


@dataclasses.dataclass(frozen=True)
class Directive:
    """The directive part of a heartbeat reply."""
    generation: int
    kind: str = "none"               # none | pause | exit | abort (the generation ended)
    pause_at_step: Optional[int] = None
    reason: str = ""


def _int(obj, key, what, minimum=0, required=True):
    if key not in obj or obj[key] is None:
        if required:
            raise ProtocolError("%s: field %r is missing" % (what, key))
        return None
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ProtocolError("%s: field %r must be an integer >= %d (got %r)" % (what, key, minimum, v))
    return v


def parse_plan(obj: Any) -> Plan:
    """A plan from the decoded JSON of GET /v1/plan."""
    if not isinstance(obj, dict):
        raise ProtocolError("plan: expected a JSON object (got %s)" % type(obj).__name__)
    action = obj.get("action")
    # A member not yet part of any generation may be told generation -1 while it waits.
    gen = _int(obj, "generation", "plan", minimum=0 if action == "train" else -1)
    if action not in ACTIONS:
        raise ProtocolError("plan: action must be one of %s (got %r)" % ("|".join(ACTIONS), action))
    reason = obj.get("reason") or ""
    if not isinstance(reason, str):
        raise ProtocolError("plan: reason must be a string (got %r)" % (reason,))
    if action != "train":
        return Plan(generation=gen, action=action, reason=reason)
    world = _int(obj, "world_size", "plan", minimum=1)
    rank = _int(obj, "rank", "plan")
    if rank >= world:
        raise ProtocolError("plan: rank %d is not below world_size %d" % (rank, world))
    src = _int(obj, "src_rank", "plan")
    if src >= world:
        raise ProtocolError("plan: src_rank %d is not below world_size %d" % (src, world))
    resume = _int(obj, "resume_step", "plan")
    st = obj.get("store")
    if not isinstance(st, dict):
        raise ProtocolError("plan: store must be an object {host, port, prefix} (got %r)" % (st,))
    host, prefix = st.get("host"), st.get("prefix")
    if not isinstance(host, str) or not host:
        raise ProtocolError("plan: store.host must be a non-empty string (got %r)" % (host,))
    if not isinstance(prefix, str):
        raise ProtocolError("plan: store.prefix must be a string (got %r)" % (prefix,))
    port = _int(st, "port", "plan.store", minimum=1)
    if port > 65535:
        raise ProtocolError("plan.store: port must be <= 65535 (got %d)" % port)
    members = obj.get("members") or []
    if not isinstance(members, list):
        raise ProtocolError("plan: members must be a list (got %r)" % (members,))
    return Plan(generation=gen, action=action, reason=reason, rank=rank, world_size=world,
                members=tuple(members), store=Store(host, port, prefix), src_rank=src,
                resume_step=resume)


def parse_directive(obj: Any) -> Directive:
    """A directive from the decoded JSON reply of POST /v1/heartbeat."""
    if not isinstance(obj, dict):
        raise ProtocolError("heartbeat reply: expected a JSON object (got %s)" % type(obj).__name__)
    gen = _int(obj, "generation", "heartbeat reply", minimum=-1)   # -1: before generation 0
    kind = obj.get("directive", "none") or "none"
    if kind not in DIRECTIVES:
        raise ProtocolError("heartbeat reply: directive must be one of %s (got %r)"
                            % ("|".join(DIRECTIVES), kind))
    at = None
    if kind == "pause":
        at = _int(obj, "pause_at_step", "heartbeat reply")
    reason = obj.get("reason") or ""
    if not isinstance(reason, str):
        raise ProtocolError("heartbeat reply: reason must be a string (got %r)" % (reason,))
    return Directive(generation=gen, kind=kind, pause_at_step=at, reason=reason)


def new_member_id(host: Optional[str] = None, pid: Optional[int] = None) -> str:
    """`<host>-<pid>-<8 hex>` (docs/migration.md "member")."""
    host = host if host is not None else socket.gethostname()
    pid = pid if pid is not None else os.getpid()
    return "%s-%d-%s" % (host, pid, secrets.token_hex(4))


def register_body(member: str, role: str, host: str, store_port: int, pid: int,
                  rank: Optional[int] = None, env: Mapping[str, str] = os.environ) -> dict:
    """The body of POST /v1/register. In Kubernetes the member's pod, from the
    downward API (LOCKSTEP_POD_NAME, LOCKSTEP_POD_UID), goes with it so that the
    coordinator can check and fence that pod; absent elsewhere."""
    body = {"member": member, "role": role, "host": host, "store_port": store_port, "pid": pid}
    if rank is not None:
        body["rank"] = rank
    pod_name = env.get("LOCKSTEP_POD_NAME") or ""
    if pod_name:
        body["pod_name"] = pod_name
        pod_uid = env.get("LOCKSTEP_POD_UID") or ""
        if pod_uid:
            body["pod_uid"] = pod_uid
    return body


def registered_role(reply, asked: str) -> str:
    """The role the coordinator registered this member in (POST /v1/register's reply
    "role"): "spare" for a process that asked for a rank a live member holds (it was
    restarted after a spare took its rank over). A coordinator that does not say: `asked`."""
    role = reply.get("role") if isinstance(reply, dict) else None
    return role if role in ("rank", "spare") else asked


@dataclasses.dataclass(frozen=True)
class Settings:
    """join()'s inputs after environment and arguments are merged."""
    coordinator: str
    role: str
    rank: Optional[int]
    world_size: Optional[int]


def settings_from(env: Mapping[str, str], coordinator: Optional[str] = None, role: Optional[str] = None,
                  rank: Optional[int] = None, world_size: Optional[int] = None) -> Settings:
    """Merge LOCKSTEP_* environment variables with join()'s arguments (arguments win)."""
    coordinator = coordinator or env.get("LOCKSTEP_COORDINATOR")
    if not coordinator:
        raise ValueError("lockstep_train.join: no coordinator: set LOCKSTEP_COORDINATOR="
                         "http://HOST:PORT or pass coordinator=")
    if "://" not in coordinator:
        coordinator = "http://" + coordinator
    coordinator = coordinator.rstrip("/")
    role = role or env.get("LOCKSTEP_ROLE") or "rank"
    if role not in ("rank", "spare"):
        raise ValueError("lockstep_train.join: role must be 'rank' or 'spare' (got %r): "
                         "set LOCKSTEP_ROLE or pass role=" % (role,))

    def as_int(v, name):
        if v is None or v == "":
            return None
        try:
            return int(v)
        except (TypeError, ValueError):
            raise ValueError("lockstep_train.join: %s must be an integer (got %r)" % (name, v))

    rank = as_int(rank if rank is not None else env.get("LOCKSTEP_RANK"), "LOCKSTEP_RANK")
    world_size = as_int(world_size if world_size is not None else env.get("LOCKSTEP_WORLD_SIZE"),
                        "LOCKSTEP_WORLD_SIZE")
    if role == "rank" and rank is None:
        raise ValueError("lockstep_train.join: role 'rank' needs a rank: set LOCKSTEP_RANK or pass rank=")
    if role == "spare":
        rank = None
    if rank is not None and rank < 0:
        raise ValueError("lockstep_train.join: rank must be >= 0 (got %d)" % rank)
    if world_size is not None and rank is not None and rank >= world_size:
        raise ValueError("lockstep_train.join: rank %d is not below world size %d" % (rank, world_size))
    return Settings(coordinator, role, rank, world_size)
