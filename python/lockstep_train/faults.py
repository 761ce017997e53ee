"""Fault injection for the project's own tests: kill or stop this process at a chosen
point of a recovery (docs/migration.md "Fault injection"). Off unless the test-only
variable LOCKSTEP_TEST_FAULT is set in the process's environment; then each entry

    PHASE[#INDEX][@GENERATION][:ACTION]        entries separated by ","

fires the first time this process reaches PHASE (with that bucket INDEX, in that
GENERATION when given). ACTION: kill (SIGKILL itself, the default: a crash), stop
(SIGSTOP itself: a hang its heartbeat thread cannot hide), corrupt (adds 1e-3 to the
first parameter: silent data corruption, for the replica fingerprint check).

Phases, in the order a recovery passes them:
  plan_received     a train plan arrived (before the store)
  store_connected   the generation's store is reachable, before the rendezvous
  group_formed      the process group of the generation exists
  meta_sent         source: the state's meta record went out, no tensor yet
  meta_received     receiver: the meta record arrived, no tensor yet
  bucket_sent       source: tensor bucket INDEX went out
  bucket_received   receiver: tensor bucket INDEX arrived
  verified          every bucket arrived and its digest was checked, before the vote
  state_synced      the generation formed: the state is applied everywhere
  step              step INDEX began (after its plan; INDEX is the step number)
The buddy mirror's exchange (pure FSDP, job.device_mesh(replicate=1, mirror_every=K);
INDEX is the mirrored step, not a bucket):
  mirror_begin      a mirror exchange at step INDEX begins: nothing sent yet
  mirror_meta       the snapshot's meta record went to the buddy, its shard not yet
  mirror_sent       the snapshot was exchanged, before the vote that makes it current

A second test-only variable, LOCKSTEP_TEST_LATE_PAUSE=N (N >= 1), makes this process read a
pause directive late: the training thread sees `pause` (pause_at_step P) only once it has
committed more than P + N steps, as if its heartbeat reply had been that many steps slow
(a slow heartbeat thread under load, a job that sped up after the coordinator measured
its step rate). The ranks must still pause at one step (job.py, "the pause step").
"""
import os
import signal

PHASES = ("plan_received", "store_connected", "group_formed", "meta_sent", "meta_received",
          "bucket_sent", "bucket_received", "verified", "state_synced", "step",
          "mirror_begin", "mirror_meta", "mirror_sent")
ACTIONS = ("kill", "stop", "corrupt")


class Fault:
    __slots__ = ("phase", "index", "generation", "action", "fired")

    def __init__(self, phase, index, generation, action):
        self.phase, self.index, self.generation, self.action = phase, index, generation, action
        self.fired = False


def parse(spec):
    """[Fault] from a LOCKSTEP_TEST_FAULT value; ValueError says what is wrong."""
    out = []
    for entry in filter(None, (e.strip() for e in (spec or "").split(","))):
        body, _, action = entry.partition(":")
        action = action or "kill"
        body, _, gen = body.partition("@")
        phase, _, index = body.partition("#")
        if phase not in PHASES:
            raise ValueError("LOCKSTEP_TEST_FAULT: unknown phase %r (one of %s)" % (phase, "|".join(PHASES)))
        if action not in ACTIONS:
            raise ValueError("LOCKSTEP_TEST_FAULT: unknown action %r (one of %s)" % (action, "|".join(ACTIONS)))
        try:
            out.append(Fault(phase, int(index) if index else None, int(gen) if gen else None, action))
        except ValueError:
            raise ValueError("LOCKSTEP_TEST_FAULT: %r: index and generation are integers" % entry)
    return out


_faults = parse(os.environ.get("LOCKSTEP_TEST_FAULT"))


def _late_pause(value):
    try:
        n = int(value or 0)
    except ValueError:
        raise ValueError("LOCKSTEP_TEST_LATE_PAUSE: a number of steps (got %r)" % value)
    if n < 0:
        raise ValueError("LOCKSTEP_TEST_LATE_PAUSE: a number of steps >= 0 (got %r)" % value)
    return n


_late = _late_pause(os.environ.get("LOCKSTEP_TEST_LATE_PAUSE"))


def seen(directive, step):
    """The directive as the training thread reads it at committed step `step`: with
    LOCKSTEP_TEST_LATE_PAUSE=N a pause directive stays unseen until step > P + N."""
    if _late and directive is not None and directive.kind == "pause" and step <= directive.pause_at_step + _late:
        return None
    return directive


def hit(phase, generation, index=None, on_corrupt=None):
    """Called by the library at each phase; does nothing unless a fault names it."""
    if not _faults:
        return
    for f in _faults:
        if f.fired or f.phase != phase:
            continue
        if f.generation is not None and f.generation != generation:
            continue
        if f.index is not None and f.index != index:
            continue
        f.fired = True
        if f.action == "corrupt":
            if on_corrupt is not None:
                on_corrupt()
            continue
        os.kill(os.getpid(), signal.SIGKILL if f.action == "kill" else signal.SIGSTOP)
