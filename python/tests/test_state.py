"""State transfer pieces: flatten/unflatten, optimizer state materialised on a fresh
optimizer, meta records (RNG, extra, hyperparameters), receive layouts that change
nothing live, fingerprints and buckets."""
import random
import unittest

import torch
from torch import nn

from lockstep_train import state as st


def build(seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, opt


def train(model, opt, steps):
    g = torch.Generator().manual_seed(3)
    for _ in range(steps):
        x = torch.randn(5, 6, generator=g)
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()


class Scheduler:
    def __init__(self):
        self.epoch = 0

    def state_dict(self):
        return {"epoch": self.epoch}

    def load_state_dict(self, d):
        self.epoch = d["epoch"]


class StateTest(unittest.TestCase):
    def test_flatten_round_trip_keeps_dtypes_and_shapes(self):
        ts = [torch.randn(3, 4), torch.arange(5, dtype=torch.int64), torch.randn(2), torch.tensor(7.0)]
        flats = st.flatten(ts)
        self.assertEqual([d for d, _ in flats], [torch.float32, torch.int64])
        self.assertEqual(flats[0][1].numel(), 12 + 2 + 1)
        out = [torch.zeros_like(t) for t in ts]
        st.unflatten_into(out, flats)
        for a, b in zip(ts, out):
            self.assertTrue(torch.equal(a, b))

    def test_pack_round_trip_aligns_mixed_dtypes(self):
        ts = [torch.tensor([True, False, True]), torch.randn(3, 5), torch.tensor(4.0),
              torch.arange(3, dtype=torch.int16), torch.arange(7, dtype=torch.int64)]
        packed = st.pack(ts)
        self.assertEqual(packed.dtype, torch.uint8)
        self.assertEqual(packed.numel(), 8 + 64 + 8 + 8 + 56)   # each tensor padded to 8 bytes
        out = [torch.zeros_like(t) for t in ts]
        st.unpack_into(out, packed)
        for a, b in zip(ts, out):
            self.assertTrue(torch.equal(a, b))
        ts[1].add_(1)                                   # a copy, not a view of the live tensors
        self.assertFalse(torch.equal(out[1], ts[1]))
        with self.assertRaisesRegex(ValueError, "snapshot"):
            st.unpack_into(out[:2], packed)

    def test_snapshot_restores_a_rank_to_its_step(self):
        # the buddy mirror: a snapshot of step 2, training on, then back to step 2 (own
        # copy) or onto a fresh optimizer (a spare): either equals the state at step 2
        model, opt = build(1)
        extra = {"data_position": 2}
        ts = st.TrackedState(model, opt, extra)
        train(model, opt, 2)
        snap_meta, packed = ts.meta(2), st.pack(ts.sync_tensors())
        want = [t.clone() for t in ts.sync_tensors()]
        rng = torch.get_rng_state()
        train(model, opt, 3)
        extra["data_position"] = 5
        torch.manual_seed(99)
        ts.apply_snapshot(snap_meta, packed)
        for a, b in zip(want, ts.sync_tensors()):
            self.assertTrue(torch.equal(a, b))
        self.assertEqual(extra, {"data_position": 2})
        self.assertTrue(torch.equal(torch.get_rng_state(), rng))
        fresh_model, fresh_opt = build(2)
        fresh = st.TrackedState(fresh_model, fresh_opt, {})
        fresh.apply_snapshot(snap_meta, packed)
        for a, b in zip(want, fresh.sync_tensors()):
            self.assertTrue(torch.equal(a, b))

    def test_unflatten_rejects_a_size_mismatch(self):
        flats = st.flatten([torch.randn(4)])
        with self.assertRaisesRegex(ValueError, "buffer has 4 elements, the tensors 3"):
            st.unflatten_into([torch.zeros(3)], flats)

    def test_fresh_optimizer_receives_adam_state(self):
        src_model, src_opt = build(1)
        train(src_model, src_opt, 3)
        src_opt.param_groups[0]["lr"] = 0.005            # a scheduler changed it
        extra_src = {"data_position": 123}
        src = st.TrackedState(src_model, src_opt, extra_src)
        random.seed(11)
        torch.manual_seed(12)
        meta = st.decode_meta(st.encode_meta(src.meta(3)))
        want_rand = (random.random(), torch.rand(2))
        flats = st.flatten(src.sync_tensors())

        dst_model, dst_opt = build(2)                    # different init, no Adam state yet
        self.assertEqual(len(dst_opt.state), 0)
        extra_dst = {"data_position": 0, "stale": 1}
        dst = st.TrackedState(dst_model, dst_opt, extra_dst)
        layout = dst.receive_layout(meta)
        self.assertEqual([torch.Size(s) for s, _, _ in layout], [t.shape for t in src.sync_tensors()])
        self.assertEqual(len(dst_opt.state), 0)          # the layout changes nothing
        received = st.allocate(layout)
        self.assertEqual([(d, f.numel()) for d, f in received], [(d, f.numel()) for d, f in flats])
        for (_, r), (_, f) in zip(received, flats):
            r.copy_(f)
        random.seed(0)
        torch.manual_seed(0)
        dst.apply_received(meta, received)
        self.assertEqual((random.random(), ), (want_rand[0], ))
        self.assertTrue(torch.equal(torch.rand(2), want_rand[1]))
        self.assertEqual(extra_dst, {"data_position": 123})
        self.assertEqual(dst_opt.param_groups[0]["lr"], 0.005)
        for a, b in zip(src_model.state_dict().values(), dst_model.state_dict().values()):
            self.assertTrue(torch.equal(a, b))
        # The next step is the same on both: Adam state (exp_avg, exp_avg_sq, step) arrived.
        train(src_model, src_opt, 2)
        train(dst_model, dst_opt, 2)
        for a, b in zip(src_model.parameters(), dst_model.parameters()):
            self.assertTrue(torch.equal(a, b))

    def test_source_without_state_clears_a_receivers_state(self):
        src_model, src_opt = build(1)
        dst_model, dst_opt = build(1)
        train(dst_model, dst_opt, 1)
        dst = st.TrackedState(dst_model, dst_opt)
        src = st.TrackedState(src_model, src_opt)
        dst.apply_received(src.meta(0), st.flatten(src.sync_tensors()))
        self.assertEqual(len(dst_opt.state), 0)
        self.assertEqual(len(dst.sync_tensors()), len(list(dst_model.parameters())) + 3)

    def test_receive_layout_changes_nothing_live(self):
        """A receiver's state is untouched until apply_received(): the layout of a source
        whose optimizer has state neither wipes nor creates this member's state."""
        src_model, src_opt = build(1)
        train(src_model, src_opt, 2)
        dst_model, dst_opt = build(2)
        train(dst_model, dst_opt, 1)
        before = [t.clone() for t in st.TrackedState(dst_model, dst_opt).sync_tensors()]
        dst = st.TrackedState(dst_model, dst_opt)
        dst.receive_layout(st.TrackedState(src_model, src_opt).meta(2))
        after = dst.sync_tensors()
        self.assertEqual(len(before), len(after))
        for a, b in zip(before, after):
            self.assertTrue(torch.equal(a, b))

    def test_fingerprint_sees_every_word_and_order(self):
        t = torch.randn(1000)
        fp = st.fingerprint(t)
        self.assertEqual(fp, st.fingerprint(t.clone()))
        for i in (0, 1, 499, 999):                       # one word changed, anywhere
            u = t.clone()
            u[i] = torch.nextafter(u[i], torch.tensor(1e9))   # the smallest change there is
            a, b = st.fingerprint(u)
            self.assertNotEqual(a, fp[0])
            self.assertNotEqual(b, fp[1])
        d = torch.randn(100, dtype=torch.float64)         # one value a word
        u = d.clone()
        u[[3, 4]] = u[[4, 3]]                             # two words swapped: s2 sees it
        self.assertEqual(st.fingerprint(u)[0], st.fingerprint(d)[0])
        self.assertNotEqual(st.fingerprint(u)[1], st.fingerprint(d)[1])
        self.assertNotEqual(st.fingerprint(torch.zeros(3)), st.fingerprint(torch.zeros(5)[:3] + 1))
        big = torch.randn(st.FP_CHUNK * 2 + 7, dtype=torch.float64)   # several chunks
        c = big.clone()
        c[st.FP_CHUNK + 1] += 1
        self.assertNotEqual(st.fingerprint(big), st.fingerprint(c))

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device here")
    def test_fingerprint_is_the_same_on_cpu_and_cuda(self):
        # A source and a receiver may hold their state on different devices: the digest
        # of the same bytes must not depend on where they are.
        g = torch.Generator().manual_seed(3)
        for t in (torch.randn(1000, generator=g), torch.randn(3, 7, generator=g).double(),
                  torch.randint(-9, 9, (77,), generator=g, dtype=torch.int32), torch.zeros(0)):
            self.assertEqual(st.fingerprint(t), st.fingerprint(t.cuda()))

    def test_state_fingerprint_equal_for_replicas_only(self):
        a_model, a_opt = build(1)
        b_model, b_opt = build(1)
        train(a_model, a_opt, 2)
        train(b_model, b_opt, 2)
        a, b = st.TrackedState(a_model, a_opt), st.TrackedState(b_model, b_opt)
        self.assertEqual(a.fingerprint(), b.fingerprint())
        with torch.no_grad():                            # optimizer state differs
            next(iter(b_opt.state.values()))["exp_avg"].view(-1)[0] += 1e-6
        self.assertNotEqual(a.fingerprint(), b.fingerprint())

    def test_buckets_cut_flats_into_views(self):
        flats = st.flatten([torch.randn(10), torch.arange(3)])
        bs = st.buckets(flats, 16)                        # 4 floats, 2 int64s a bucket
        self.assertEqual([b.numel() for b in bs], [4, 4, 2, 2, 1])
        bs[0].fill_(0)
        self.assertTrue(torch.equal(flats[0][1][:4], torch.zeros(4)))   # views, not copies

    def test_extra_object_with_state_dict(self):
        model, opt = build(1)
        a, b = Scheduler(), Scheduler()
        a.epoch = 4
        meta = st.TrackedState(model, opt, a).meta(0)
        src = st.TrackedState(model, opt, a)
        st.TrackedState(model, opt, b).apply_received(meta, st.flatten(src.sync_tensors()))
        self.assertEqual(b.epoch, 4)

    def test_mismatched_models_are_refused(self):
        model, opt = build(1)
        other = torch.optim.Adam(nn.Linear(2, 2).parameters())
        with self.assertRaisesRegex(ValueError, "not parameters of the model"):
            st.TrackedState(model, other)
        small = nn.Linear(6, 3)
        small_opt = torch.optim.Adam(small.parameters())
        train(model, opt, 1)
        meta = st.TrackedState(model, opt).meta(1)
        with self.assertRaisesRegex(ValueError, "every member must build the same model"):
            st.TrackedState(small, small_opt).receive_layout(meta)
        with self.assertRaisesRegex(TypeError, "track\\(extra=...\\)"):
            st.TrackedState(model, opt, extra=5)


if __name__ == "__main__":
    unittest.main()
