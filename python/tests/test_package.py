"""The installed package: the tests import lockstep_train as installed from its wheel
(python/CMakeLists.txt), never from the source tree; it carries its version, py.typed
and type hints on the public API."""
import importlib.metadata
import inspect
import os
import unittest

import lockstep_train as ls
from lockstep_train import client, job, state


class PackageTest(unittest.TestCase):
    def test_installed_not_source(self):
        source = os.environ.get("LOCKSTEP_PACKAGE_SOURCE")   # set by ctest: python/
        if not source:
            self.skipTest("not under ctest (LOCKSTEP_PACKAGE_SOURCE unset)")
        here = os.path.realpath(ls.__file__)
        self.assertFalse(here.startswith(os.path.realpath(source) + os.sep),
                         "lockstep_train imported from the source tree: %s" % here)

    def test_version(self):
        self.assertRegex(ls.__version__, r"^\d+\.\d+\.\d+")
        try:
            installed = importlib.metadata.version("lockstep-train")
        except importlib.metadata.PackageNotFoundError:
            self.skipTest("lockstep_train is not installed (imported from a path)")
        self.assertEqual(installed, ls.__version__)

    def test_py_typed(self):
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(ls.__file__), "py.typed")))

    def test_public_api_annotated(self):
        """Every parameter and the return of the public functions and methods has a hint."""
        def public(cls):
            return [f for n, f in vars(cls).items() if not n.startswith("_") and inspect.isfunction(f)]
        funcs = [ls.join, ls.seed, ls.derive_seed, ls.parse_plan, ls.parse_directive,
                 job.Job.__init__, *public(job.Job), job.Exit.__init__,
                 client.CoordinatorClient.__init__, *public(client.CoordinatorClient),
                 state.TrackedState.__init__, *public(state.TrackedState),
                 ls.GradientReducer.__init__, *public(ls.GradientReducer)]
        funcs += [p.fget for p in (job.Job.failed, job.Job.store_port)]
        missing = []
        for f in funcs:
            sig = inspect.signature(f)
            for name, p in sig.parameters.items():
                if name != "self" and p.annotation is inspect.Parameter.empty:
                    missing.append("%s(%s)" % (f.__qualname__, name))
            if sig.return_annotation is inspect.Signature.empty:
                missing.append("%s -> ?" % f.__qualname__)
        self.assertEqual(missing, [])


if __name__ == "__main__":
    unittest.main()
