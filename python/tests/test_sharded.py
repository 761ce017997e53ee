"""Integration: FSDP2 HSDP (fully_shard on job.device_mesh(replicate=2, shard=2)), 4 ranks
+ a spare with the real lockstep-coordinator (LOCKSTEP_COORDINATOR_BIN), gloo on CPU,
torch >= 2.15 only. A rank is SIGKILLed (or stopped, or migrated: planned or pre-emptive) mid-run; the spare
takes its rank and receives its shard, optimizer state and step from the rank holding
the same shard in the other replica group; every rank ends with the shard of a
fault-free plain FSDP2 HSDP run (no library), bit for bit, the healthy ranks in their
original processes with every step committed exactly once."""
import os
import signal
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import support.cluster  # noqa: E402
from support.cluster import assert_committed_once  # noqa: E402
from support.sharded_case import ShardedCase  # noqa: E402

support.cluster.SAFETY_S = 300   # 5 torch 2.x processes importing at load 30 took over 120 s to register once


class HSDPMigrationTest(ShardedCase):
    WORLD = 4
    STEPS = 40
    HOLD_AT = 5
    ARGS = ("--hsdp",)
    MODE = "hsdp"
    REF_TIMEOUT = 400    # 4 imports of torch 2.x at load 30: > 180 s once
    # FSDP2's imports and first use hold the GIL for seconds on a loaded machine (load 20-40
    # from other work here): a 3 s heartbeat timeout fenced healthy ranks while they built
    # their models, so the sharded tests allow 10 s (a SIGSTOPed rank is fenced after 10 s).
    COORD_ARGS = ["--heartbeat-timeout", "10s", "--report-grace", "3s", "--join-timeout", "30s",
                  "--fence", "local", "--spares", "0"]

    def setUp(self):
        ref = self.reference()
        # ranks 0 and 2 hold shard 0, ranks 1 and 3 shard 1; the two replicas agree
        self.assertEqual(ref[0], ref[2])
        self.assertEqual(ref[1], ref[3])
        self.assertNotEqual(ref[0], ref[1])
        super().setUp()

    def assert_completed(self, healthy, newcomer, rank):
        c = self.c
        dump = self.assert_finished(healthy, newcomer, rank)
        for i in healthy:
            assert_committed_once(self, c, i, self.STEPS, dump)
        spare_steps = [e["step"] for e in c.of(newcomer, "committed")]
        self.assertEqual(spare_steps, list(range(spare_steps[0], self.STEPS + 1)), dump)
        self.assertGreater(spare_steps[0], 1, "the spare must resume, not start over")
        # the spare's state came from the rank holding the same shard in the other replica
        got = [e for e in c.of(newcomer, "state_received")]
        self.assertTrue(got, dump)
        return dump

    def test_sigkill_of_an_hsdp_rank_the_spare_rebuilds_its_shard_from_the_other_replica(self):
        ranks = self.start_ranks(victim=1)
        spare = self.start_spare()
        self.c.wait_for(lambda: self.c.of(ranks[1], "holding"), "rank 1 to reach step %d" % self.HOLD_AT)
        self.c.signal(ranks[1], signal.SIGKILL)
        self.assert_completed([ranks[0], ranks[2], ranks[3]], spare, 1)
        resume = self.c.of(spare, "plan_received")[-1]["resume_step"]
        self.assertEqual(self.c.of(spare, "committed")[0]["step"], resume + 1)
        self.assertEqual(self.c.of(spare, "state_received")[-1]["src_rank"], 3)

    def test_sigstop_of_an_hsdp_rank_is_fenced_and_replaced(self):
        ranks = self.start_ranks(victim=2)
        spare = self.start_spare()
        self.c.wait_for(lambda: self.c.of(ranks[2], "holding"), "rank 2 to reach step %d" % self.HOLD_AT)
        self.c.signal(ranks[2], signal.SIGSTOP)
        self.assert_completed([ranks[0], ranks[1], ranks[3]], spare, 2)
        self.assertEqual(self.c.of(spare, "state_received")[-1]["src_rank"], 0)
        self.c.wait_for(lambda: self.c.procs[ranks[2]].poll() is not None, "the hung rank to be fenced")

    def test_the_spare_killed_while_receiving_its_shard_the_next_spare_takes_over(self):
        """A second failure inside the re-form: rank 1 dies at the start of step 6; the first
        spare dies in generation 1 once the meta record of rank 1's shard arrived from rank 3,
        before any tensor (LOCKSTEP_TEST_FAULT=meta_received@1). Nothing was applied anywhere
        (all or nothing), so every survivor still holds step 6 and rank 3 still holds rank
        1's shard: generation 2 resumes at step 6 with the second spare, which receives the
        shard from rank 3, and every rank ends bit-identical. (Unlike the buddy mirror, a
        replica restore never goes below the plan's step: the coordinator judges generation
        1's failure against step 6, which the survivors hold.)"""
        ranks = self.start_ranks(victim=None, env={1: {"LOCKSTEP_TEST_FAULT": "step#6@0"}})
        first = self.start_spare(env={"LOCKSTEP_TEST_FAULT": "meta_received@1"})
        second = self.start_spare()
        self.c.wait_exit([ranks[1], first])
        for i in (ranks[1], first):
            self.assertEqual(self.c.procs[i].returncode, -signal.SIGKILL, self.c.dump())
        self.assertEqual(self.c.of(first, "state_received"), [], self.c.dump())
        self.assert_completed([ranks[0], ranks[2], ranks[3]], second, 1)
        self.assertEqual(self.c.of(second, "state_received")[-1]["src_rank"], 3)
        self.assertEqual(self.c.of(second, "committed")[0]["step"], 7)
        status, state = self.c.http("GET", "/v1/state")
        self.assertEqual(status, 200, state)
        gens = [(g["number"], g["resume_step"], g["restored_step"]) for g in state["history"]]
        self.assertEqual(gens, [(0, 0, 0), (1, 6, -1), (2, 6, 6)], state["history"])

    def test_planned_migration_of_an_hsdp_rank(self):
        self.migrate("planned", 3, src=1)

    def test_preemptive_migration_of_an_hsdp_rank(self):
        self.migrate("preemptive", 0, src=2)

    def migrate(self, kind, rank, src):
        """Every rank pauses after the same step; the spare takes `rank` and its shard from
        `src` (the same shard in the other replica)."""
        ranks = self.start_ranks(victim=None, step_sleep=0.15)
        spare = self.start_spare()
        self.c.wait_for(lambda: self.c.of(ranks[rank], "committed"), "rank %d to commit a step" % rank)
        status, reply = self.c.http("POST", "/v1/migrations", {"rank": rank, "kind": kind, "reason": "test"})
        self.assertEqual(status, 202, reply)
        self.assert_completed([ranks[r] for r in range(self.WORLD) if r != rank], spare, rank)
        self.c.wait_exit([ranks[rank]])
        self.assertEqual(self.c.procs[ranks[rank]].returncode, 0, self.c.dump())
        self.assertEqual(self.c.of(spare, "state_received")[-1]["src_rank"], src)
        left = [e["step"] for e in self.c.of(ranks[rank], "committed")]
        self.assertEqual(self.c.of(spare, "committed")[0]["step"], left[-1] + 1, "nothing replayed")
        status, migs = self.c.http("GET", "/v1/migrations")
        self.assertEqual([(m["kind"], m["state"]) for m in migs], [(kind, "done")], migs)

if __name__ == "__main__":
    unittest.main()
