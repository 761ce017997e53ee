"""The heartbeat thread: tells the coordinator this member lives, which generation and
committed step it is at, and picks up directives (pause at a step, exit).

Thread-safety: update() and directive() are called from the training thread, the
sending loop runs in a daemon thread; shared fields are guarded by a lock. The training
thread never waits on the network: a coordinator that is down or slow only shows in
`failures` (and one log line per outage).
"""
import logging
import threading
import time

from .client import Unavailable
from .protocol import ProtocolError, parse_directive

log = logging.getLogger("lockstep_train")


class Heartbeat:
    def __init__(self, client, member, interval=0.75):
        self.client = client
        self.member = member
        self.interval = interval
        self._lock = threading.Lock()
        self._generation = -1         # guarded by _lock; -1: not in a generation yet
        self._step = 0                # guarded by _lock
        self._state = "waiting"       # guarded by _lock
        self._directive = None        # guarded by _lock: last Directive of the current generation
        self._intact = True           # guarded by _lock: holds a verified state (see job.py)
        self._in_collective = False   # guarded by _lock: the training thread waits in a collective
        self._restored = None         # guarded by _lock: the step this generation's state sync restored
        self.failures = 0             # heartbeats that did not reach the coordinator
        self.sent = 0
        self._outage = False
        self._done_refused = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lockstep-heartbeat", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._wake.set()

    def update(self, generation=None, step=None, state=None, send_now=False, state_intact=None,
               in_collective=None, restored_step=None):
        with self._lock:
            if state_intact is not None:
                self._intact = state_intact
            if in_collective is not None:
                self._in_collective = in_collective
            if generation is not None and generation != self._generation:
                self._generation = generation
                self._directive = None
                self._restored = None
            if restored_step is not None:
                self._restored = restored_step
            if step is not None:
                self._step = step
            if state is not None:
                self._state = state
        if send_now:
            self._wake.set()

    def directive(self):
        with self._lock:
            return self._directive

    def state_intact(self):
        with self._lock:
            return self._intact

    def restored_step(self):
        """The step the state sync of the current generation restored (None: not synced)."""
        with self._lock:
            return self._restored

    def _run(self):
        while not self._stop.is_set():
            self.beat()
            self._wake.wait(self.interval)
            self._wake.clear()

    def beat(self):
        """Send one heartbeat now (also used by tests)."""
        with self._lock:
            state = self._state
            if state == "done" and self._done_refused:
                state = "training"   # a coordinator without "done" (see docs/migration.md)
            body = {"member": self.member, "generation": self._generation,
                    "step": self._step, "state": state, "state_intact": self._intact,
                    "in_collective": self._in_collective}
            if self._restored is not None:
                body["restored_step"] = self._restored
        try:
            status, reply = self.client.heartbeat(body)
        except Unavailable as e:
            self.failures += 1
            if not self._outage:
                self._outage = True
                log.warning("lockstep: heartbeat failed (%s); training continues, "
                            "further failures are only counted", e)
            return
        if self._outage:
            self._outage = False
            log.warning("lockstep: coordinator reachable again after %d failed heartbeats",
                        self.failures)
        self.sent += 1
        if status == 400 and body["state"] == "done":
            self._done_refused = True
        if status != 200:
            return
        try:
            d = parse_directive(reply)
        except ProtocolError as e:
            log.warning("lockstep: %s", e)
            return
        with self._lock:
            if d.generation == body["generation"] == self._generation:
                self._directive = d
