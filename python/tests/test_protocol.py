"""Pure pieces: plan and directive parsing, settings from the environment, seeds."""
import unittest

from lockstep_train import protocol, seeding

TRAIN = {"generation": 3, "action": "train", "rank": 2, "world_size": 4,
         "members": ["m0", "m1", "m7", "m3"],
         "store": {"host": "127.0.0.1", "port": 41234, "prefix": "lockstep/g3/"},
         "src_rank": 1, "resume_step": 57, "reason": "rank 2 died (member m2)"}


class PlanTest(unittest.TestCase):
    def test_train_plan_of_the_doc(self):
        p = protocol.parse_plan(TRAIN)
        self.assertEqual((p.generation, p.action, p.rank, p.world_size), (3, "train", 2, 4))
        self.assertEqual(p.store, protocol.Store("127.0.0.1", 41234, "lockstep/g3/"))
        self.assertEqual((p.src_rank, p.resume_step), (1, 57))
        self.assertEqual(p.members, ("m0", "m1", "m7", "m3"))

    def test_wait_and_exit_need_no_store(self):
        p = protocol.parse_plan({"generation": 1, "action": "wait", "reason": "waiting for a spare"})
        self.assertEqual((p.action, p.reason, p.store), ("wait", "waiting for a spare", None))
        self.assertEqual(protocol.parse_plan({"generation": 4, "action": "exit"}).action, "exit")

    def test_bad_plans_say_which_field(self):
        cases = [
            ([], "expected a JSON object"),
            ({"action": "train"}, "'generation' is missing"),
            (dict(TRAIN, action="dance"), "action must be one of"),
            (dict(TRAIN, rank=4), "rank 4 is not below world_size 4"),
            (dict(TRAIN, src_rank=-1), "'src_rank' must be an integer >= 0"),
            (dict(TRAIN, store={"host": "h", "port": 0, "prefix": "p"}), "'port' must be"),
            (dict(TRAIN, store={"host": "h", "port": 70000, "prefix": "p"}), "port must be <= 65535"),
            (dict(TRAIN, store=None), "store must be an object"),
            (dict(TRAIN, resume_step="5"), "'resume_step' must be an integer"),
            (dict(TRAIN, world_size=True), "'world_size' must be an integer"),
        ]
        for obj, msg in cases:
            with self.assertRaises(protocol.ProtocolError, msg=msg) as cm:
                protocol.parse_plan(obj)
            self.assertIn(msg, str(cm.exception))

    def test_directives(self):
        d = protocol.parse_directive({"generation": 2, "directive": "pause", "pause_at_step": 40})
        self.assertEqual(d, protocol.Directive(2, "pause", 40))
        self.assertEqual(protocol.parse_directive({"generation": 2}).kind, "none")
        self.assertEqual(protocol.parse_directive({"generation": 2, "directive": "exit"}).kind, "exit")
        with self.assertRaisesRegex(protocol.ProtocolError, "pause_at_step"):
            protocol.parse_directive({"generation": 2, "directive": "pause"})
        with self.assertRaisesRegex(protocol.ProtocolError, "directive must be one of"):
            protocol.parse_directive({"generation": 2, "directive": "stop"})


