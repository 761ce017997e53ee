"""Shared by the sharded integration tests, test_sharded (FSDP2 HSDP) and test_buddy (pure
FSDP2 with the buddy mirror): the coordinator binary, the torch check, and a TestCase base
with the fault-free reference (one per class, cached), a Cluster per test and the checks
every run makes. A subclass sets WORLD, STEPS, HOLD_AT, ARGS, MODE, COORD_ARGS and
REF_TIMEOUT.

This module holds no tests: unittest runs every TestCase it finds in a test module's
namespace, imported ones included (test_sharded and test_buddy once imported
test_migration.MigrationTest for its set-up, and so ran its 7 tests a second and a
third time)."""
import re
import unittest

import torch

from .cluster import Cluster, coordinator_binary, reference_hashes


def torch_ok():
    """FSDP2 with the job's mesh: torch >= 2.15 (job.device_mesh() refuses older ones)."""
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (2, 15)


class ShardedCase(unittest.TestCase):
    WORLD = 4
    STEPS = 0
    HOLD_AT = 0
    ARGS = ()
    MODE = ""             # the plain FSDP2 reference: "hsdp" or "fsdp" (support/train_worker.py)
    COORD_ARGS = ()
    REF_TIMEOUT = 400

    @classmethod
    def setUpClass(cls):
        if not torch_ok():
            raise unittest.SkipTest("FSDP2 needs torch >= 2.15 (this is %s): job.device_mesh() refuses "
                                    "older ones" % torch.__version__)
        cls.binary = coordinator_binary()

    @classmethod
    def reference(cls):
        """{rank: hash of its shard} of a fault-free plain FSDP2 run (no library), once per class."""
        if "_ref" not in cls.__dict__:
            cls._ref = reference_hashes(cls.WORLD, cls.STEPS, cls.ARGS, mode=cls.MODE, timeout=cls.REF_TIMEOUT)
        return cls._ref

    def setUp(self):
        self.ref = self.reference()
        self.c = Cluster(self.binary, self.WORLD, self.COORD_ARGS)

    def tearDown(self):
        self.c.stop()

    def start_ranks(self, victim, env=None, **kw):
        """Every rank; `victim` holds inside step HOLD_AT (LOCKSTEP_TEST_HOLD); env: {rank: env}."""
        return [self.c.start("rank", r, hold=(r == victim), hold_at=self.HOLD_AT, steps=self.STEPS, args=self.ARGS,
                             env=(env or {}).get(r), **kw) for r in range(self.WORLD)]

    def start_spare(self, **kw):
        """A spare, returned once it registered."""
        spare = self.c.start("spare", steps=self.STEPS, args=self.ARGS, **kw)
        self.c.wait_for(lambda: self.c.of(spare, "registered"), "the spare to register")
        return spare

    def assert_finished(self, healthy, newcomer, rank):
        """Every worker in healthy + [newcomer] exited 0 after all STEPS with the reference's
        shard, in its original process (the healthy never restarted); the newcomer as `rank`.
        Returns the cluster's dump (for messages)."""
        c = self.c
        c.wait_exit(healthy + [newcomer])
        dump = c.dump()
        for i in healthy + [newcomer]:
            self.assertEqual(c.procs[i].returncode, 0, "worker %d failed:\n%s" % (i, dump))
            ends = c.of(i, "end")
            self.assertEqual(len(ends), 1, dump)
            self.assertEqual(ends[0]["step"], self.STEPS, dump)
            self.assertEqual(ends[0]["hash"], self.ref[ends[0]["rank"]],
                             "rank %d's shard differs from plain FSDP2:\n%s" % (ends[0]["rank"], dump))
            self.assertEqual(ends[0]["pid"], c.procs[i].pid)
            self.assertEqual({e["pid"] for e in c.of(i)}, {c.procs[i].pid})   # never restarted
        self.assertEqual(c.of(newcomer, "end")[0]["rank"], rank)
        return dump
