"""CPU tests of the interleaved A/B (``run.py --ab A B --interleave``), with two fake
``fragmask`` binaries: Python scripts that take the CLI's arguments (``bench attention ...
--json``, ``pack ... -o FILE -q``), log each call and print a fixed ``ms_median``.

No torch here: the workloads used are the mask kinds whose command needs no host-side
draws (none, causal); the packed-mask path (documents) is driven through
``attention.cli_command`` with the document ids given as a numpy array.
"""
import argparse
import io
import json
import os
import stat
import sys
import tempfile
import unittest
from contextlib import redirect_stdout
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from suite import ab, interleave, workloads as wl  # noqa: E402
from suite.routines import attention  # noqa: E402

# The fake binary: logs {bin, args, mask} per call; `pack` writes its -o file; `bench` prints
# a line of noise, then the JSON line with the n-th of its times (cycled; n counts its own
# bench calls), or fails with status 3 when an argument equals FAIL_ON.
FAKE = r'''#!{python}
import json, os, sys
LOG, NAME, TIMES, FAIL_ON = {log!r}, {name!r}, {times!r}, {fail_on!r}
args = sys.argv[1:]
mask = None
if "--mask" in args:
    with open(args[args.index("--mask") + 1]) as f:
        mask = f.read()
with open(LOG, "a") as f:
    f.write(json.dumps({{"bin": NAME, "args": args, "mask": mask}}) + "\n")
if args[0] == "pack":
    with open(args[args.index("-o") + 1], "w") as f:
        f.write("packed by " + NAME + ": " + " ".join(args))
    sys.exit(0)
if FAIL_ON and FAIL_ON in args:
    sys.stderr.write("boom: no kernel for this mask\n")
    sys.exit(3)
with open(LOG) as f:
    n = sum(1 for x in f if json.loads(x)["bin"] == NAME and json.loads(x)["args"][0] == "bench") - 1
print("timing ...")
print(json.dumps({{"ms_median": TIMES[n % len(TIMES)], "kernel": "fwd_" + NAME}}))
'''


def fake_binary(folder, name, log, times, fail_on=""):
    path = os.path.join(folder, "fragmask")
    os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        f.write(FAKE.format(python=sys.executable, log=log, name=name, times=times, fail_on=fail_on))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    with open(os.path.join(folder, "COMMIT"), "w") as f:
        f.write(f"commit{name}\n")
    return path


def calls(log):
    with open(log) as f:
        return [json.loads(x) for x in f]


