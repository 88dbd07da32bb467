"""CPU tests of ``flag_pairs``: its command line (positional variants that look like flags,
``--base`` on both sides, ``--set`` parameter overrides, ``--output`` with ``--commit``) and
a whole run against a fake ``fragmask`` binary (a Python script that prints the CLI's JSON
line: 1.0 ms, or 1.25 ms when its arguments hold ``--slow``)."""
import io
import json
import os
import stat
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from suite import flag_pairs, workloads as wl  # noqa: E402


class FlagPairsArgs(unittest.TestCase):
    def test_flags_in_variants_and_base_are_taken_verbatim(self):
        got = flag_pairs.parse_args(["./fm", "wu002", "2", "--deterministic-walks off", "",
                                     "--base", "--deterministic", "--set", "mask=blocks64:0.2",
                                     "--set", "dim=64"])
        self.assertEqual(got, ("./fm", "wu002", 2, ["--deterministic-walks off", ""],
                               "--deterministic", {"mask": "blocks64:0.2", "dim": 64}, None, None))
        got = flag_pairs.parse_args(["./fm", "x", "1", "--a", "--output", "o.json", "--commit", "abc"])
        self.assertEqual(got[6:], ("o.json", "abc"))

    def test_values_parse_as_int_float_bool_else_string(self):
        self.assertEqual(flag_pairs.overrides(["a=3", "b=0.5", "c=true", "d=false", "e=x:1"]),
                         {"a": 3, "b": 0.5, "c": True, "d": False, "e": "x:1"})

    def test_bad_command_lines_are_errors_not_runs(self):
        for argv in (["./fm", "x", "2"], ["./fm", "x", "0", "--a"], ["./fm", "x", "two", "--a"],
                     ["./fm", "x", "2", "--a", "--set"], ["./fm", "x", "2", "--a", "--set", "dim"],
                     ["./fm", "x", "2", "--a", "--set", "=3"],
                     ["./fm", "x", "2", "--a", "--output", "o.json"],
                     ["./fm", "x", "2", "--a", "--commit", "abc"]):
            with self.assertRaises(ValueError, msg=argv):
                flag_pairs.parse_args(argv)

    def test_base_flags_go_on_both_sides_and_the_variant_on_b_only(self):
        self.assertEqual(flag_pairs.sides(["fm", "bench"], "--deterministic", "--head-section 4"),
                         {"A": ["fm", "bench", "--deterministic"],
                          "B": ["fm", "bench", "--deterministic", "--head-section", "4"]})

    def test_overrides_change_a_copy_of_a_listed_workload_and_name_it(self):
        _, listed = wl.load()
        w = next(w for w in listed if w["name"] == "bwd.wu002.blocks10")
        before = dict(w["params"])
        got = flag_pairs.with_params(w, {"mask": "blocks64:0.3", "dim": 64})
        self.assertEqual(w["params"], before)
        self.assertEqual((got["params"]["mask"], got["params"]["dim"]), ("blocks64:0.3", 64))
        self.assertEqual(got["name"], "bwd.wu002.blocks10 mask=blocks64:0.3 dim=64")
        self.assertIs(flag_pairs.with_params(w, {}), w)


FAKE = r'''#!{python}
import json, sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps(args) + "\n")
print(json.dumps({{"ms_median": 1.25 if "--slow" in args else 1.0, "kernel": "k", "device": "FakeGPU"}}))
'''


class FlagPairsRun(unittest.TestCase):
    def test_a_run_prints_and_writes_each_variant_s_ratio_over_abba_pairs(self):
        with tempfile.TemporaryDirectory() as tmp:
            log, binary = os.path.join(tmp, "calls.jsonl"), os.path.join(tmp, "fragmask")
            with open(binary, "w") as f:
                f.write(FAKE.format(python=sys.executable, log=log))
            os.chmod(binary, os.stat(binary).st_mode | stat.S_IEXEC)
            out = os.path.join(tmp, "fp.json")
            text = io.StringIO()
            with redirect_stdout(text):
                flag_pairs.main([binary, "^fwd[.]s16384[.]none$", "2", "--slow", "--fast",
                                 "--base", "--both on", "--set", "seqlen=4096",
                                 "--output", out, "--commit", "abc1234"])
            with open(out) as f:
                report = json.load(f)
            with open(log) as f:
                calls = [json.loads(x) for x in f]
        self.assertEqual((report["commit"], report["device"], report["base"], report["set"]),
                         ("abc1234", "FakeGPU", "--both on", {"seqlen": 4096}))
        rows = {r["flags"]: r for r in report["rows"]}
        self.assertEqual(set(rows), {"--slow", "--fast"})
        self.assertAlmostEqual(rows["--slow"]["ratio"], 1.25)
        self.assertAlmostEqual(rows["--fast"]["ratio"], 1.0)
        self.assertEqual(rows["--slow"]["workload"], "fwd.s16384.none seqlen=4096")
        # 2 variants x 2 ABBA pairs; every call has the base flags and the overridden length,
        # and only the B side (half of them) a variant.
        self.assertEqual(len(calls), 8)
        self.assertTrue(all(c[c.index("--both") + 1] == "on" for c in calls))
        self.assertEqual(sum("--slow" in c or "--fast" in c for c in calls), 4)
        self.assertTrue(all("4096" in " ".join(c) for c in calls))
        self.assertIn("B/A 1.250", text.getvalue())


if __name__ == "__main__":
    unittest.main()
