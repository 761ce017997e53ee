"""Integration: real training processes (3 ranks, tiny model, Adam, gloo) with the real
lockstep-coordinator binary (LOCKSTEP_COORDINATOR_BIN). Faults are injected at a fixed
step; every test asserts outcomes: training completes, no committed step is lost or run
twice on a healthy rank, healthy ranks keep their processes, and the final parameters
equal a fault-free plain-DDP run bit for bit."""
import os
import signal
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from support.cluster import Cluster  # noqa: E402
from support.cluster import reference_hash as cluster_reference_hash  # noqa: E402
from support.cluster import assert_committed_once, coordinator_binary, reference_hashes  # noqa: E402

WORLD = 3
STEPS = 40
HOLD_AT = 5          # the faulty rank stops inside this step (before its gradient all-reduce)
COORD_ARGS = ["--heartbeat-timeout", "3s", "--report-grace", "3s", "--join-timeout", "20s",
              "--fence", "local", "--spares", "0"]


def reference_hash():
    """Final parameters of a fault-free plain DistributedDataParallel run."""
    return cluster_reference_hash(WORLD, STEPS)


class MigrationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = coordinator_binary()
        cls.ref = reference_hash()

    WRAP = {}           # more worker environment (the subclass keeps a DDP wrapper)

    def setUp(self):
        self.c = Cluster(self.binary, WORLD, COORD_ARGS)
        start = self.c.start
        self.c.start = lambda *a, env=None, **kw: start(*a, env=dict(self.WRAP, **(env or {})), **kw)

    def tearDown(self):
        self.c.stop()

    # -- helpers ----------------------------------------------------------------------------
    def start_ranks(self, victim, hold_at=HOLD_AT, **kw):
        return [self.c.start("rank", r, hold=(r == victim), hold_at=hold_at, **kw) for r in range(WORLD)]

    def committed(self, idx):
        steps = [e["step"] for e in self.c.of(idx, "committed")]
        return steps[-1] if steps else 0

    def registered(self, idx):
        self.c.wait_for(lambda: self.c.of(idx, "registered"), "worker %d to register" % idx)

    def assert_completed(self, healthy, newcomer, rank, ref=None):
        """healthy: worker indexes that must finish in their original process; newcomer:
        the spare that must finish as `rank`; ref: the plain-DDP hash (default: self.ref),
        or {rank: hash}."""
        c = self.c
        ref = ref or self.ref
        c.wait_exit(healthy + [newcomer])
        dump = c.dump()
        for i in healthy + [newcomer]:
            self.assertEqual(c.procs[i].returncode, 0, "worker %d failed:\n%s" % (i, dump))
            ends = c.of(i, "end")
            self.assertEqual(len(ends), 1, dump)
            self.assertEqual(ends[0]["step"], STEPS, dump)
            want = ref[ends[0]["rank"]] if isinstance(ref, dict) else ref
            self.assertEqual(ends[0]["hash"], want, "final parameters differ from plain DDP:\n" + dump)
            self.assertEqual(ends[0]["pid"], c.procs[i].pid)
        self.assertEqual(c.of(newcomer, "end")[0]["rank"], rank)
        for i in healthy:
            self.assert_committed_once(i, dump)
            self.assertEqual({e["pid"] for e in c.of(i)}, {c.procs[i].pid})
        spare_steps = [e["step"] for e in c.of(newcomer, "committed")]
        self.assertEqual(spare_steps, list(range(spare_steps[0], STEPS + 1)), dump)
        self.assertGreater(spare_steps[0], 1, "the spare must resume, not start over")
        if self.WRAP:
            # The spare's new DDP wrapper reduced its first step in the survivors' bucket
            # layout (held buckets), then rebuilt the same one; the kept wrappers never differed.
            self.assertEqual(c.of(newcomer, "end")[0]["slow_iterations"], 1, dump)
            for i in healthy:
                self.assertEqual(c.of(i, "end")[0]["slow_iterations"], 0, dump)

    def assert_committed_once(self, i, dump):
        assert_committed_once(self, self.c, i, STEPS, dump)

    # -- tests ------------------------------------------------------------------------------
    def test_sigkill_of_a_rank_a_hot_spare_takes_over(self):
        ranks = self.start_ranks(victim=1)
        spare = self.c.start("spare")
        self.registered(spare)
        self.c.wait_for(lambda: self.c.of(ranks[1], "holding"), "rank 1 to reach step %d" % HOLD_AT)
        self.c.signal(ranks[1], signal.SIGKILL)
        self.assert_completed([ranks[0], ranks[2]], spare, 1)
        # The spare replays the step the survivors had not committed. The victim held
        # after its backward, which had already sent its gradient buckets (overlap), so
        # the survivors may have committed step HOLD_AT + 1 before the kill, or only one
        # of them may have (assert_committed_once).
        resume = self.c.of(spare, "plan_received")[-1]["resume_step"]
        self.assertIn(resume, (HOLD_AT, HOLD_AT + 1))
        self.assertEqual(self.c.of(spare, "committed")[0]["step"], resume + 1)
        self.assertTrue(self.c.of(ranks[0], "failure_detected"))

    def test_a_killed_rank_started_again_with_its_rank_joins_as_a_spare(self):
        """Kubeflow: the killed rank's container restarts in place (or its Job recreates the
        pod at its index) with the same LOCKSTEP_RANK after a spare took the rank over. It
        is not refused (a crash loop its controller would count): it waits as a spare,
        never trains, and exits 0 when the job finishes (its Job index completes)."""
        sleep = 0.15   # leaves the steps after the kill time for the new process to start
        ranks = self.start_ranks(victim=1, step_sleep=sleep)
        spare = self.c.start("spare", step_sleep=sleep)
        self.registered(spare)
        self.c.wait_for(lambda: self.c.of(ranks[1], "holding"), "rank 1 to reach step %d" % HOLD_AT)
        self.c.signal(ranks[1], signal.SIGKILL)
        self.c.wait_for(lambda: self.c.of(spare, "plan_received"), "the spare to take rank 1 over")
        again = self.c.start("rank", 1, step_sleep=sleep)
        self.registered(again)
        self.assertEqual(self.c.of(again, "registered")[0]["role"], "spare", self.c.dump())
        self.assertLess(self.committed(spare), STEPS, "the job ended before the check meant anything")
        self.assert_completed([ranks[0], ranks[2]], spare, 1)
        self.c.wait_exit([again])
        self.assertEqual(self.c.procs[again].returncode, 0, self.c.dump())
        self.assertEqual(self.c.of(again, "committed"), [])
        self.assertEqual(self.c.of(again, "plan_received"), [])

    def test_sigstop_hang_is_detected_fenced_and_replaced(self):
        ranks = self.start_ranks(victim=2)
        spare = self.c.start("spare")
        self.registered(spare)
        self.c.wait_for(lambda: self.c.of(ranks[2], "holding"), "rank 2 to reach step %d" % HOLD_AT)
        self.c.signal(ranks[2], signal.SIGSTOP)
        self.assert_completed([ranks[0], ranks[1]], spare, 2)
        self.c.wait_for(lambda: self.c.procs[ranks[2]].poll() is not None, "the hung rank to be fenced")
        self.assertEqual(self.c.procs[ranks[2]].returncode, -signal.SIGKILL)

    def test_a_stuck_training_thread_with_a_live_heartbeat_is_found_fenced_and_replaced(self):
        """Rank 2's training thread stops inside step HOLD_AT (a loop in the script's own
        code that never returns) while its heartbeat thread goes on, so the coordinator
        never misses a heartbeat from it. The other ranks' gradient all-reduce fails after
        LOCKSTEP_HANG_TIMEOUT (4 s), they report; rank 2, heartbeating but neither reporting
        nor waiting in a collective, is declared hung after the report grace, fenced
        (SIGKILL) and replaced by the spare."""
        quick = {"LOCKSTEP_HANG_TIMEOUT": "4"}
        ranks = self.start_ranks(victim=2, env=quick)
        spare = self.c.start("spare", env=quick)
        self.registered(spare)
        self.c.wait_for(lambda: self.c.of(ranks[2], "holding"), "rank 2 to reach step %d" % HOLD_AT)
        self.assert_completed([ranks[0], ranks[1]], spare, 2)
        self.c.wait_exit([ranks[2]])
        dump = self.c.dump()
        self.assertEqual(self.c.procs[ranks[2]].returncode, -signal.SIGKILL, dump)
        status, state = self.c.http("GET", "/v1/state")
        self.assertEqual(status, 200, state)
        victim = self.c.of(ranks[2], "registered")[0]["member"]
        m = [m for m in state["members"] if m["id"] == victim][0]
        # "hung" (no report within the grace), not "heartbeat_timeout": its heartbeats went on.
        self.assertEqual((m["status"], m["gone_cause"], m["fenced"]), ("dead", "hung", True), m)
        self.assertIn("heartbeating but no report for generation 0", m["gone_reason"])
        for i in (ranks[0], ranks[1]):
            self.assertTrue(self.c.of(i, "failure_detected"), dump)

    def test_planned_migration_moves_a_rank_at_a_step_boundary(self):
        self.migrate("planned")

    def test_preemptive_migration_moves_a_rank_at_a_step_boundary(self):
        self.migrate("preemptive")

    def test_a_rank_that_reads_the_pause_late_pauses_at_the_others_step(self):
        """Rank 0 reads the pause directive (pause after step P) only 8 steps late (a
        heartbeat reply that late: LOCKSTEP_TEST_LATE_PAUSE). Before the ranks agreed on the
        pause step in band, ranks 1 and 2 left after step P while rank 0 ran step P + 1
        alone: its all-reduce failed and the migration became a failure re-form. Now the
        agreement tells rank 0 what the others read, and all three pause at the boundary
        where the first of them read it, before rank 0 could read it itself."""
        pauses = self.migrate("planned", late={0: 8})
        dump = self.c.dump()
        p = pauses[0]
        self.assertFalse(p["read"], "rank 0 paused on the others' reading:\n" + dump)
        self.assertLessEqual(p["step"], p["pause_at_step"] + 8, dump)
        self.assertTrue(pauses[1]["read"] or pauses[2]["read"], dump)

    def test_every_rank_reads_the_pause_late_they_pause_together_at_the_first_who_read_it(self):
        """No rank has read the directive by step P + 1 (late by 3, 5 and 4 steps): they
        pause together at the first step any of them read it (P + 4 or later), past P,
        which the coordinator accepts (the reports' committed step is the resume step)."""
        pauses = self.migrate("preemptive", late={0: 3, 1: 5, 2: 4})
        self.assertGreaterEqual(pauses[0]["step"], pauses[0]["pause_at_step"] + 4, self.c.dump())
        self.assertTrue(any(p["read"] for p in pauses.values()), self.c.dump())

    def migrate(self, kind, late=None):
        """late: {rank: N}: that rank reads the pause directive N steps late. Returns
        {rank: its `pause` event} (every rank paused at the same step)."""
        # Steps of >= 0.15 s: the pause boundary lies about 3 s of steps ahead (the step
        # rate is measured for two heartbeat intervals, then two more are allowed for the
        # directive), which must fall before step STEPS. With 0.05 s steps it fell past
        # the end whenever the ranks' heartbeat intervals were known before the request
        # (pause_at_step 48-50 of 40, with the old 20 ms plan polls as with long polls).
        late = late or {}
        ranks = [self.c.start("rank", r, step_sleep=0.15,
                              env={"LOCKSTEP_TEST_LATE_PAUSE": str(late[r])} if r in late else None)
                 for r in range(WORLD)]
        spare = self.c.start("spare")
        self.registered(spare)
        self.c.wait_for(lambda: self.c.of(ranks[1], "committed"), "rank 1 to commit a step")
        status, reply = self.c.http("POST", "/v1/migrations", {"rank": 1, "kind": kind, "reason": "test"})
        self.assertEqual(status, 202, reply)
        self.assert_completed([ranks[0], ranks[2]], spare, 1)
        self.c.wait_exit([ranks[1]])
        self.assertEqual(self.c.procs[ranks[1]].returncode, 0, self.c.dump())
        self.assertTrue(self.c.of(ranks[1], "exit"), "the moved rank must leave through the exit plan")
        dump = self.c.dump()
        pauses = [e for i in ranks for e in self.c.of(i, "pause")]
        self.assertEqual(len(pauses), WORLD, "every rank pauses once:\n" + dump)
        self.assertEqual(len({(e["step"], e["pause_at_step"]) for e in pauses}), 1,
                         "every rank pauses at the same step:\n" + dump)
        for i in ranks + [spare]:
            self.assertEqual(self.c.of(i, "failure_detected"), [], "a pause, not a failure:\n" + dump)
        left = [e["step"] for e in self.c.of(ranks[1], "committed")]
        self.assertEqual(left[-1], pauses[0]["step"], dump)
        self.assertEqual(self.c.of(spare, "committed")[0]["step"], left[-1] + 1)
        status, migs = self.c.http("GET", "/v1/migrations")
        self.assertEqual([(m["kind"], m["state"]) for m in migs], [(kind, "done")], migs)
        status, state = self.c.http("GET", "/v1/state")
        self.assertEqual([(g["kind"], g["resume_step"]) for g in state["history"]],
                         [("formation", 0), (kind, pauses[0]["step"])], state["history"])
        return {r: self.c.of(ranks[r], "pause")[0] for r in range(WORLD)}

    def test_training_goes_on_while_the_coordinator_is_down_and_a_restarted_one_recovers_a_crash(self):
        ranks = self.start_ranks(victim=1, hold_at=25, step_sleep=0.05)
        spare = self.c.start("spare")
        self.registered(spare)
        self.c.wait_for(lambda: self.committed(ranks[0]) >= 3, "rank 0 to commit 3 steps")
        self.c.kill_coordinator()
        at_kill = self.committed(ranks[0])
        self.c.wait_for(lambda: self.committed(ranks[0]) >= at_kill + 5, "steps while the coordinator is down")
        self.c.wait_for(lambda: self.c.of(ranks[1], "holding"), "rank 1 to reach step 25")
        self.c.start_coordinator(self.c.port)   # same address, state from the state file
        self.c.signal(ranks[1], signal.SIGKILL)
        self.assert_completed([ranks[0], ranks[2]], spare, 1)

    def test_a_spare_that_dies_while_joining_is_replaced_by_the_next_spare(self):
        quick = {"LOCKSTEP_HANG_TIMEOUT": "4"}   # the survivors' rendezvous with the dead spare fails sooner
        ranks = self.start_ranks(victim=1, env=quick)
        first = self.c.start("spare", env=dict(quick, LOCKSTEP_TEST_HOLD_PLAN="1"))
        self.registered(first)
        second = self.c.start("spare", env=quick)
        self.registered(second)
        self.c.wait_for(lambda: self.c.of(ranks[1], "holding"), "rank 1 to reach step %d" % HOLD_AT)
        self.c.signal(ranks[1], signal.SIGKILL)
        self.c.wait_for(lambda: self.c.of(first, "holding"), "the first spare to get the plan")
        self.c.signal(first, signal.SIGKILL)
        self.assert_completed([ranks[0], ranks[2]], second, 1)

    def test_no_spare_waits_then_a_late_spare_takes_over(self):
        ranks = self.start_ranks(victim=2)
        self.c.wait_for(lambda: self.c.of(ranks[2], "holding"), "rank 2 to reach step %d" % HOLD_AT)
        self.c.signal(ranks[2], signal.SIGKILL)
        self.c.wait_for(lambda: [e for e in self.c.of(ranks[0], "waiting") if "spare" in e.get("reason", "")],
                        "rank 0 to wait for a spare")
        spare = self.c.start("spare")
        self.assert_completed([ranks[0], ranks[1]], spare, 2)


