"""One real process group (world size 1, gloo) against the in-process fake coordinator:
the library forms the group, trains, and keeps training while the coordinator is down."""
import logging
import os
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from torch import nn  # noqa: E402

import lockstep_train as ls  # noqa: E402
from lockstep_train.client import CoordinatorClient  # noqa: E402
from lockstep_train.heartbeat import Heartbeat  # noqa: E402
from support.fake_coordinator import FakeCoordinator  # noqa: E402


def free_closed_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class JobTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeCoordinator(world_size=1)
        self.job = None
        logging.getLogger("lockstep_train").setLevel(logging.ERROR)

    def tearDown(self):
        if self.job is not None:
            self.job.close()
        if self.fake is not None:
            self.fake.stop()

    def test_trains_and_keeps_training_while_the_coordinator_is_down(self):
        events = []
        self.job = job = ls.join(coordinator=self.fake.url, rank=0, world_size=1,
                                 on_event=lambda name, **f: events.append((name, f)))
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        job.track(model, opt)
        seen = []
        for step in job.steps(6):
            with job.step_guard():
                ls.seed(step, job.rank)
                model(torch.randn(3, 4)).sum().backward()
                job.all_reduce_gradients()
                opt.step()
                opt.zero_grad()
            seen.append(step)
            if step == 2:
                self.fake.stop()          # the coordinator goes away mid-run
                self.fake_stopped = True
                job.heartbeat.beat()      # at least one heartbeat hits the closed port
        self.fake = None
        self.assertEqual(seen, [0, 1, 2, 3, 4, 5])
        self.assertEqual(job.step, 6)
        self.assertEqual((job.rank, job.generation), (0, 0))
        self.assertGreaterEqual(job.heartbeat.failures, 1)
        names = [n for n, _ in events]
        for want in ("registered", "plan_received", "group_formed", "state_received", "state_synced",
                     "finished"):
            self.assertIn(want, names)
        self.assertTrue(all("t" in f and "member" in f for _, f in events))

    def test_done_is_sent_before_the_group_is_freed(self):
        # Freeing the group holds the GIL (gloo's destructor, gc.collect(): seconds on
        # torch 2.x under load), so no heartbeat leaves meanwhile; the coordinator must
        # already know that this member finished, or it fences it as dead (the migration
        # benchmark on torch 2.15: every rank fenced after its last step).
        import lockstep_train.job as job_module
        seen = []
        real_gc = job_module.gc

        class GcSpy:
            @staticmethod
            def collect(*a):
                with self.fake.lock:
                    seen.append([r[2].get("state") for r in self.fake.requests if r[1] == "/v1/heartbeat"])
                return real_gc.collect(*a)
        self.job = job = ls.join(coordinator=self.fake.url, rank=0, world_size=1)
        job.track(nn.Linear(2, 2), None)
        job_module.gc = GcSpy
        try:
            for _ in job.steps(2):
                pass
        finally:
            job_module.gc = real_gc
        self.assertTrue(seen, "the group was never freed")
        self.assertIn("done", seen[-1], "the group was freed before the coordinator heard 'done'")

    def test_a_failed_step_is_retried_then_raised(self):
        self.job = job = ls.join(coordinator=self.fake.url, rank=0, world_size=1)
        model = nn.Linear(2, 2)
        job.track(model, torch.optim.SGD(model.parameters(), lr=0.1))
        tries = []
        with self.assertRaisesRegex(RuntimeError, "always broken"):
            for step in job.steps(3):
                with job.step_guard():
                    tries.append(step)
                    if step == 1:
                        raise RuntimeError("always broken")
        self.assertEqual(tries, [0, 1, 1, 1])     # replayed after each re-form, then given up
        reports = [r for r in self.fake.requests if r[1] == "/v1/report"]
        self.assertEqual([r[2]["reason"] for r in reports], ["error", "error"])
        self.assertEqual(reports[0][2]["committed_step"], 1)

    def test_a_failure_after_optimizer_step_commits_the_step(self):
        self.job = job = ls.join(coordinator=self.fake.url, rank=0, world_size=1)
        model = nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        job.track(model, opt)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)   # wraps opt.step again
        ran = []
        for step in job.steps(4):
            with job.step_guard():
                ran.append(step)
                model(torch.ones(1, 2)).sum().backward()
                job.all_reduce_gradients()
                opt.step()
                opt.zero_grad()
                sched.step()
                if step == 1 and ran.count(1) == 1:
                    raise RuntimeError("a logging all_reduce failed after the optimizer step")
        self.assertEqual(ran, [0, 1, 2, 3])       # step 1 was applied, so it is not replayed
        reports = [r[2] for r in self.fake.requests if r[1] == "/v1/report"]
        self.assertEqual([(r["reason"], r["committed_step"]) for r in reports], [("error", 2)])
        self.assertEqual(opt.param_groups[0]["lr"], 0.1 * 0.5 ** 4)

    def test_exit_directive_leaves_with_status_zero(self):
        self.job = job = ls.join(coordinator=self.fake.url, rank=0, world_size=1)
        model = nn.Linear(2, 2)
        job.track(model, None)
        ran = []
        with self.assertRaises(ls.Exit) as cm:
            for step in job.steps(1000):
                ran.append(step)
                if step == 2:
                    self.fake.directive = {"directive": "exit"}
                    job.heartbeat.beat()
        self.assertEqual(cm.exception.code, 0)
        self.assertEqual(ran, [0, 1, 2])

    def test_a_failed_job_raises_job_failed(self):
        self.job = job = ls.join(coordinator=self.fake.url, rank=0, world_size=1)
        job.track(nn.Linear(2, 2), None)
        self.fake.plan = lambda member: (200, {"generation": 2, "action": "exit",
                                               "reason": "the job failed: no replica holds step 7"})
        with self.assertRaisesRegex(ls.JobFailed, "no replica holds step 7"):
            for _ in job.steps(3):
                pass

    def test_user_errors_are_not_swallowed(self):
        self.job = job = ls.join(coordinator=self.fake.url, rank=0, world_size=1)
        model = nn.Linear(2, 2)
        job.track(model, None)
        with self.assertRaises(TypeError):
            for step in job.steps(2):
                with job.step_guard():
                    raise TypeError("a bug in the training script")

    def _wait_in_thread(self, job):
        """Runs job.steps() in a thread; returns (thread, outcome dict)."""
        out = {}

        def run():
            try:
                for _ in job.steps(1):
                    out["trained"] = True
            except ls.Exit as e:
                out["exit"] = e.reason
            except BaseException as e:   # noqa: BLE001 - reported to the test
                out["error"] = e
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, out

    def test_a_waiting_member_long_polls_and_asks_again_after_a_held_reply(self):
        self.fake.world_size = 2          # rank 1 never comes: rank 0 waits for its plan
        self.fake.hold_polls = True
        self.job = job = ls.join(coordinator=self.fake.url, rank=0, world_size=2)
        job.track(nn.Linear(2, 2), None)
        t, out = self._wait_in_thread(job)
        q = self.fake.wait_held(1)
        # It asks the coordinator to hold the poll, naming the generation it formed (none).
        self.assertEqual((q["member"], q["wait_ms"], q["generation"]), ([job.member], ["1000"], ["-1"]))
        self.fake.release({"generation": -1, "action": "wait", "reason": "still waiting", "held_ms": 1000})
        self.fake.wait_held(2)            # a held reply without news: the next long poll
        self.fake.release({"generation": -1, "action": "exit", "reason": "replaced", "held_ms": 2})
        t.join(60)
        self.assertEqual(out, {"exit": "replaced"})
        # No plain polls in between: while a poll is held, the member does not ask again.
        self.assertEqual(self.fake.count("/v1/plan"), 2)

    def test_a_coordinator_without_long_polls_is_polled_as_before(self):
        self.fake.world_size = 2          # the fake ignores wait_ms and answers "wait" at once
        self.job = job = ls.join(coordinator=self.fake.url, rank=0, world_size=2)
        job.track(nn.Linear(2, 2), None)
        t, out = self._wait_in_thread(job)
        self.fake.wait_count("/v1/plan", 3)   # it keeps polling
        self.fake.plan = lambda member: (200, {"generation": 0, "action": "exit", "reason": "replaced"})
        t.join(60)
        self.assertEqual(out, {"exit": "replaced"})

    def test_heartbeat_to_a_dead_coordinator_counts_and_never_raises(self):
        hb = Heartbeat(CoordinatorClient("http://127.0.0.1:%d" % free_closed_port(), timeout=0.2), "m")
        for _ in range(3):
            hb.beat()
        self.assertEqual((hb.failures, hb.sent), (3, 0))
        self.assertIsNone(hb.directive())

    def test_pause_directive_is_picked_up_for_the_current_generation(self):
        self.fake.directive = {"directive": "pause", "pause_at_step": 9}
        hb = Heartbeat(CoordinatorClient(self.fake.url), "m")
        hb.beat()
        self.assertIsNone(hb.directive())   # not for this member's generation (-1: none yet)
        hb.update(generation=0)
        hb.beat()
        self.assertEqual((hb.directive().kind, hb.directive().pause_at_step), ("pause", 9))
        hb.update(generation=1)            # a new generation forgets the old directive
        self.assertIsNone(hb.directive())

    def test_the_late_pause_knob_hides_a_pause_directive_until_n_steps_past_it(self):
        """LOCKSTEP_TEST_LATE_PAUSE=N (faults.seen): the training thread reads pause_at_step
        P only once its committed step is > P + N; other directives are not delayed."""
        from lockstep_train import faults
        from lockstep_train.protocol import Directive
        pause, exit_ = Directive(generation=0, kind="pause", pause_at_step=9), Directive(generation=0, kind="exit")
        saved = faults._late
        try:
            faults._late = 0
            self.assertIs(faults.seen(pause, 5), pause)
            faults._late = 3
            self.assertEqual([faults.seen(pause, s) for s in (9, 10, 12)], [None, None, None])
            self.assertIs(faults.seen(pause, 13), pause)
            self.assertIs(faults.seen(exit_, 0), exit_)
            self.assertIsNone(faults.seen(None, 20))
        finally:
            faults._late = saved
        with self.assertRaises(ValueError):
            faults._late_pause("-1")
        with self.assertRaises(ValueError):
            faults._late_pause("soon")

    def test_the_restored_step_is_sent_for_the_generation_whose_sync_restored_it(self):
        """restored_step (the step a generation's state sync left the member at; below the
        plan's resume step with the buddy mirror) goes with every heartbeat of that
        generation and is forgotten when the next generation begins."""
        hb = Heartbeat(CoordinatorClient(self.fake.url), "m")
        hb.update(generation=1, step=6, state="waiting")
        hb.beat()
        hb.update(step=4, state="training", restored_step=4)
        hb.beat()
        hb.update(step=5)
        hb.beat()
        hb.update(generation=2, state="waiting")
        hb.beat()
        beats = [b for _, path, b in self.fake.requests if path == "/v1/heartbeat"]
        self.assertEqual([(b["generation"], b["step"], b.get("restored_step")) for b in beats],
                         [(1, 6, None), (1, 4, 4), (1, 5, 4), (2, 5, None)])
        self.assertIsNone(hb.restored_step())


if __name__ == "__main__":
    unittest.main()
