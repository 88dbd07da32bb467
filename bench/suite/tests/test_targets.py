"""CPU test of bench/suite/targets.py: each kind of target is met, missed or not measured from
the rows it names, a ratio of two runs says so, and a missing peer row never passes."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from suite import targets as tg  # noqa: E402


def run(commit, date, workload, **systems):
    meta = {"commit": commit, "date": date}
    rows = [{"workload": workload, "system": s, "status": "ok", "ms": ms, "tflops": 1000.0 / ms}
            for s, ms in systems.items()]
    return workload, (meta, rows)


class TargetsFollowTheirRows(unittest.TestCase):
    def test_each_kind_is_met_or_missed_by_its_bound(self):
        best = dict([
            run("a1", "d1", "fwd.s16384.none", fragmask=1.0, fa4=1.02),
            run("a1", "d1", "bwd.s16384.none", fragmask=1.0, fa4=0.97),
            run("a1", "d1", "fwd.s16384.random50", fragmask=1.04, flex=2.0),
            run("b2", "d2", "bwd.s16384.random50", fragmask=1.2),
            run("a1", "d1", "fwd.wu002.blocks10", fragmask=0.7),
        ])
        t = {x.what: x for x in tg.ISSUE24}
        cases = [
            ("forward no mask: at most FA4's time", 1.02, True, "a1, d1"),
            ("backward no mask: at most FA4's time", 0.97, False, "a1, d1"),
            ("forward random 50%: at least 1.6x Flex's speed", 2.0 / 1.04, True, "a1, d1"),
            ("forward random 50%: at most 1.05x our no-mask time", 1.04, True, "a1, d1"),
            ("backward random 50%: at most 1.10x our no-mask time", 1.2, False, "b2, d2 over a1, d1 (two runs)"),
            ("write-up 002 forward, 10% of 64-token blocks: at most 0.65 ms", 0.7, False, "a1, d1"),
            ("forward no mask: at least 700 TF/s", 1000.0, True, "a1, d1"),
        ]
        for what, value, met, runs in cases:
            v, ok, got_runs, why = tg.evaluate(t[what], best)
            self.assertAlmostEqual(v, value, places=6, msg=what)
            self.assertEqual(ok, met, what)
            self.assertEqual(got_runs, runs, what)
            self.assertEqual(why, "", what)

    def test_missing_rows_are_not_measured_never_met(self):
        best = dict([run("a1", "d1", "fwd.s16384.causal", fragmask=1.0)])   # no FA4 row in that run
        t = {x.what: x for x in tg.ISSUE24}
        v, ok, _, why = tg.evaluate(t["forward causal: at most FA4's time"], best)
        self.assertIsNone(v)
        self.assertIsNone(ok)
        self.assertIn("no fa4 row", why)
        v, ok, _, why = tg.evaluate(t["forward no mask: at most FA4's time"], best)
        self.assertIsNone(ok)
        self.assertIn("fwd.s16384.none", why)
        lines, (met, missed, unmeasured) = tg.table(best)
        self.assertEqual((met, missed, unmeasured), (0, 0, len(tg.ISSUE24)))
        self.assertEqual(len(lines), 2 + len(tg.ISSUE24))


if __name__ == "__main__":
    unittest.main()
