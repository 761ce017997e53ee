"""Integration: pure FSDP2 (fully_shard on job.device_mesh(replicate=1, shard=4,
mirror_every=K)) with the buddy mirror, 4 ranks + a spare with the real
lockstep-coordinator (LOCKSTEP_COORDINATOR_BIN), gloo on CPU, torch >= 2.15 only. No rank
holds a second copy of another's shard, except the mirror: every K steps each rank's
shard, optimizer state and RNG go to its buddy's (rank + 1) CPU memory. A rank is
SIGKILLed mid-run (or migrated); the spare receives its rank's snapshot from the buddy,
every rank goes back to that mirrored step and replays at most K steps, and every rank
ends with the shard of a fault-free plain FSDP2 run (no library), bit for bit, the
healthy ranks in their original processes."""
import os
import signal
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from support.cluster import Cluster, reference_hashes  # noqa: E402
import support.cluster  # noqa: E402

support.cluster.SAFETY_S = 300
from test_migration import MigrationTest  # noqa: E402
from test_sharded import torch_ok  # noqa: E402

# Neither fault here is found by heartbeats (SIGKILL: the pid; planned: a request), so the
# timeout only has to outlast the GIL-holding imports and FSDP2 set-up of 5 torch 2.x
# processes on a loaded machine: at load 25 a 10 s timeout fenced every rank before the
# first generation formed.
COORD_ARGS = ["--heartbeat-timeout", "30s", "--report-grace", "3s", "--join-timeout", "60s",
              "--fence", "local", "--spares", "0"]

WORLD = 4
STEPS = 16
K = 4
HOLD_AT = 6          # the victim stops inside step 6 (6 committed): back to the mirror of step 4
ARGS = ("--fsdp", "--mirror-every", str(K))


class BuddyMirrorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not torch_ok():
            raise unittest.SkipTest("FSDP2 needs torch >= 2.15 (job.device_mesh() refuses older ones)")
        MigrationTest.setUpClass.__func__(cls)   # the coordinator binary (skip or fail as there)

    @classmethod
    def reference(cls):
        if not hasattr(cls, "_ref"):
            cls._ref = reference_hashes(WORLD, STEPS, ARGS, mode="fsdp", timeout=900)   # 400 s ran out at load 49
        return cls._ref

    def setUp(self):
        self.ref = self.reference()
        self.assertEqual(len(set(self.ref.values())), WORLD, "every rank holds its own shard")
        self.c = Cluster(self.binary, WORLD, COORD_ARGS)

    def tearDown(self):
        self.c.stop()

    def start_ranks(self, victim, **kw):
        return [self.c.start("rank", r, hold=(r == victim), hold_at=HOLD_AT, steps=STEPS, args=ARGS, **kw)
                for r in range(WORLD)]

    def assert_completed(self, healthy, newcomer, rank, max_replayed):
        c = self.c
        c.wait_exit(healthy + [newcomer])
        dump = c.dump()
        for i in healthy + [newcomer]:
            self.assertEqual(c.procs[i].returncode, 0, "worker %d failed:\n%s" % (i, dump))
            ends = c.of(i, "end")
            self.assertEqual(len(ends), 1, dump)
            self.assertEqual(ends[0]["step"], STEPS, dump)
            self.assertEqual(ends[0]["hash"], self.ref[ends[0]["rank"]],
                             "rank %d's shard differs from plain FSDP2:\n%s" % (ends[0]["rank"], dump))
            self.assertEqual(ends[0]["pid"], c.procs[i].pid)
            self.assertEqual({e["pid"] for e in c.of(i)}, {c.procs[i].pid})   # never restarted
        self.assertEqual(c.of(newcomer, "end")[0]["rank"], rank)
        got = c.of(newcomer, "state_received")[-1]
        self.assertEqual(got["src_rank"], (rank + 1) % WORLD, "the spare's state comes from the buddy")
        m = got["mirror_step"]
        self.assertEqual(m % K, 0, dump)
        # every healthy rank: steps 1..c committed, then back to the mirror m, m+1..STEPS (c - m <= K)
        for i in healthy:
            seq = [e["step"] for e in c.of(i, "committed")]
            back = [k for k in range(1, len(seq)) if seq[k] <= seq[k - 1]]
            self.assertLessEqual(len(back), 1, dump)
            top = seq[back[0] - 1] if back else m
            self.assertEqual(seq, list(range(1, top + 1)) + list(range(m + 1, STEPS + 1)), dump)
            self.assertLessEqual(top - m, max_replayed, dump)
            ends = c.of(i, "end")[0]
            self.assertGreater(ends["mirror"]["exchanges"], STEPS // K - 1, dump)
        spare_steps = [e["step"] for e in c.of(newcomer, "committed")]
        self.assertEqual(spare_steps, list(range(m + 1, STEPS + 1)), dump)
        return m

    def test_sigkill_the_spare_rebuilds_the_shard_from_the_buddys_mirror(self):
        ranks = self.start_ranks(victim=1)
        spare = self.c.start("spare", steps=STEPS, args=ARGS)
        self.c.wait_for(lambda: self.c.of(spare, "registered"), "the spare to register")
        self.c.wait_for(lambda: self.c.of(ranks[1], "holding"), "rank 1 to reach step %d" % HOLD_AT)
        self.c.signal(ranks[1], signal.SIGKILL)
        m = self.assert_completed([ranks[0], ranks[2], ranks[3]], spare, 1, max_replayed=K)
        self.assertEqual(m, HOLD_AT // K * K)

    @unittest.skipUnless(os.environ.get("LOCKSTEP_TEST_BUDDY_PLANNED") == "1",
                         "not yet run to completion (2026-11-29: the machine's load of 25-49 timed out its "
                         "reference run); LOCKSTEP_TEST_BUDDY_PLANNED=1 runs it")
    def test_planned_migration_mirrors_at_the_pause_nothing_replayed(self):
        ranks = self.start_ranks(victim=None, step_sleep=0.15)
        spare = self.c.start("spare", steps=STEPS, args=ARGS)
        self.c.wait_for(lambda: self.c.of(spare, "registered"), "the spare to register")
        self.c.wait_for(lambda: self.c.of(ranks[2], "committed"), "rank 2 to commit a step")
        status, reply = self.c.http("POST", "/v1/migrations", {"rank": 2, "kind": "planned", "reason": "test"})
        self.assertEqual(status, 202, reply)
        self.assert_completed([ranks[0], ranks[1], ranks[3]], spare, 2, max_replayed=0)
        self.c.wait_exit([ranks[2]])
        self.assertEqual(self.c.procs[ranks[2]].returncode, 0, self.c.dump())


if __name__ == "__main__":
    unittest.main()
