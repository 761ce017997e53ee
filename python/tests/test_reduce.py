"""GradientReducer("ddp") computes exactly what torch's DistributedDataParallel computes
(bit for bit, several buckets, after DDP rebuilt its buckets); "flat" (another layout)
does not, which shows the comparison can tell layouts apart."""
import os
import socket
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "support", "reduce_worker.py")

import torch
from torch import nn

from lockstep_train.reduce import GradientReducer


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(mode, world=3, steps=4, accum=False):
    """Final-parameter hashes of every rank, the number of rebuilt buckets and the
    bucket reductions rank 0 started during backward."""
    port = free_port()
    procs = [subprocess.Popen([sys.executable, WORKER, mode, str(r), str(world), str(port), str(steps),
                               "1" if accum else "0"],
                              stdout=subprocess.PIPE, text=True) for r in range(world)]
    try:
        outs = [p.communicate(timeout=120)[0].split() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p in procs:
        if p.returncode != 0:
            raise AssertionError("%s worker exited with %d" % (mode, p.returncode))
    return [o[1] for o in outs], int(outs[0][2]), int(outs[0][3])


class ReduceTest(unittest.TestCase):
    def test_ddp_mode_is_bit_identical_to_distributed_data_parallel(self):
        steps = 4
        ref, _, _ = run("torchddp", steps=steps)
        self.assertEqual(len(set(ref)), 1)
        mine, nbuckets, overlapped = run("ddp", steps=steps)
        self.assertGreaterEqual(nbuckets, 2, "the test model must span several buckets")
        self.assertEqual(mine, ref)
        # Every bucket of every iteration after the first (DDP reduces the first after
        # backward) was launched from a gradient hook, i.e. during backward.
        self.assertEqual(overlapped, nbuckets * (steps - 1))
        late, _, late_overlapped = run("ddp-late", steps=steps)
        self.assertEqual(late, ref)
        self.assertEqual(late_overlapped, 0)
        flat, _, _ = run("flat", steps=steps)
        self.assertNotEqual(flat[0], ref[0], "the run must be sensitive to the bucket layout, "
                            "or equality above proves nothing")

    def test_gradient_accumulation_equals_ddp_no_sync(self):
        ref, _, _ = run("torchddp", accum=True)
        single, _, _ = run("torchddp")
        self.assertNotEqual(ref[0], single[0], "accumulation must change the result")
        # enabled = False around the first micro-batch (job.no_sync()).
        mine, nbuckets, overlapped = run("ddp", accum=True)
        self.assertEqual(mine, ref)
        self.assertEqual(overlapped, nbuckets * 3)
        # Reduced after backward only: the sum is reduced once.
        late, _, _ = run("ddp-late", accum=True)
        self.assertEqual(late, ref)
        # Overlap without no_sync(): the first micro-batch's buckets were launched; the
        # second backward is noticed, those reductions are dropped, the sum reduced once.
        forgot, _, forgot_overlapped = run("ddp-forgot", accum=True)
        self.assertEqual(forgot, ref)
        self.assertGreater(forgot_overlapped, 0)

    def test_layouts(self):
        model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
        red = GradientReducer(model.parameters(), "ddp")
        self.assertEqual(red.first_buckets(), [[0, 1, 2, 3]])
        self.assertEqual(red.rebuilt_buckets([3, 2, 1, 0]), [[3, 2, 1, 0]])
        model(torch.randn(2, 4)).sum().backward()
        self.assertEqual(sorted(red._ready), [0, 1, 2, 3])
        self.assertEqual(red._ready[:2], [3, 2])     # the last layer's gradients are ready first
        red.close()
        with self.assertRaisesRegex(ValueError, "reduction must be one of ddp\\|flat"):
            GradientReducer(model.parameters(), "ring")


if __name__ == "__main__":
    unittest.main()
