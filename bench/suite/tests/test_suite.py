"""CPU tests of the benchmark suite (no GPU, no torch): the workload list, the routines it
names, the report generator on fixture results, the A/B ratio math and the driver's ratios."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from suite import ab, report, routines, workloads as wl  # noqa: E402
from suite.run import add_ratios  # noqa: E402

FIXTURES = [os.path.join(HERE, "fixture.jsonl"), os.path.join(HERE, "fixture_newer.jsonl")]


class WorkloadList(unittest.TestCase):
    def setUp(self):
        self.defaults, self.workloads = wl.load()

    def test_every_workload_names_an_existing_routine_with_a_run_function(self):
        for w in self.workloads:
            self.assertTrue(callable(routines.get(w["routine"])), w["name"])

    def test_every_family_of_the_report_has_workloads_and_a_quick_subset_exists(self):
        families = {w["family"] for w in self.workloads}
        self.assertEqual(families, set(wl.FAMILIES))
        quick = wl.select(self.workloads, quick=True)
        self.assertTrue(0 < len(quick) < len(self.workloads))
        self.assertEqual({w["family"] for w in quick}, set(wl.FAMILIES))

    def test_readme_rows_are_workloads_of_the_list(self):
        names = {w["name"] for w in self.workloads}
        for family, rows in report.README_ROWS.items():
            for n in rows:
                self.assertIn(n, names, family)

    def test_quick_mode_covers_every_readme_row(self):
        quick = {w["name"] for w in wl.select(self.workloads, True, None, None)}
        for family, rows in report.README_ROWS.items():
            for n in rows:
                self.assertIn(n, quick, f"README row {n} ({family}) is not in --quick")

    def test_shards_partition_the_list(self):
        seen = []
        for i in range(1, 5):
            seen += [w["name"] for w in wl.select(self.workloads, shard=f"{i}/4")]
        self.assertEqual(sorted(seen), sorted(w["name"] for w in self.workloads))
        with self.assertRaises(wl.ListError):
            wl.select(self.workloads, shard="5/4")

    def test_a_routine_that_does_not_exist_is_rejected_by_name(self):
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write('[[workload]]\nname = "x.y"\nroutine = "nope"\nfamily = "forward"\nsystems = ["fragmask"]\n')
        try:
            with self.assertRaisesRegex(wl.ListError, "x.y: routine 'nope' does not exist"):
                wl.load(f.name)
        finally:
            os.remove(f.name)


class Report(unittest.TestCase):
    def test_perf_md_from_fixtures_is_deterministic_and_takes_the_newest_run_per_workload(self):
        _, workloads = wl.load()
        runs = report.read_runs(FIXTURES)
        a = report.perf_md(runs, workloads, {})
        b = report.perf_md(list(reversed(report.read_runs(FIXTURES))), workloads, {})
        self.assertEqual(a, b)
        self.assertLessEqual(a.count("\n"), 400)
        # forward S=16384 comes from the newer run, decode from the older one.
        self.assertIn("| forward S=16384 H=16 D=128, no mask | 3.50 ms · 628 TF/s | 3.15 ms · 0.90× | "
                      "H100 80GB HBM3, 2026-01-02, bbbbbbb |", a)
        self.assertNotIn("| 4.00 ms", a)
        self.assertIn("0.200 ms · 0.90 of roof", a)
        self.assertIn("H100 80GB HBM3, 2026-01-01, aaaaaaa", a)
        # A failed peer keeps its row and its reason.
        self.assertIn("| failed |", a)
        self.assertIn("- torch.compile failed (light.b64): RuntimeError: boom", a)

    def test_a_run_on_another_device_gets_its_own_section_and_stays_out_of_the_main_tables(self):
        _, workloads = wl.load()
        runs = report.read_runs(FIXTURES)
        meta, rows = runs[-1]
        other = (dict(meta, device="NVIDIA H200", date="2026-02-01", commit="ccccccc",
                      file="other.jsonl"),
                 [dict(r, device="NVIDIA H200", ms=r["ms"] * 0.5 if r.get("ms") else r.get("ms"))
                  for r in rows])
        a = report.perf_md(runs + [other], workloads, {})
        main, _, section = a.partition("## On H200")
        self.assertIn("3.50 ms", main)                  # the newest H100 run still fills the tables
        self.assertNotIn("ccccccc", main)
        self.assertIn("1.75 ms", section)
        self.assertIn("| H200, ", section)
        block = report.readme_block(runs + [other], workloads)
        self.assertIn("3.50 ms", block)
        self.assertNotIn("1.75 ms", block)
        self.assertIn('"On H200"', block)

    def test_readme_block_fills_the_markers_only(self):
        _, workloads = wl.load()
        block = report.readme_block(report.read_runs(FIXTURES), workloads)
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write("head\n<!-- perf:begin -->\nold\n<!-- perf:end -->\ntail\n")
        try:
            report.fill_readme(f.name, block)
            with open(f.name) as g:
                text = g.read()
            self.assertTrue(text.startswith("head\n<!-- perf:begin"))
            self.assertTrue(text.endswith("<!-- perf:end -->\ntail\n"))
            self.assertNotIn("old", text)
            self.assertIn("3.50 ms", text)
        finally:
            os.remove(f.name)

    def test_fa4_section_lists_the_rows_where_both_ran_with_fa4s_time_over_ours(self):
        _, workloads = wl.load()
        best = report.latest_rows(report.read_runs(FIXTURES))
        rows = report.fa4_rows(best, workloads)
        # Only the newer run's no-mask forward has an ok FA4 row; the older run's FA4 was missing.
        self.assertEqual([r[1] for r in rows], ["fwd.s16384.none"])
        lines = report.fa4_section(best, workloads, {"vs_fa4": "perf-vs-fa4.png"})
        self.assertEqual(lines[0], "## Against FlashAttention-4")
        self.assertIn("![FlashAttention-4's time over fragmask's](img/perf-vs-fa4.png)", lines)
        self.assertIn("| forward S=16384 H=16 D=128, no mask | 3.50 ms | 3.15 ms | 0.900 | "
                      "H100 80GB HBM3, 2026-01-02, bbbbbbb |", lines)
        self.assertEqual(report.fa4_section({}, workloads, {}), [])

    def test_committed_perf_md_is_current(self):
        with redirect_stdout(io.StringIO()):
            self.assertEqual(report.main(["--check"]), 0, "run bench/suite/report.py")


class Ratios(unittest.TestCase):
    def test_ab_ratio_is_the_median_of_b_over_a_with_its_spread(self):
        key = ("w", "fragmask", "")
        rounds_a = [{key: 1.0}, {key: 1.0}, {key: 2.0}]
        rounds_b = [{key: 1.1}, {key: 1.2}, {key: 2.0}]
        (t,) = ab.ratio_table(rounds_a, rounds_b)
        self.assertAlmostEqual(t["ratio"], 1.1)
        self.assertAlmostEqual(t["min"], 1.0)
        self.assertAlmostEqual(t["max"], 1.2)
        self.assertEqual(t["rounds"], 3)

    def test_ab_row_missing_from_one_build_is_reported_not_dropped(self):
        key = ("w", "fragmask", "")
        table = ab.ratio_table([{key: 1.0}], [{}])
        self.assertEqual(table, [{"key": list(key), "ratio": None, "rounds": 0}])
        self.assertIn("not in both builds", ab.format_table(table, "a", "b"))

    def test_open_regressions_are_the_slower_rows_of_the_newest_ab_per_baseline(self):
        slow, fast, gone = ("slow", "fragmask_cli", ""), ("fast", "fragmask_cli", ""), ("gone", "fragmask_cli", "")
        old = {"a": "base", "b": "old", "rounds": 2, "file": "ab-1.json",
               "rows": ab.ratio_table([{fast: 1.0}], [{fast: 1.5}])}
        new = {"a": "base", "b": "new", "rounds": 2, "file": "ab-2.json",
               "rows": ab.ratio_table([{slow: 1.0, fast: 1.0, gone: 1.0}] * 2, [{slow: 1.1, fast: 0.9}] * 2)}
        text = "\n".join(report.ab_section([old, new]))
        opened = text.split("### Open regressions")[1].split("###")[0]
        self.assertIn("`slow`", opened)
        self.assertNotIn("`fast`", opened)  # slower only in the older A/B against the same baseline
        self.assertIn("Not in both builds (failed, unsupported or not run in one): `gone`", text)
        # Against the newest baseline every build B keeps its table; its rows are judged by
        # their latest timing (`fast`, slower in ab-1, faster in the later ab-2).
        self.assertIn("(`ab-2.json`)", text)
        self.assertIn("(`ab-1.json`)", text)
        self.assertNotIn("superseded", text)

    def test_an_older_baseline_keeps_a_table_only_where_its_build_b_is_a_current_build(self):
        row = ("row", "fragmask_cli", "")
        first = {"a": "base0", "b": "x", "rounds": 1, "file": "ab-1.json",
                 "rows": ab.ratio_table([{row: 1.0}], [{row: 1.5}])}
        second = {"a": "base0", "b": "y", "rounds": 1, "file": "ab-2.json",
                  "rows": ab.ratio_table([{row: 1.0}], [{row: 1.0}])}
        start = {"a": "start", "b": "z", "rounds": 1, "file": "ab-3.json",
                 "rows": ab.ratio_table([{row: 1.0}], [{row: 1.3}])}
        recent = {"a": "base1", "b": "z", "rounds": 1, "file": "ab-4.json",
                  "rows": ab.ratio_table([{row: 1.0}], [{row: 1.0}])}
        text = "\n".join(report.ab_section([first, second, start, recent]))
        self.assertNotIn("(`ab-1.json`)", text)
        self.assertNotIn("(`ab-2.json`)", text)   # base0's builds are not current
        self.assertIn("(`ab-3.json`)", text)      # the start against the current build z
        self.assertIn("(`ab-4.json`)", text)
        self.assertIn("Superseded: 2 earlier A/B runs of 2 earlier builds (x, y), from `ab-1.json` "
                      "to `ab-2.json`", text)
        opened = text.split("### Open regressions")[1].split("###")[0]
        self.assertIn("`row` (fragmask_cli): z takes 1.300x the time of start", opened)
        self.assertNotIn("the time of base1", opened)

    def test_an_older_baseline_timed_last_does_not_displace_the_newest_baseline(self):
        row = ("row", "fragmask_cli", "")
        old = {"a": "base0", "b": "x", "rounds": 1, "file": "ab-1.json",
               "rows": ab.ratio_table([{row: 1.0}], [{row: 1.0}])}
        recent = {"a": "base1", "b": "z", "rounds": 1, "file": "ab-2.json",
                  "rows": ab.ratio_table([{row: 1.0}], [{row: 0.9}])}
        start = {"a": "base0", "b": "z", "rounds": 1, "file": "ab-3.json",
                 "rows": ab.ratio_table([{row: 1.0}], [{row: 0.8}])}
        text = "\n".join(report.ab_section([old, recent, start]))
        self.assertIn("(`ab-2.json`)", text)      # base1 stays the newest baseline
        self.assertIn("(`ab-3.json`)", text)      # the old baseline against the current build z
        self.assertNotIn("(`ab-1.json`)", text)   # x is not a current build
        self.assertIn("Superseded: 1 earlier A/B run of 1 earlier build (x)", text)

    def test_every_build_timed_against_the_newest_baseline_keeps_its_table_and_rows_take_their_latest_timing(self):
        fwd, bwd = ("fwd", "fragmask_cli", ""), ("bwd", "fragmask_cli", "")
        whole = {"a": "base", "b": "merged", "rounds": 1, "file": "ab-1.json",
                 "rows": ab.ratio_table([{fwd: 1.0, bwd: 1.0}], [{fwd: 1.1, bwd: 1.1}])}
        fix = {"a": "base", "b": "fixed", "rounds": 3, "file": "ab-2.json",
               "rows": ab.ratio_table([{bwd: 1.0}] * 3, [{bwd: 0.9}] * 3)}
        text = "\n".join(report.ab_section([whole, fix]))
        self.assertIn("(`ab-1.json`)", text)   # the whole table keeps its table
        self.assertIn("(`ab-2.json`)", text)   # beside the newest A/B
        opened = text.split("### Open regressions")[1].split("###")[0]
        self.assertIn("`fwd`", opened)          # measured only by the whole table
        self.assertNotIn("`bwd`", opened)       # measured again, faster, by the newest A/B
        self.assertNotIn("superseded", text)

    def test_a_row_measured_again_by_the_same_two_builds_takes_the_later_measurement(self):
        noisy, steady = ("noisy", "fragmask_cli", ""), ("steady", "fragmask_cli", "")
        full = {"a": "base", "b": "new", "rounds": 1, "file": "ab-1.json", "interleaved": True,
                "rows": ab.ratio_table([{noisy: 1.0, steady: 1.0}], [{noisy: 1.1, steady: 0.9}])}
        again = {"a": "base", "b": "new", "rounds": 4, "file": "ab-2.json", "interleaved": True,
                 "rows": ab.ratio_table([{noisy: 1.0}] * 4, [{noisy: 0.9}] * 4)}
        text = "\n".join(report.ab_section([full, again]))
        self.assertNotIn("### Open regressions", text)   # the longer run of `noisy` is faster
        self.assertIn("(`ab-1.json`)", text)              # the full run is the table
        self.assertIn("| noisy | fragmask_cli | 1.0000 | 0.9000 | 0.900 | 0.900-0.900 | faster "
                      "(`ab-2.json`, 4 ABBA pairs) |", text)
        self.assertIn("| steady |", text)
        self.assertNotIn("superseded", text)              # both files are behind the table

    def test_ab_file_names_keep_only_portable_characters_of_the_build_labels(self):
        self.assertEqual(ab.file_label("38f81e2+st3"), "38f81e2-st3")
        self.assertEqual(ab.file_label("64ffa17-direct-o"), "64ffa17-direct-o")
        self.assertEqual(ab.file_label("a b/c"), "a-b-c")
        self.assertEqual(ab.file_label(""), "unknown")

    def test_peer_ratio_is_peer_time_over_fragmask_time_per_variant(self):
        rows = [{"system": "fragmask", "status": "ok", "ms": 2.0},
                {"system": "sdpa", "status": "ok", "ms": 3.0},
                {"system": "fa4", "status": "missing", "ms": None}]
        add_ratios(rows)
        self.assertAlmostEqual(rows[1]["vs_fragmask"], 1.5)
        self.assertNotIn("vs_fragmask", rows[2])
        self.assertNotIn("vs_fragmask", rows[0])



class DeterministicRows(unittest.TestCase):
    """``deterministic = true`` workloads: the CLI's command, which systems run them, and
    the list's rows (no GPU, no torch: the command of mask kinds without host draws)."""

    def setUp(self):
        from suite.routines import attention
        self.attention = attention
        self.by_name = {w["name"]: w for w in wl.load()[1]}

    def command(self, params):
        with tempfile.TemporaryDirectory() as tmp:
            return self.attention.cli_command("fragmask", params, {}, 1, 2, tmp)

    def test_cli_command_of_a_deterministic_workload_passes_deterministic_to_bench_backward(self):
        for name in ("bwd.s16384.none.det", "bwd.s16384.causal.det",
                     "bwd.s16384.window1024.det", "bwd.s16384.random50.det"):
            with self.subTest(workload=name):
                cmd = self.command(self.by_name[name]["params"])
                self.assertEqual(cmd[1:3], ["bench", "backward"])
                self.assertEqual(cmd.count("--deterministic"), 1)
                # The same command as its non-deterministic row, plus the flag.
                plain = self.command(self.by_name[name[:-len(".det")]]["params"])
                self.assertEqual([a for a in cmd if a != "--deterministic"], plain)
                self.assertNotIn("--deterministic", plain)

    def test_a_workloads_named_tile_is_the_cli_commands_block(self):
        # The Python column packs at the workload's block (routines/attention.py, _fm_tile):
        # the CLI's command names the same tile, so both columns time one kernel.
        named = [w for w in self.by_name.values() if "block" in w["params"]]
        self.assertTrue(named)
        for w in named:
            with self.subTest(workload=w["name"]):
                cmd = self.command(w["params"])
                self.assertEqual(cmd[cmd.index("--block") + 1], w["params"]["block"])
        cmd = self.command(self.by_name["fwd.d256.s16384.none"]["params"])
        self.assertNotIn("--block", cmd)

    def test_a_deterministic_forward_has_no_cli_command(self):
        with self.assertRaisesRegex(self.attention.CliUnsupported, "backward"):
            self.command({"seqlen": 1024, "mask": "causal", "deterministic": True})

    def test_deterministic_rows_copy_their_rows_params_and_name_the_systems_that_set_the_mode(self):
        dets = [w for w in self.by_name.values() if w["params"].get("deterministic")]
        self.assertEqual(len(dets), 8)
        for w in dets:
            base = self.by_name[w["name"][:-len(".det")]]
            self.assertEqual(w["params"], dict(base["params"], deterministic=True), w["name"])
            self.assertEqual(w["family"], "backward")
            self.assertFalse(w["quick"])
            fa4 = ["fa4"] if w["params"]["mask"].split(":")[0] in ("none", "causal", "window") else []
            self.assertEqual(w["systems"], ["fragmask", "fragmask_cli"] + fa4, w["name"])
            for s in w["systems"]:
                self.assertIsNone(self.attention.deterministic_refusal(s, True), s)
        # The peers that set no deterministic mode, and any forward row, are refused by name.
        for s in ("sdpa", "flex", "flex_fa4"):
            self.assertIn("not measured", self.attention.deterministic_refusal(s, True))
        self.assertIn("backward", self.attention.deterministic_refusal("fragmask", False))