class Interleaved(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fm_ab_test_")
        self.log = os.path.join(self.tmp, "calls.jsonl")
        _, self.workloads = wl.load()

    def tearDown(self):
        import shutil
        shutil.rmtree(self.tmp)

    def builds(self, times_b=(1.1,), fail_on_b=""):
        a = os.path.join(self.tmp, "A")
        b = os.path.join(self.tmp, "B")
        fake_binary(a, "A", self.log, [1.0])
        fake_binary(b, "B", self.log, list(times_b), fail_on_b)
        return a, b

    def ab(self, names, rounds, builds, systems="fragmask_cli"):
        """``run.py --ab A B --interleave`` on the named workloads; (JSON file, stdout)."""
        selected = [w for w in self.workloads if w["name"] in names]
        self.assertEqual(len(selected), len(names))
        out = os.path.join(self.tmp, "out")
        args = argparse.Namespace(ab=list(builds), interleave=True, rounds=rounds, systems=systems,
                                  out=out, warmup=1, warmup_ms=0, iters=2, fa4=None, budget_s=0)
        # The subprocess's stdout goes to the real stdout; capture it at the file level.
        with tempfile.TemporaryFile("w+") as text, redirect_stdout(text):
            with mock.patch.object(ab.subprocess, "run",
                                   side_effect=lambda cmd, **kw: real_run(cmd, **{**kw, "stdout": text})):
                self.assertEqual(ab.run(args, selected), 0)
            text.seek(0)
            printed = text.read()
        (path,) = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".json")]
        self.assertRegex(os.path.basename(path), r"^ab-\d{4}-\d\d-\d\d-\d{4}-commitA-vs-commitB\.json$")
        with open(path) as f:
            return json.load(f), printed

    def test_each_row_runs_its_two_binaries_in_abba_order_back_to_back(self):
        self.ab(["fwd.s16384.none", "fwd.s16384.causal"], 3, self.builds())
        bench = [c for c in calls(self.log) if c["args"][0] == "bench"]
        rows = [[c["bin"] for c in bench if ("--causal" in c["args"]) == causal] for causal in (False, True)]
        self.assertEqual(rows, [list("ABBAAB")] * 2)
        # One row's calls all come before the next row's: the pairs of a row are adjacent.
        self.assertEqual(["--causal" in c["args"] for c in bench], [False] * 6 + [True] * 6)

    def test_ratio_is_the_median_of_b_over_a_over_adjacent_pairs_with_its_spread(self):
        report, printed = self.ab(["fwd.s16384.none"], 3, self.builds(times_b=(1.1, 1.3, 1.0)))
        (row,) = report["rows"]
        self.assertEqual(row["key"], ["fwd.s16384.none", "fragmask_cli", ""])
        self.assertAlmostEqual(row["ratio"], 1.1)
        self.assertAlmostEqual(row["min"], 1.0)
        self.assertAlmostEqual(row["max"], 1.3)
        self.assertEqual(row["rounds"], 3)
        self.assertAlmostEqual(row["a_ms"], 1.0)
        self.assertAlmostEqual(row["b_ms"], 1.1)
        self.assertEqual((report["a"], report["b"], report["rounds"], report["interleaved"]),
                         ("commitA", "commitB", 3, True))
        self.assertIn("| fwd.s16384.none | fragmask_cli | 1.0000 | 1.1000 | 1.100 | 1.000–1.300 (3) |", printed)
        self.assertIn("spread over pairs", printed)

    def test_a_fixed_b_over_a_of_1_1_is_reported_as_1_1_with_no_spread(self):
        report, _ = self.ab(["fwd.s16384.none"], 4, self.builds())
        (row,) = report["rows"]
        self.assertEqual((round(row["ratio"], 9), round(row["min"], 9), round(row["max"], 9), row["rounds"]),
                         (1.1, 1.1, 1.1, 4))

    def test_a_row_failing_in_b_is_listed_with_its_reason_and_the_other_rows_still_compare(self):
        report, printed = self.ab(["fwd.s16384.none", "fwd.s16384.causal"], 2, self.builds(fail_on_b="--causal"))
        rows = {r["key"][0]: r for r in report["rows"]}
        self.assertAlmostEqual(rows["fwd.s16384.none"]["ratio"], 1.1)
        self.assertIsNone(rows["fwd.s16384.causal"]["ratio"])
        (failed,) = report["not_run"]
        self.assertEqual((failed["key"][0], failed["status"]), ("fwd.s16384.causal", "failed"))
        self.assertIn("B: CliFailed: rc 3: boom: no kernel for this mask", failed["note"])
        self.assertIn("# failed: fwd.s16384.causal (fragmask_cli): PairFailed: B: CliFailed: rc 3", printed)
        self.assertIn("| fwd.s16384.causal | fragmask_cli | | | not in both builds | |", printed)

    def test_both_binaries_get_the_identical_command_apart_from_the_binary(self):
        a, b = self.builds()
        self.ab(["fwd.s16384.causal"], 2, (a, b))
        bench = [c for c in calls(self.log) if c["args"][0] == "bench"]
        self.assertEqual(len(bench), 4)
        self.assertEqual({json.dumps(c["args"]) for c in bench}, {json.dumps(bench[0]["args"])})
        self.assertIn("--causal", bench[0]["args"])

    def test_a_packed_mask_is_packed_once_by_a_and_read_by_both_from_the_same_file(self):
        a, b = self.builds()
        p = {"seqlen": 1024, "heads": 2, "dim": 64, "mask": "docs:3"}
        ids = mock.Mock()
        ids.numpy.return_value = np.repeat(np.arange(3, dtype=np.int32), [300, 400, 324])
        with tempfile.TemporaryDirectory() as tmp:
            cmd = attention.cli_command(os.path.join(a, "fragmask"), p, {"doc_ids": ids}, 1, 2, tmp)
            ms, _ = interleave.time_pairs(cmd, {"A": os.path.join(a, "fragmask"), "B": os.path.join(b, "fragmask")},
                                          2, attention.run_cli)
        self.assertEqual(ms, {"A": [1.0, 1.0], "B": [1.1, 1.1]})
        log = calls(self.log)
        self.assertEqual([(c["bin"], c["args"][0]) for c in log],
                         [("A", "pack"), ("A", "bench"), ("B", "bench"), ("B", "bench"), ("A", "bench")])
        packed = log[0]["args"][log[0]["args"].index("-o") + 1]
        for c in log[1:]:
            self.assertEqual(c["args"], log[1]["args"])
            self.assertEqual(c["args"][c["args"].index("--mask") + 1], packed)
            self.assertTrue(c["mask"].startswith("packed by A: pack --predicate causal,doc="))

    def test_the_normal_cli_row_runs_the_command_the_interleaved_side_a_runs(self):
        a, _ = self.builds()
        ctx = argparse.Namespace(bin=os.path.join(a, "fragmask"), warmup=1, iters=2)
        (w,) = [w for w in self.workloads if w["name"] == "fwd.s16384.window1024"]
        r = attention.cli(ctx, w["params"], {}, 1.0)
        self.assertEqual((r["status"], r["ms"], r["kernel"]), ("ok", 1.0, "fwd_A"))
        with tempfile.TemporaryDirectory() as tmp:
            cmd = interleave.command(w, "fragmask_cli", ctx.bin, 1, 2, tmp)
        self.assertEqual(calls(self.log)[0]["args"], cmd[1:])

    def test_a_timed_warm_up_reaches_the_binary_and_both_sides_run_it(self):
        from suite import common
        a, b = self.builds()
        (w,) = [w for w in self.workloads if w["name"] == "fwd.s16384.window1024"]
        saved = common.WARMUP_MS
        try:
            with tempfile.TemporaryDirectory() as tmp:
                common.WARMUP_MS = 0
                plain = interleave.command(w, "fragmask_cli", os.path.join(a, "fragmask"), 1, 2, tmp)
                common.WARMUP_MS = 750
                warm = interleave.command(w, "fragmask_cli", os.path.join(a, "fragmask"), 1, 2, tmp)
                interleave.time_pairs(warm, {"A": os.path.join(a, "fragmask"), "B": os.path.join(b, "fragmask")},
                                      1, attention.run_cli)
        finally:
            common.WARMUP_MS = saved
        self.assertNotIn("--warmup-ms", plain)
        self.assertEqual(warm[warm.index("--warmup-ms") + 1], "750")
        self.assertEqual([c["args"] for c in calls(self.log)], [warm[1:], warm[1:]])

    def test_rows_that_cannot_interleave_are_reported_as_not_interleaved(self):
        report, printed = self.ab(["fwd.s16384.none", "dec.cli.serving"], 1, self.builds(),
                                  systems="fragmask,fragmask_cli")
        statuses = {(n["key"][0], n["key"][1]): n["status"] for n in report["not_run"]}
        self.assertEqual(statuses, {("fwd.s16384.none", "fragmask"): "not_interleaved",
                                    ("dec.cli.serving", "fragmask_cli"): "not_interleaved"})
        self.assertEqual([r["key"][0] for r in report["rows"]], ["fwd.s16384.none"])
        self.assertIn("# not interleaved: dec.cli.serving (fragmask_cli)", printed)
        self.assertIn("# not interleaved: fwd.s16384.none (fragmask)", printed)

    def test_the_report_counts_an_interleaved_ab_in_abba_pairs(self):
        from suite import report
        key = ("slow", "fragmask_cli", "")
        d = {"a": "base", "b": "new", "rounds": 3, "interleaved": True, "file": "ab-1.json",
             "rows": ab.ratio_table([{key: 1.0}] * 3, [{key: 1.1}] * 3)}
        text = "\n".join(report.ab_section([d]))
        self.assertIn("### base (A) vs new (B), 3 ABBA pairs (`ab-1.json`)", text)
        self.assertIn("new takes 1.100x the time of base (3 ABBA pairs, `ab-1.json`)", text)

    def test_abba_order_alternates_the_first_side_of_each_pair(self):
        self.assertEqual("".join(interleave.abba(4)), "ABBAABBA")


