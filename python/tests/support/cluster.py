"""Test support for test_migration: a real lockstep-coordinator process plus training
worker processes (support/train_worker.py), their JSON events, and cleanup of every
process it started. Used from one test thread (events are collected by reader threads
under a lock)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "train_worker.py")
SAFETY_S = 120     # only so that a broken run fails instead of hanging; never asserted (torch 2.x
                   # loads its CUDA libraries at import: over 60 s on a machine at load 100)


def reference_hash(world, steps, args=()):
    """Final parameters of a fault-free plain DistributedDataParallel run of the worker."""
    hashes = set(reference_hashes(world, steps, args).values())
    assert len(hashes) == 1, "the reference ranks disagree: %s" % hashes
    return hashes.pop()


def reference_hashes(world, steps, args=(), mode="ddp", timeout=180):
    """{rank: final hash} of a fault-free plain DDP run (ranks differ where the hash
    covers per-rank state, e.g. BatchNorm running statistics after the last forward);
    mode="hsdp": of a plain FSDP2 HSDP run (each rank's hash covers its shard)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = [subprocess.Popen([sys.executable, WORKER, "--mode", mode, "--steps", str(steps), "--port", str(port),
                               *args],
                              env=dict(os.environ, LOCKSTEP_RANK=str(r), LOCKSTEP_WORLD_SIZE=str(world)),
                              stdout=subprocess.PIPE, text=True) for r in range(world)]
    try:
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    evs = [json.loads(line) for o in outs for line in o.splitlines() if line.startswith("{")]
    ends = [e for e in evs if e.get("ev") == "end"]
    assert len(ends) == world, "a reference rank did not finish: %s" % outs
    return {e["rank"]: e["hash"] for e in ends}


def coordinator_binary():
    """LOCKSTEP_COORDINATOR_BIN; without it: SkipTest by hand, a failure under ctest."""
    binary = os.environ.get("LOCKSTEP_COORDINATOR_BIN")
    if not binary:
        if os.environ.get("LOCKSTEP_UNDER_CTEST"):
            raise AssertionError("LOCKSTEP_COORDINATOR_BIN is not set: python/CMakeLists.txt sets it "
                                 "when the lockstep-coordinator target exists; build it (cmake --build "
                                 "--preset dev --target lockstep-coordinator) and re-run ctest")
        raise unittest.SkipTest("set LOCKSTEP_COORDINATOR_BIN=path/to/lockstep-coordinator to run these")
    if not os.access(binary, os.X_OK):
        raise AssertionError("LOCKSTEP_COORDINATOR_BIN=%s is not an executable" % binary)
    return binary