def crashing_child(crash_if):
    """A workload child for ``run_isolated``: it writes an ok row for each system it is given
    (all of fragmask and sdpa when none), unless ``crash_if`` (a Python expression of ``name``
    and ``systems``) holds, where it dies with a CUDA error on stderr."""
    return (
        "import json, sys\n"
        "name, out, only = sys.argv[1], sys.argv[2], sys.argv[3]\n"
        "systems = only.split(',') if only else ['fragmask', 'sdpa']\n"
        f"if {crash_if}:\n"
        "    sys.stderr.write('CUDA error: an illegal memory access was encountered\\n'); sys.exit(1)\n"
        "with open(out, 'w') as f:\n"
        "    f.write(json.dumps({'kind': 'meta', 'commit': 'c'}) + '\\n')\n"
        "    for s in systems:\n"
        "        f.write(json.dumps({'kind': 'row', 'workload': name, 'system': s, 'status': 'ok', 'ms': 1.0}) + '\\n')\n")


class Isolation(unittest.TestCase):
    """``--isolate``: one process per workload; a child that dies loses its rows only."""

    def _run(self, child_script, budget_s=0, grace_s=None):
        from suite import run as run_mod
        if grace_s is not None:
            self.addCleanup(setattr, run_mod, "CHILD_GRACE_S", run_mod.CHILD_GRACE_S)
            run_mod.CHILD_GRACE_S = grace_s
        _, workloads = wl.load(wl.DEFAULT_LIST)
        selected = [w for w in workloads if w["name"] in ("fwd.s16384.none", "fwd.s16384.causal")]
        with tempfile.TemporaryDirectory() as tmp:
            output = os.path.join(tmp, "out.jsonl")
            args = run_mod.argparse.Namespace(systems="fragmask,sdpa", output=output, budget_s=budget_s)

            def child_cmd(name, child_out, systems=None):
                return [sys.executable, "-c", child_script, name, child_out, ",".join(systems or [])]
            with redirect_stdout(io.StringIO()):
                run_mod.run_isolated(args, selected, [], child_cmd)
            with open(output) as f:
                return [run_mod.json.loads(x) for x in f]

    def test_a_crashing_workload_becomes_failed_rows_and_the_next_one_still_runs(self):
        lines = self._run(crashing_child("name == 'fwd.s16384.none'"))
        rows = [x for x in lines if x["kind"] == "row"]
        crashed = [x for x in rows if x["workload"] == "fwd.s16384.none"]
        self.assertEqual(sorted(x["system"] for x in crashed), ["fragmask", "sdpa"])
        self.assertTrue(all(x["status"] == "failed" and "illegal memory access" in x["note"] for x in crashed))
        # Each system was run again alone, and failed alone too.
        self.assertTrue(all("status 1" in x["note"] for x in crashed))
        ran = [x for x in rows if x["workload"] == "fwd.s16384.causal"]
        self.assertEqual([x["status"] for x in ran], ["ok", "ok"])
        self.assertEqual([x["kind"] for x in lines].count("meta"), 1)

    def test_a_crash_is_charged_to_the_system_that_crashes_alone_and_the_others_keep_their_rows(self):
        lines = self._run(crashing_child("'sdpa' in systems"))
        rows = [x for x in lines if x["kind"] == "row"]
        for name in ("fwd.s16384.none", "fwd.s16384.causal"):
            got = {x["system"]: x for x in rows if x["workload"] == name}
            self.assertEqual(sorted(got), ["fragmask", "sdpa"])
            self.assertEqual(got["fragmask"]["status"], "ok")
            self.assertEqual(got["sdpa"]["status"], "failed")
            self.assertIn("illegal memory access", got["sdpa"]["note"])
        self.assertEqual([x["kind"] for x in lines].count("meta"), 1)

    def test_a_workload_overrunning_the_budget_is_stopped_and_the_rest_are_skipped_rows(self):
        script = "import time; time.sleep(30)\n"
        lines = self._run(script, budget_s=0.2, grace_s=0.5)
        rows = [x for x in lines if x["kind"] == "row"]
        first = [x for x in rows if x["workload"] == "fwd.s16384.none"]
        self.assertEqual(sorted(x["system"] for x in first), ["fragmask", "sdpa"])
        self.assertTrue(all(x["status"] == "failed" and "time budget" in x["note"] for x in first))
        rest = [x for x in rows if x["workload"] == "fwd.s16384.causal"]
        self.assertEqual([x["status"] for x in rest], ["skipped", "skipped"])

    def test_children_inherit_every_argument_but_the_selection_and_the_output(self):
        from suite.run import strip_selection
        self.assertEqual(
            strip_selection(["--quick", "--only", "^a$", "--shard=1/2", "--fa4", "/x", "--output", "o",
                             "--site", "/s", "--systems", "fragmask"]),
            ["--fa4", "/x", "--site", "/s", "--systems", "fragmask"])