class DefaultAB(unittest.TestCase):
    def test_without_interleave_each_round_runs_the_whole_list_per_build_in_its_own_run(self):
        tmp = tempfile.mkdtemp(prefix="fm_ab_test_")
        for side in "AB":
            fake_binary(os.path.join(tmp, side), side, os.path.join(tmp, "log"), [1.0])
        _, workloads = wl.load()
        selected = [w for w in workloads if w["name"] in ("fwd.s16384.none", "fwd.s16384.causal")]
        args = argparse.Namespace(ab=[os.path.join(tmp, "A"), os.path.join(tmp, "B")], rounds=2,
                                  systems="fragmask_cli", out=os.path.join(tmp, "out"), warmup=1, warmup_ms=0, iters=2,
                                  fa4=None, budget_s=0)
        runs = []
        with mock.patch.object(ab.subprocess, "run", side_effect=lambda cmd, **kw: runs.append(cmd)), \
                redirect_stdout(io.StringIO()):
            ab.run(args, selected)
        self.assertEqual([c[c.index("--bin") + 1].split(os.sep)[-2] for c in runs], list("ABBA"))
        for c in runs:
            self.assertNotIn("--ab-bins", c)
            self.assertEqual(c[c.index("--only") + 1], r"^(fwd\.s16384\.none|fwd\.s16384\.causal)$")
        import shutil
        shutil.rmtree(tmp)


real_run = ab.subprocess.run

if __name__ == "__main__":
    unittest.main()