class SettingsTest(unittest.TestCase):
    def test_environment_and_arguments(self):
        env = {"LOCKSTEP_COORDINATOR": "127.0.0.1:9000", "LOCKSTEP_ROLE": "rank",
               "LOCKSTEP_RANK": "2", "LOCKSTEP_WORLD_SIZE": "4"}
        s = protocol.settings_from(env)
        self.assertEqual(s, protocol.Settings("http://127.0.0.1:9000", "rank", 2, 4))
        s = protocol.settings_from(env, role="spare")
        self.assertEqual((s.role, s.rank), ("spare", None))
        s = protocol.settings_from(env, coordinator="http://c:1/", rank=0)
        self.assertEqual((s.coordinator, s.rank), ("http://c:1", 0))

    def test_errors_say_what_to_set(self):
        with self.assertRaisesRegex(ValueError, "LOCKSTEP_COORDINATOR"):
            protocol.settings_from({})
        with self.assertRaisesRegex(ValueError, "needs a rank: set LOCKSTEP_RANK"):
            protocol.settings_from({"LOCKSTEP_COORDINATOR": "c:1"})
        with self.assertRaisesRegex(ValueError, "role must be 'rank' or 'spare'"):
            protocol.settings_from({"LOCKSTEP_COORDINATOR": "c:1", "LOCKSTEP_ROLE": "boss"})
        with self.assertRaisesRegex(ValueError, "LOCKSTEP_RANK must be an integer"):
            protocol.settings_from({"LOCKSTEP_COORDINATOR": "c:1", "LOCKSTEP_RANK": "x"})
        with self.assertRaisesRegex(ValueError, "rank 4 is not below world size 4"):
            protocol.settings_from({"LOCKSTEP_COORDINATOR": "c:1"}, rank=4, world_size=4)

    def test_register_body_carries_the_pod_when_in_kubernetes(self):
        b = protocol.register_body("m", "spare", "10.0.0.5", 4000, 12, None, env={})
        self.assertEqual(b, {"member": "m", "role": "spare", "host": "10.0.0.5", "store_port": 4000, "pid": 12})
        env = {"LOCKSTEP_POD_NAME": "job-spare-0-ab1cd", "LOCKSTEP_POD_UID": "1f2e-33"}
        b = protocol.register_body("m", "rank", "10.0.0.5", 4000, 12, 3, env=env)
        self.assertEqual((b["rank"], b["pod_name"], b["pod_uid"]), (3, "job-spare-0-ab1cd", "1f2e-33"))
        b = protocol.register_body("m", "rank", "h", 1, 1, 0, env={"LOCKSTEP_POD_UID": "u"})
        self.assertNotIn("pod_uid", b)  # a uid without a pod name is not sent (the coordinator refuses it)

    def test_registered_role_follows_the_coordinator(self):
        self.assertEqual(protocol.registered_role({"generation": 2, "role": "spare"}, "rank"), "spare")
        self.assertEqual(protocol.registered_role({"generation": -1, "role": "rank", "rank": 1}, "rank"), "rank")
        # A coordinator that does not say (older), or says something else: as asked.
        self.assertEqual(protocol.registered_role({"generation": 0}, "rank"), "rank")
        self.assertEqual(protocol.registered_role({"role": "boss"}, "spare"), "spare")
        self.assertEqual(protocol.registered_role("not json", "rank"), "rank")

    def test_member_id(self):
        m = protocol.new_member_id("node-a", 42)
        self.assertRegex(m, r"^node-a-42-[0-9a-f]{8}$")
        self.assertNotEqual(m, protocol.new_member_id("node-a", 42))


class SeedTest(unittest.TestCase):
    def test_same_inputs_same_streams(self):
        import random
        import torch
        seeding.seed(5, 1, base=7)
        a = (torch.rand(4), random.random())
        seeding.seed(9, 0, base=7)
        torch.rand(100)
        seeding.seed(5, 1, base=7)
        b = (torch.rand(4), random.random())
        self.assertTrue(torch.equal(a[0], b[0]))
        self.assertEqual(a[1], b[1])

    def test_step_rank_and_base_all_matter(self):
        seeds = {seeding.derive_seed(b, s, r) for b in (0, 1) for s in range(20) for r in range(4)}
        self.assertEqual(len(seeds), 160)
        self.assertEqual(seeding.derive_seed(0, 3, 1), seeding.derive_seed(0, 3, 1))
        self.assertLess(seeding.derive_seed(0, 3, 1), 1 << 63)

    def test_numpy_reseeded_when_imported(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy is not installed")
        seeding.seed(1, 2)
        a = np.random.rand(3)
        seeding.seed(1, 2)
        self.assertTrue((a == np.random.rand(3)).all())


if __name__ == "__main__":
    unittest.main()
