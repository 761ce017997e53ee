"""Integration: FSDP2 HSDP (fully_shard on job.device_mesh(replicate=2, shard=2)), 4 ranks
+ a spare with the real lockstep-coordinator (LOCKSTEP_COORDINATOR_BIN), gloo on CPU,
torch >= 2.15 only. A rank is SIGKILLed (or stopped, or migrated) mid-run; the spare
takes its rank and receives its shard, optimizer state and step from the rank holding
the same shard in the other replica group; every rank ends with the shard of a
fault-free plain FSDP2 HSDP run (no library), bit for bit, the healthy ranks in their
original processes with every step committed exactly once."""
import os
import signal
import sys
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from support.cluster import Cluster, reference_hashes  # noqa: E402
import support.cluster  # noqa: E402

support.cluster.SAFETY_S = 300   # 5 torch 2.x processes importing at load 30 took over 120 s to register once
from test_migration import MigrationTest  # noqa: E402

WORLD = 4
STEPS = 40
HOLD_AT = 5
ARGS = ("--hsdp",)
# FSDP2's imports and first use hold the GIL for seconds on a loaded machine (load 20-40
# from other work here): a 3 s heartbeat timeout fenced healthy ranks while they built
# their models, so the sharded tests allow 10 s (a SIGSTOPed rank is fenced after 10 s).
COORD_ARGS = ["--heartbeat-timeout", "10s", "--report-grace", "3s", "--join-timeout", "30s",
              "--fence", "local", "--spares", "0"]


def torch_ok():
    import re
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return m and (int(m.group(1)), int(m.group(2))) >= (2, 15)


class HSDPMigrationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not torch_ok():
            raise unittest.SkipTest("FSDP2 / HSDP needs torch >= 2.15 (this is %s): job.device_mesh() "
                                    "refuses older ones" % torch.__version__)
        MigrationTest.setUpClass.__func__(cls)   # the coordinator binary (skip or fail as there)

    @classmethod
    def reference(cls):
        if not hasattr(cls, "_ref"):
            cls._ref = reference_hashes(WORLD, STEPS, ARGS, mode="hsdp", timeout=400)   # 4 imports of torch 2.x at load 30: > 180 s once
        return cls._ref

    def setUp(self):
        self.ref = self.reference()
        # ranks 0 and 2 hold shard 0, ranks 1 and 3 shard 1; the two replicas agree
        self.assertEqual(self.ref[0], self.ref[2])
        self.assertEqual(self.ref[1], self.ref[3])
        self.assertNotEqual(self.ref[0], self.ref[1])
        self.c = Cluster(self.binary, WORLD, COORD_ARGS)

    def tearDown(self):
        self.c.stop()

    def start_ranks(self, victim, **kw):
        return [self.c.start("rank", r, hold=(r == victim), hold_at=HOLD_AT, steps=STEPS, args=ARGS, **kw)
                for r in range(WORLD)]

    def registered(self, idx):
        self.c.wait_for(lambda: self.c.of(idx, "registered"), "worker %d to register" % idx)

    def assert_completed(self, healthy, newcomer, rank):
        c = self.c
        c.wait_exit(healthy + [newcomer])
        dump = c.dump()
        for i in healthy + [newcomer]:
            self.assertEqual(c.procs[i].returncode, 0, "worker %d failed:\n%s" % (i, dump))
            ends = c.of(i, "end")
            self.assertEqual(len(ends), 1, dump)
            self.assertEqual(ends[0]["step"], STEPS, dump)
            self.assertEqual(ends[0]["hash"], self.ref[ends[0]["rank"]],
                             "rank %d's shard differs from plain HSDP:\n%s" % (ends[0]["rank"], dump))
            self.assertEqual(ends[0]["pid"], c.procs[i].pid)
        self.assertEqual(c.of(newcomer, "end")[0]["rank"], rank)
        for i in healthy:
            MigrationTest.assert_committed_once(self, i, dump)
            self.assertEqual({e["pid"] for e in c.of(i)}, {c.procs[i].pid})
        spare_steps = [e["step"] for e in c.of(newcomer, "committed")]
        self.assertEqual(spare_steps, list(range(spare_steps[0], STEPS + 1)), dump)
        self.assertGreater(spare_steps[0], 1, "the spare must resume, not start over")
        # the spare's state came from the rank holding the same shard in the other replica
        got = [e for e in c.of(newcomer, "state_received")]
        self.assertTrue(got, dump)
        return dump

    def test_sigkill_of_an_hsdp_rank_the_spare_rebuilds_its_shard_from_the_other_replica(self):
        ranks = self.start_ranks(victim=1)
        spare = self.c.start("spare", steps=STEPS, args=ARGS)
        self.registered(spare)
        self.c.wait_for(lambda: self.c.of(ranks[1], "holding"), "rank 1 to reach step %d" % HOLD_AT)
        self.c.signal(ranks[1], signal.SIGKILL)
        self.assert_completed([ranks[0], ranks[2], ranks[3]], spare, 1)
        resume = self.c.of(spare, "plan_received")[-1]["resume_step"]
        self.assertEqual(self.c.of(spare, "committed")[0]["step"], resume + 1)
        self.assertEqual(self.c.of(spare, "state_received")[-1]["src_rank"], 3)

    def test_sigstop_of_an_hsdp_rank_is_fenced_and_replaced(self):
        ranks = self.start_ranks(victim=2)
        spare = self.c.start("spare", steps=STEPS, args=ARGS)
        self.registered(spare)
        self.c.wait_for(lambda: self.c.of(ranks[2], "holding"), "rank 2 to reach step %d" % HOLD_AT)
        self.c.signal(ranks[2], signal.SIGSTOP)
        self.assert_completed([ranks[0], ranks[1], ranks[3]], spare, 2)
        self.assertEqual(self.c.of(spare, "state_received")[-1]["src_rank"], 0)
        self.c.wait_for(lambda: self.c.procs[ranks[2]].poll() is not None, "the hung rank to be fenced")

    def test_planned_migration_of_an_hsdp_rank(self):
        ranks = self.start_ranks(victim=None, step_sleep=0.15)
        spare = self.c.start("spare", steps=STEPS, args=ARGS)
        self.registered(spare)
        self.c.wait_for(lambda: self.c.of(ranks[3], "committed"), "rank 3 to commit a step")
        status, reply = self.c.http("POST", "/v1/migrations", {"rank": 3, "kind": "planned", "reason": "test"})
        self.assertEqual(status, 202, reply)
        self.assert_completed([ranks[0], ranks[1], ranks[2]], spare, 3)
        self.c.wait_exit([ranks[3]])
        self.assertEqual(self.c.procs[ranks[3]].returncode, 0, self.c.dump())
        self.assertEqual(self.c.of(spare, "state_received")[-1]["src_rank"], 1)


if __name__ == "__main__":
    unittest.main()
