"""The user's wrappers and misuse (one process, world size 1, gloo, the in-process fake
coordinator): a kept DistributedDataParallel trains through the library's hook; what the
library cannot protect is refused at track() with a message saying what is supported;
iterating steps() twice and tracking after the first step are errors; the private torch
APIs fail loudly on a torch outside the checked range. Migrations with a kept DDP
wrapper (3 ranks, bit identity with plain DDP) are in test_migration and test_faults."""
import logging
import os
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

import lockstep_train as ls  # noqa: E402
from lockstep_train import _torch_private as private  # noqa: E402
from support.fake_coordinator import FakeCoordinator  # noqa: E402

DDP = nn.parallel.DistributedDataParallel


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


class WrapperTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeCoordinator(world_size=1)
        logging.getLogger("lockstep_train").setLevel(logging.ERROR)
        self.job = ls.join(coordinator=self.fake.url, rank=0, world_size=1)

    def tearDown(self):
        self.job.close()
        self.fake.stop()

    def train(self, model, opt, steps, wrapped):
        job = self.job
        for step in job.steps(steps):
            with job.step_guard():
                ls.seed(step, job.rank)
                model(torch.randn(3, 4)).sum().backward()
                if not wrapped:
                    job.all_reduce_gradients()
                opt.step()
                opt.zero_grad()

    # -- a kept DDP wrapper ---------------------------------------------------------------
    def test_a_kept_ddp_wrapper_trains_through_the_library_hook(self):
        job = self.job
        model = net()
        ddp = DDP(model, process_group=job.ddp_group)
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        job.track(ddp, opt)
        self.assertIs(job._state.model, model)          # the state is the inner module's
        seen = {}                                        # step -> DDP's buckets, as parameter indices
        inner = job._ddp._reduce_bucket
        job._ddp._reduce_bucket = lambda b: seen.setdefault(job.step, []).append(
            [job._ddp.pos[id(p)] for p in b.parameters()]) or inner(b)
        self.train(ddp, opt, 4, wrapped=True)
        self.assertEqual(job.step, 4)
        self.assertEqual(sorted(seen), [0, 1, 2, 3])     # DDP called the library's hook every step
        self.assertEqual(job._ddp.slow_iterations, 0)
        # Step 0: DDP's one bucket in parameter order; then the buckets DDP rebuilt are
        # the ones the library computed from step 0's gradient-ready order (and the
        # recording hooks are gone).
        self.assertEqual(seen[0], [[0, 1, 2, 3]])
        self.assertIsNotNone(job._reducer.rebuilt)
        for step in (1, 2, 3):
            self.assertEqual(seen[step], job._reducer.rebuilt)
        self.assertNotEqual(job._reducer.rebuilt, seen[0])
        self.assertEqual(job._reducer._hooks, [])

        # The same loop without the library, plain DDP on a world of one (a reference that
        # the hook's 1/world_size scaling and reduction leave the numbers alone).
        ref = net()
        ropt = torch.optim.Adam(ref.parameters(), lr=0.1)
        for step in range(4):
            ls.seed(step, 0)
            ref(torch.randn(3, 4)).sum().backward()
            ropt.step()
            ropt.zero_grad()
        for a, b in zip(model.parameters(), ref.parameters()):
            self.assertTrue(torch.equal(a, b))

    def test_all_reduce_gradients_with_a_ddp_wrapper_is_an_error(self):
        model = net()
        self.job.track(DDP(model, process_group=self.job.ddp_group), torch.optim.SGD(model.parameters(), lr=0.1))
        with self.assertRaisesRegex(ls.UsageError, "DDP already reduced the gradients"):
            for _ in self.job.steps(1):
                with self.job.step_guard():      # a usage error is not taken for a failed collective
                    self.job.all_reduce_gradients()
        self.assertEqual(self.job.generation, 0)

    # -- refused at track() ---------------------------------------------------------------
    def assert_refused(self, model, *why):
        with self.assertRaises(ls.UnsupportedWrapper) as cm:
            self.job.track(model, None)
        msg = str(cm.exception)
        for w in why + ("supported: a plain torch.nn.Module", "process_group=job.ddp_group"):
            self.assertIn(w, msg)

    def test_ddp_on_a_group_the_library_does_not_own_is_refused(self):
        other = private.local_process_group(__import__("datetime").timedelta(seconds=5))
        self.assert_refused(DDP(net(), process_group=other), "a process group the library does not own")

    def test_ddp_options_the_library_does_not_reproduce_are_refused(self):
        self.assert_refused(DDP(net(), process_group=self.job.ddp_group, find_unused_parameters=True),
                            "find_unused_parameters=True")
        self.assert_refused(DDP(net(), process_group=self.job.ddp_group, gradient_as_bucket_view=True),
                            "gradient_as_bucket_view=True")

    def test_ddp_with_its_own_comm_hook_is_refused(self):
        def users_hook(state, bucket):
            return torch.futures.Future()
        ddp = DDP(net(), process_group=self.job.ddp_group)
        ddp.register_comm_hook(None, users_hook)
        self.assert_refused(ddp, "a communication hook of its own")

    def test_a_ddp_nested_inside_the_model_is_refused(self):
        outer = nn.Sequential(DDP(net(), process_group=self.job.ddp_group), nn.Linear(2, 2))
        self.assert_refused(outer, "submodule '0'", "nested inside the model")

    def test_a_fully_sharded_model_is_refused(self):
        try:
            from torch.distributed.fsdp import fully_shard          # torch >= 2.6
        except (ImportError, ValueError) as e:   # 1.13 on Python 3.11: its fsdp package fails to import
            self.skipTest("no torch.distributed.fsdp.fully_shard in torch %s (%s)" % (torch.__version__, e))
        # fully_shard needs a default group (a device mesh over it); the job's is formed
        # by job.steps(), so this test makes one of its own and frees it before track().
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            model = net()
            fully_shard(model)
        finally:
            dist.destroy_process_group()
        self.assert_refused(model, "the model: FSDP / fully_shard shards the parameters")

    def test_sharded_parameters_are_refused(self):
        try:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.tensor import DTensor, Replicate
        except ImportError:
            self.skipTest("no torch.distributed.tensor in torch %s" % torch.__version__)
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            mesh = init_device_mesh("cpu", (1,))
            model = net()
            model[0].weight = nn.Parameter(DTensor.from_local(model[0].weight.detach(), mesh, [Replicate()]))
        finally:
            dist.destroy_process_group()
        self.assert_refused(model, "parameter '0.weight': a DTensor")

    def test_something_that_is_not_a_module_is_refused(self):
        self.assert_refused(lambda x: x, "a function (not a torch.nn.Module)")

    # -- misuse -----------------------------------------------------------------------------
    def test_iterating_steps_twice_is_an_error(self):
        model = net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.job.track(model, opt)
        self.train(model, opt, 2, wrapped=False)
        with self.assertRaisesRegex(ls.UsageError, "iterated once per process"):
            for _ in self.job.steps(4):
                pass

    def test_tracking_after_the_first_step_is_an_error(self):
        model = net()
        self.job.track(model, None)
        with self.assertRaisesRegex(ls.UsageError, r"job.track\(\) after job.steps\(\) started"):
            for _ in self.job.steps(3):
                with self.job.step_guard():
                    self.job.track(model, None)

    def test_steps_before_track_is_an_error(self):
        with self.assertRaisesRegex(RuntimeError, r"call job.track\(model, optimizer\) first"):
            for _ in self.job.steps(1):
                pass