class Cluster:
    def __init__(self, binary, world_size, coordinator_args=()):
        self.dir = tempfile.mkdtemp(prefix="lockstep-pylib-")
        self.world_size = world_size
        self.lock = threading.Lock()
        self.events = []            # (proc index, event dict)
        self.procs = []             # Popen
        self.readers = []           # one reader thread per worker
        self.binary, self.coordinator_args = binary, list(coordinator_args)
        self.coord = None
        self.start_coordinator("0")
        with open(os.path.join(self.dir, "port")) as f:
            self.port = f.read().strip()
        self.url = "http://127.0.0.1:%s" % self.port

    def start_coordinator(self, port):
        """(Re)start the coordinator on `port` ("0": any) with this cluster's state file."""
        port_file = os.path.join(self.dir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        with open(os.path.join(self.dir, "coordinator.log"), "a") as log:
            self.coord = subprocess.Popen(
                [self.binary, "--job", "pylib-test", "--world-size", str(self.world_size),
                 "--listen", "127.0.0.1:" + port, "--port-file", port_file,
                 "--state-file", os.path.join(self.dir, "state.json"), "--log-level", "info",
                 *self.coordinator_args], stdout=log, stderr=subprocess.STDOUT)
        self.wait_for(lambda: os.path.exists(port_file) and os.path.getsize(port_file) > 0,
                      "the coordinator's port file")

    def kill_coordinator(self):
        self.coord.kill()
        self.coord.wait()
        self.coord = None

    def start(self, role, rank=None, hold=False, steps=40, step_sleep=0.0, hold_at=-1, env=None, args=()):
        env = dict(os.environ, LOCKSTEP_COORDINATOR=self.url, LOCKSTEP_ROLE=role,
                   LOCKSTEP_WORLD_SIZE=str(self.world_size), PYTHONUNBUFFERED="1", **(env or {}))
        env.pop("LOCKSTEP_RANK", None)
        if rank is not None:
            env["LOCKSTEP_RANK"] = str(rank)
        if hold:
            env["LOCKSTEP_TEST_HOLD"] = "1"
        with open(os.path.join(self.dir, "worker%d.err" % len(self.procs)), "w") as log:
            p = subprocess.Popen([sys.executable, WORKER, "--steps", str(steps), "--step-sleep",
                                  str(step_sleep), "--hold-at", str(hold_at), *args], env=env,
                                 stdout=subprocess.PIPE, stderr=log, text=True)
        idx = len(self.procs)
        self.procs.append(p)
        t = threading.Thread(target=self._read, args=(idx, p), daemon=True)
        t.start()
        self.readers.append(t)
        return idx

    def _read(self, idx, p):
        for line in p.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append((idx, ev))

    def of(self, idx=None, ev=None):
        with self.lock:
            return [e for i, e in self.events if (idx is None or i == idx) and (ev is None or e["ev"] == ev)]

    def wait_for(self, pred, what):
        deadline = time.monotonic() + SAFETY_S
        while time.monotonic() < deadline:
            v = pred()
            if v:
                return v
            if self.coord is not None and self.coord.poll() is not None:
                raise AssertionError("the coordinator exited (%s) while waiting for %s; log:\n%s"
                                     % (self.coord.returncode, what, self.log()))
            time.sleep(0.02)
        raise AssertionError("gave up waiting for %s; events:\n%s" % (what, self.dump()))

    def wait_exit(self, indexes):
        for i in indexes:
            self.wait_for(lambda: self.procs[i].poll() is not None, "worker %d to exit" % i)
            self.readers[i].join(SAFETY_S)   # every line it printed has been read

    def http(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def signal(self, idx, sig):
        os.kill(self.procs[idx].pid, sig)

    def log(self):
        try:
            with open(os.path.join(self.dir, "coordinator.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def dump(self):
        with self.lock:
            lines = ["%d %s" % (i, json.dumps(e)) for i, e in self.events]
        errs = []
        for i in range(len(self.procs)):
            try:
                with open(os.path.join(self.dir, "worker%d.err" % i)) as f:
                    errs.append("worker %d stderr:\n%s" % (i, f.read()[-2000:]))
            except OSError:
                pass
        return "\n".join(lines[-80:] + errs) + "\ncoordinator:\n" + self.log()

    def stop(self):
        """Kill every process this cluster started (SIGCONT first: a stopped one cannot die)."""
        for p in self.procs + [self.coord]:
            if p is not None and p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                    p.kill()
                except ProcessLookupError:
                    pass
            p.wait()
        for t, p in zip(self.readers, self.procs):   # the pipes, once their reader saw the end
            t.join(5)
            if not t.is_alive():
                p.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def assert_committed_once(test, c, i, steps_total, dump):
    """Worker i committed every step exactly once, in order, in one process: nothing lost,
    nothing replayed on a healthy rank, the counter never went back. One exception:
    when the failed member had already sent its gradients, a survivor's all-reduce
    can complete while another's fails (the kill lands between their last chunks).
    The plan then resumes after the step the first one committed, and the second
    receives that step's state from it instead of computing it."""
    steps = [e["step"] for e in c.of(i, "committed")]
    everything = list(range(1, steps_total + 1))
    if steps == everything:
        return
    missing = sorted(set(everything) - set(steps))
    test.assertEqual(len(missing), 1, dump)
    s = missing[0]
    test.assertEqual(steps, [x for x in everything if x != s], dump)
    reported = [e["committed_step"] for e in c.of(i, "reported")]
    test.assertIn(s - 1, reported, "worker %d skipped step %d without failing in it:\n%s" % (i, s, dump))
    plan = c.of(i, "plan_received")[-1]
    test.assertEqual(plan["resume_step"], s, dump)
    test.assertNotEqual(plan["src_rank"], plan["rank"], "worker %d was its own source:\n%s" % (i, dump))
    test.assertTrue(c.of(i, "state_received"), dump)
