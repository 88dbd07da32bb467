"""CPU tests of ``flag_pairs``'s command line: positional variants that look like flags,
``--base`` on both sides, ``--set`` parameter overrides."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from suite import flag_pairs, workloads as wl  # noqa: E402


class FlagPairsArgs(unittest.TestCase):
    def test_flags_in_variants_and_base_are_taken_verbatim(self):
        got = flag_pairs.parse_args(["./fm", "wu002", "2", "--deterministic-walks off", "",
                                     "--base", "--deterministic", "--set", "mask=blocks64:0.2",
                                     "--set", "dim=64"])
        self.assertEqual(got, ("./fm", "wu002", 2, ["--deterministic-walks off", ""],
                               "--deterministic", {"mask": "blocks64:0.2", "dim": 64}))

    def test_values_parse_as_int_float_bool_else_string(self):
        self.assertEqual(flag_pairs.overrides(["a=3", "b=0.5", "c=true", "d=false", "e=x:1"]),
                         {"a": 3, "b": 0.5, "c": True, "d": False, "e": "x:1"})

    def test_bad_command_lines_are_errors_not_runs(self):
        for argv in (["./fm", "x", "2"], ["./fm", "x", "0", "--a"], ["./fm", "x", "two", "--a"],
                     ["./fm", "x", "2", "--a", "--set"], ["./fm", "x", "2", "--a", "--set", "dim"],
                     ["./fm", "x", "2", "--a", "--set", "=3"]):
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


if __name__ == "__main__":
    unittest.main()