class TimedWarmup(unittest.TestCase):
    def test_the_timed_warm_up_keeps_calling_until_its_milliseconds_have_passed(self):
        import time
        import types
        from suite import common
        calls, syncs = [], []
        torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: syncs.append(1)))
        start = time.perf_counter()
        common.warm_for(torch, lambda: calls.append(1), 30, batch=4)
        self.assertGreaterEqual(time.perf_counter() - start, 0.030)
        self.assertGreaterEqual(len(calls), 4)
        self.assertEqual(len(calls), 4 * len(syncs))   # whole batches, each synchronised



class MedianOfRounds(unittest.TestCase):
    def test_each_numeric_field_is_the_median_of_the_rounds_that_measured_it(self):
        from suite.common import median_of_rounds
        rounds = [{"a": {"us": 9.0, "note": "x", "n": 3}, "b": {"us": 1.0}, "label": "first"},
                  {"a": {"us": 1.0, "n": 1}, "b": {"error": "boom"}},
                  {"a": {"us": 5.0}, "b": {"us": 3.0}, "label": "third"}]
        merged = median_of_rounds(rounds)
        self.assertEqual(merged["a"], {"us": 5.0, "note": "x", "n": 2.0})
        self.assertEqual(merged["b"], {"us": 2.0})       # the round with an error left out
        self.assertEqual(merged["label"], "first")
        self.assertEqual(len(merged["rounds"]), 3)
        self.assertNotIn("rounds", median_of_rounds(rounds[:1]))
        self.assertEqual(median_of_rounds([{"a": {"error": "boom"}}]), {"a": {"error": "boom"}})