class DDPWrapperMigrationTest(MigrationTest):
    """The same faults with the script keeping torch's DistributedDataParallel (built on
    job.ddp_group, no job.all_reduce_gradients()): every rank ends with the parameters of
    the fault-free plain-DDP run, and the survivors' wrappers are the objects they built."""
    WRAP = {"LOCKSTEP_TEST_WRAP": "ddp"}
    # Not repeated with the wrapper (the coordinator and spare-pool paths do not depend on it).
    test_training_goes_on_while_the_coordinator_is_down_and_a_restarted_one_recovers_a_crash = None
    test_a_spare_that_dies_while_joining_is_replaced_by_the_next_spare = None
    test_no_spare_waits_then_a_late_spare_takes_over = None
    test_a_stuck_training_thread_with_a_live_heartbeat_is_found_fenced_and_replaced = None
    test_every_rank_reads_the_pause_late_they_pause_together_at_the_first_who_read_it = None

    def test_sigkill_with_buffers_that_ddp_broadcasts(self):
        """A BatchNorm layer: DDP broadcasts rank 0's buffers in every forward; the
        library does it over the current group (the hash covers the buffers too)."""
        args = ("--batchnorm",)
        ref = reference_hashes(WORLD, STEPS, args)       # per rank: the last forward updates them locally
        self.assertEqual(len(set(ref.values())), WORLD)
        ranks = [self.c.start("rank", r, hold=(r == 1), hold_at=HOLD_AT, args=args) for r in range(WORLD)]
        spare = self.c.start("spare", args=args)
        self.registered(spare)
        self.c.wait_for(lambda: self.c.of(ranks[1], "holding"), "rank 1 to reach step %d" % HOLD_AT)
        self.c.signal(ranks[1], signal.SIGKILL)
        self.assert_completed([ranks[0], ranks[2]], spare, 1, ref=ref)


if __name__ == "__main__":
    unittest.main()