def torch_2_15():
    return private.torch_version() >= (2, 15)


class ShardedLayoutTest(unittest.TestCase):
    """job.device_mesh() (FSDP2 / HSDP): what is accepted and what is refused at
    device_mesh() and track(). One process as rank 0 of 4 (the mesh is built before any
    group forms: no peers are needed until job.steps())."""

    def setUp(self):
        self.fake = FakeCoordinator(world_size=4)
        logging.getLogger("lockstep_train").setLevel(logging.ERROR)
        self.job = ls.join(coordinator=self.fake.url, rank=0, world_size=4)

    def tearDown(self):
        self.job.close()
        self.fake.stop()

    def test_device_mesh_needs_torch_2_15(self):
        if torch_2_15():
            self.skipTest("torch %s has what job.device_mesh() needs" % torch.__version__)
        with self.assertRaisesRegex(ls.UnsupportedWrapper, r"needs torch >= 2.15.*Plain data parallel"):
            self.job.device_mesh(replicate=2, shard=2)

    def sharded_model(self, mesh):
        from torch.distributed.fsdp import fully_shard
        model = net()
        fully_shard(model[0], mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model

    def test_hsdp_on_the_job_mesh_is_accepted_and_pure_fsdp_is_refused(self):
        if not torch_2_15():
            self.skipTest("FSDP2 / HSDP needs torch >= 2.15 (this is %s)" % torch.__version__)
        with self.assertRaisesRegex(ls.UnsupportedWrapper, r"pure FSDP, no second copy.*supported sharded layouts"):
            self.job.device_mesh(replicate=1, shard=4)
        with self.assertRaisesRegex(ValueError, "has 8 ranks, the job 4"):
            self.job.device_mesh(replicate=2, shard=4)
        mesh = self.job.device_mesh(replicate=2, shard=2, mesh_dim_names=("dp_replicate", "dp_shard"))
        self.assertEqual(mesh.mesh_dim_names, ("dp_replicate", "dp_shard"))
        self.assertEqual(mesh.mesh.tolist(), [[0, 1], [2, 3]])
        with self.assertRaisesRegex(ls.UsageError, "already called"):
            self.job.device_mesh(replicate=2, shard=2)
        model = self.sharded_model(mesh)
        self.assertEqual(tuple(model[0].weight.to_local().shape), (4, 4))   # rank 0 holds rows 0-3 of 8
        opt = torch.optim.Adam(model.parameters())
        self.job.track(model, opt)
        self.assertTrue(self.job._sharded)
        with self.assertRaisesRegex(ls.UsageError, "FSDP2 already reduced"):
            self.job.all_reduce_gradients()
        with self.assertRaisesRegex(ls.UsageError, "set_requires_gradient_sync"):
            with self.job.no_sync():
                pass

    def test_pure_fsdp_needs_the_buddy_mirror(self):
        if not torch_2_15():
            self.skipTest("FSDP2 needs torch >= 2.15 (this is %s)" % torch.__version__)
        with self.assertRaisesRegex(ls.UnsupportedWrapper, r"pass mirror_every=K"):
            self.job.device_mesh(replicate=1, shard=4)
        with self.assertRaisesRegex(ls.UnsupportedWrapper, r"the buddy mirror is for pure FSDP"):
            self.job.device_mesh(replicate=2, shard=2, mirror_every=5)
        for bad in (0, -1, 2.5, True):
            with self.assertRaisesRegex(ValueError, "a number of steps >= 1"):
                self.job.device_mesh(replicate=1, shard=4, mirror_every=bad)
        mesh = self.job.device_mesh(replicate=1, shard=4, mirror_every=5)
        self.assertEqual(mesh.mesh.tolist(), [[0, 1, 2, 3]])
        self.assertEqual(self.job.mirror_every, 5)
        model = self.sharded_model(mesh)
        self.assertEqual(tuple(model[0].weight.to_local().shape), (2, 4))   # rank 0 holds rows 0-1 of 8
        self.job.track(model, torch.optim.Adam(model.parameters()))
        self.assertTrue(self.job._sharded)

    def test_layouts_the_library_does_not_own_are_refused(self):
        if not torch_2_15():
            self.skipTest("FSDP2 / HSDP needs torch >= 2.15 (this is %s)" % torch.__version__)
        from torch.distributed.tensor import DTensor, Replicate, Shard
        mesh = self.job.device_mesh(replicate=2, shard=2)

        def refused(model, *why):
            with self.assertRaises(ls.UnsupportedWrapper) as cm:
                self.job.track(model, None)
            for w in why + ("supported sharded layouts", "job.device_mesh(replicate=R"):
                self.assertIn(w, str(cm.exception))
        refused(net(), "has no parameter sharded on it")
        # a parameter on another mesh (here the shard dimension alone, as a tensor-parallel
        # layout would put it), one placed otherwise, one left unsharded
        model = net()
        model[0].weight = nn.Parameter(DTensor.from_local(model[0].weight.detach(), mesh["shard"], [Shard(0)]))
        refused(model, "parameter '0.weight'", "a device mesh", "the library does not own")
        model = net()
        model[0].weight = nn.Parameter(DTensor.from_local(model[0].weight.detach(), mesh, [Replicate(), Replicate()]))
        refused(model, "parameter '0.weight' placed")
        from torch.distributed.fsdp import fully_shard
        model = net()
        fully_shard(model[0], mesh=mesh)
        refused(model, "parameter '2.weight': not sharded")


class PrivateTorchTest(unittest.TestCase):
    """_torch_private fails loudly outside the torch versions it was checked on."""

    def test_a_torch_outside_the_checked_range_is_refused_by_name(self):
        for v in ("1.12.1", "2.16.0", "3.0.0"):
            with mock.patch.dict(os.environ, {"LOCKSTEP_UNCHECKED_TORCH": ""}):
                with self.assertRaisesRegex(private.UnsupportedTorch,
                                            r"needs dist._X, a private torch API checked on torch 1.13 to 2.15 "
                                            r"only; this is torch " + v.replace(".", r"\.")):
                    private.require("dist._X", version=v)

    def test_the_override_tries_anyway_with_a_warning(self):
        with mock.patch.dict(os.environ, {"LOCKSTEP_UNCHECKED_TORCH": "1"}):
            with self.assertLogs("lockstep_train", "WARNING") as logs:
                private.require("dist._Y", version="2.16.0")
        self.assertIn("trying anyway", logs.output[0])

    def test_a_missing_private_api_is_named(self):
        with self.assertRaisesRegex(private.UnsupportedTorch, "needs dist._Z, which torch 2.15.0 does not have"):
            private.require("dist._Z", present=False, version="2.15.0")

    def test_this_torch_is_in_the_checked_range(self):
        private.require("nothing")          # the test command runs both ends of the range
        self.assertIn(private.torch_version(), [(1, 13), (2, 15)])


if __name__ == "__main__":
    unittest.main()