class Repeat(unittest.TestCase):
    """``--repeat N``: each workload's systems run N times in turn; a row is their median."""

    def test_fields_are_medians_over_the_runs_and_a_failure_in_any_run_is_kept(self):
        from suite.common import merge_repeats, row
        runs = [[row("fragmask", "ok", 3.0, tflops=30.0), row("fa4", "ok", 1.0), row("flex", "ok", 5.0)],
                [row("fragmask", "ok", 1.0, tflops=10.0), row("fa4", "failed", note="boom"), row("flex", "ok", 6.0)],
                [row("fragmask", "ok", 2.0, tflops=20.0), row("fa4", "ok", 2.0)]]
        got = {r["system"]: r for r in merge_repeats(runs)}
        self.assertEqual((got["fragmask"]["ms"], got["fragmask"]["tflops"]), (2.0, 20.0))
        self.assertEqual(got["fragmask"]["repeats_ms"], [3.0, 1.0, 2.0])
        self.assertEqual((got["fa4"]["status"], got["fa4"]["note"]), ("failed", "boom"))
        self.assertEqual(got["flex"]["status"], "ok")     # missing from one run: not a median
        self.assertNotIn("repeats_ms", got["flex"])
        self.assertEqual(list(got), ["fragmask", "fa4", "flex"])

    def test_run_workloads_calls_each_routine_repeat_times_and_writes_one_row_per_system(self):
        import types
        from suite import run as run_mod, routines as routines_mod
        from suite.common import row
        calls = []

        def fake_routine(ctx, params, systems):
            calls.append(list(systems))
            n = len(calls)
            offset = {"fragmask": 0, "sdpa": 1}
            return [row(s, "ok", float(n + offset[s])) for s in systems]

        cuda = types.SimpleNamespace(get_device_name=lambda: "fake GPU", synchronize=lambda: None,
                                     empty_cache=lambda: None)
        fake_torch = types.SimpleNamespace(__version__="0", cuda=cuda,
                                           _dynamo=types.SimpleNamespace(config=types.SimpleNamespace()))
        # Fake torch and fragmask modules for the run (the CI venv has the real fragmask
        # installed, whose import would reach for torch's tensor types).
        fakes = {"torch": fake_torch, "fragmask": types.SimpleNamespace(__version__="fake")}
        for name, fake in fakes.items():
            saved = sys.modules.get(name)
            self.addCleanup(lambda n=name, m=saved: sys.modules.__setitem__(n, m) if m is not None
                            else sys.modules.pop(n, None))
            sys.modules[name] = fake
        original_get = routines_mod.get
        self.addCleanup(setattr, routines_mod, "get", original_get)
        routines_mod.get = lambda name: fake_routine
        selected = [{"name": "w1", "family": "forward", "routine": "attention", "params": {},
                     "systems": ["fragmask", "sdpa"]}]
        with tempfile.TemporaryDirectory() as tmp:
            output = os.path.join(tmp, "out.jsonl")
            args = run_mod.argparse.Namespace(
                fa4=None, quick=False, shard=None, warmup=5, warmup_ms=0, iters=20, repeat=3,
                output=output, bin=None, systems=None, budget_s=0, commit="abc1234")
            with redirect_stdout(io.StringIO()):
                run_mod.run_workloads(args, selected)
            with open(output) as f:
                lines = [run_mod.json.loads(x) for x in f]
        # Alternate repeats run the systems in reverse, so none always goes first.
        self.assertEqual(calls, [["fragmask", "sdpa"], ["sdpa", "fragmask"], ["fragmask", "sdpa"]])
        self.assertEqual(lines[0]["repeat"], 3)
        rows = {x["system"]: x for x in lines if x["kind"] == "row"}
        self.assertEqual(rows["fragmask"]["repeats_ms"], [1.0, 2.0, 3.0])
        self.assertEqual(rows["fragmask"]["ms"], 2.0)
        self.assertEqual(rows["sdpa"]["ms"], 3.0)
        self.assertAlmostEqual(rows["sdpa"]["vs_fragmask"], 1.5)


class NcuBundles(unittest.TestCase):
    def test_raw_csvs_read_loose_files_and_ncu_bundle_tars_alike(self):
        import gzip
        import tarfile
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
        import ncu_summary
        table = '"Kernel Name","gpu__time_duration.sum"\n"","msecond"\n"k","1.5"\n'
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "ncu-a-bwd.raw.csv.gz"), "wb") as f:
                f.write(gzip.compress(table.encode()))
            inner = os.path.join(d, "ncu-b-bwd.raw.csv.gz")
            with open(inner, "wb") as f:
                f.write(gzip.compress(table.replace('"k"', '"j"').encode()))
            with tarfile.open(os.path.join(d, "ncu-b-bwd.tar"), "w") as tar:
                tar.add(inner, arcname="ncu-b-bwd.raw.csv.gz")
            os.remove(inner)
            got = ncu_summary.raw_csvs(d)
        self.assertEqual([(n, body) for n, _, body in got],
                         [("ncu-a-bwd.raw.csv.gz", [["k", "1.5"]]), ("ncu-b-bwd.raw.csv.gz", [["j", "1.5"]])])


if __name__ == "__main__":
    unittest.main()
