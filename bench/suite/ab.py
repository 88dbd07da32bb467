"""A/B mode: two fragmask builds timed alternately on one machine.

A build folder holds a fragmask wheel (``fragmask-*.whl``) or an installed package folder
(``site/``), and/or the ``fragmask`` binary (the ``fragmask_cli`` rows: kernel times from
``fragmask bench``), and a ``COMMIT`` file. A build without the Python package (a commit
before crates/python) still compares on its ``fragmask_cli`` rows; its ``fragmask`` rows fail
and the table says "not in both builds".
Each round runs the selected workloads once per build, each build in its own subprocess
(a fresh CUDA context and compile cache state), A then B in even rounds and B then A in odd
ones. The report is, per row, the ratio B ms / A ms: its median over rounds and its
spread (min–max), beside each build's median time. Above 1: B is slower.

With ``--interleave`` (both builds need the binary) the rounds are ABBA pairs within each
row instead: one subprocess runs each attention workload's ``fragmask bench`` command with
A's and B's binary alternately, back to back (interleave.py), and the ratio is the median
over adjacent pairs. Rows that cannot interleave (the Python package's, the ``cli``
routine's) are listed as not interleaved; run them without ``--interleave``.
"""
import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from . import interleave

HERE = os.path.dirname(os.path.abspath(__file__))


def prepare(build, scratch):
    """(site folder, binary or None, commit) of one build folder; installs its wheel."""
    build = os.path.abspath(build)
    commit = os.path.basename(build)
    if os.path.exists(os.path.join(build, "COMMIT")):
        with open(os.path.join(build, "COMMIT")) as f:
            commit = f.read().strip()
    site = os.path.join(build, "site")
    binary = os.path.join(build, "fragmask")
    binary = binary if os.path.exists(binary) else None
    if not os.path.isdir(site):
        wheels = sorted(glob.glob(os.path.join(build, "fragmask-*.whl")))
        if not wheels:
            if binary is None:
                raise SystemExit(f"--ab: {build} has no site/, no fragmask-*.whl and no fragmask binary")
            return None, binary, commit
        site = os.path.join(scratch, f"site-{len(os.listdir(scratch))}")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--target", site, wheels[-1]], check=True)
    return site, binary, commit


def records(path, kind="row"):
    """The records of one kind ("row" or "meta") of a result file (none if it is missing)."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == kind:
                yield r


def read_rows(path):
    return {(r["workload"], r["system"], r.get("variant", "")): r["ms"] for r in records(path)
            if r.get("status") == "ok" and r.get("ms")}


def read_failures(path):
    """{note: [workload, ...]} of the rows that did not run (failed or missing), so a broken
    build shows why its rows are 'not in both builds'."""
    failed = {}
    for r in records(path):
        if r.get("status") in ("failed", "missing"):
            failed.setdefault(r.get("note", ""), []).append(r["workload"])
    return failed


def ratio_table(rounds_a, rounds_b):
    """Per row key present in A and B of a round: median of B/A over rounds, min, max,
    the number of rounds, and each side's median ms. ``rounds_a[i]``: {key: ms}."""
    keys = sorted(set().union(*rounds_a, *rounds_b)) if rounds_a else []
    out = []
    for key in keys:
        ratios, a_ms, b_ms = [], [], []
        for ra, rb in zip(rounds_a, rounds_b):
            if key in ra and key in rb:
                ratios.append(rb[key] / ra[key])
                a_ms.append(ra[key])
                b_ms.append(rb[key])
        if ratios:
            out.append({"key": list(key), "ratio": statistics.median(ratios), "min": min(ratios),
                        "max": max(ratios), "rounds": len(ratios),
                        "a_ms": statistics.median(a_ms), "b_ms": statistics.median(b_ms)})
        else:
            out.append({"key": list(key), "ratio": None, "rounds": 0})
    return out


def read_device(path):
    """The device named by a result file's meta line ('' if none)."""
    return next((r.get("device", "") for r in records(path, "meta")), "")


def file_label(commit):
    """A build label as it may appear in a result file's name: letters, digits, ``.``, ``_``
    and ``-`` only (a label like ``abc1234+st3`` becomes ``abc1234-st3``), so the name
    survives every copy tool; the JSON keeps the label itself."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", commit) or "unknown"


def run(args, selected):
    scratch = tempfile.mkdtemp(prefix="fm_ab_")
    (site_a, bin_a, commit_a), (site_b, bin_b, commit_b) = (prepare(b, scratch) for b in args.ab)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H%M")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"ab-{stamp}-{file_label(commit_a)}-vs-{file_label(commit_b)}.json")
    rounds_dir = os.path.join(args.out, f"ab-{stamp}-rounds")  # every run's rows come back too
    os.makedirs(rounds_dir, exist_ok=True)
    names = "|".join(w["name"].replace(".", r"\.") for w in selected)
    if getattr(args, "interleave", False):
        return run_interleaved(args, names, (site_a, bin_a, commit_a), (bin_b, commit_b), path, rounds_dir)
    systems = args.systems or "fragmask,fragmask_cli"
    rounds = {"A": [], "B": []}
    device = ""
    for r in range(args.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        for side in order:
            site, binary, commit = (site_a, bin_a, commit_a) if side == "A" else (site_b, bin_b, commit_b)
            out = os.path.join(rounds_dir, f"round{r}-{side}-{file_label(commit)}.jsonl")
            cmd = [sys.executable, os.path.join(HERE, "run.py"), "--only", f"^({names})$",
                   "--systems", systems, "--commit", commit, "--output", out,
                   "--warmup", str(args.warmup), "--iters", str(args.iters),
                   "--warmup-ms", str(args.warmup_ms)]
            if site:
                cmd += ["--site", site]
            if binary:
                cmd += ["--bin", binary]
            if args.fa4:
                cmd += ["--fa4", args.fa4]
            print(f"# round {r + 1}/{args.rounds}, {side} ({commit})", flush=True)
            # Only the build's own package: nothing from the caller's PYTHONPATH.
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            subprocess.run(cmd, env=env, stdout=None if os.environ.get("AB_VERBOSE") else subprocess.DEVNULL)
            rounds[side].append(read_rows(out))
            for note, names_failed in read_failures(out).items():
                print(f"#   {side} did not run {len(names_failed)} row(s) ({names_failed[0]}, ...): {note[:300]}",
                      flush=True)
            device = device or read_device(out)
        # The table so far after every round: a run cut short still leaves its ratios.
        table = ratio_table(rounds["A"][:r + 1], rounds["B"][:r + 1])
        with open(path, "w") as f:
            json.dump({"a": commit_a, "b": commit_b, "rounds": r + 1, "device": device, "rows": table},
                      f, indent=1)
        print(format_table(table, commit_a, commit_b), flush=True)
    print(f"# wrote {path} and the rows of every run under {rounds_dir}")
    return 0


def run_interleaved(args, names, build_a, build_b, path, rounds_dir):
    """``--ab --interleave``: one run.py subprocess (build A's package on the path) times
    both binaries in ABBA pairs per row; the table is over pairs."""
    (site_a, bin_a, commit_a), (bin_b, commit_b) = build_a, build_b
    if not bin_a or not bin_b:
        raise SystemExit("--ab --interleave: both build folders need the fragmask binary")
    out = os.path.join(rounds_dir, f"interleaved-{file_label(commit_a)}-vs-{file_label(commit_b)}.jsonl")
    cmd = [sys.executable, os.path.join(HERE, "run.py"), "--only", f"^({names})$",
           "--systems", args.systems or "fragmask_cli", "--ab-bins", bin_a, bin_b,
           "--rounds", str(args.rounds), "--commit", f"{commit_a} vs {commit_b}", "--output", out,
           "--warmup", str(args.warmup), "--iters", str(args.iters),
           "--warmup-ms", str(args.warmup_ms)]
    if site_a:
        cmd += ["--site", site_a]
    if args.budget_s:
        cmd += ["--budget-s", str(args.budget_s)]
    print(f"# interleaved, {args.rounds} ABBA pairs per row: A {commit_a}, B {commit_b}", flush=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(cmd, env=env)
    pairs_a, pairs_b, not_run = read_pairs(out)
    table = ratio_table(pairs_a, pairs_b)
    measured = {tuple(t["key"]) for t in table}
    for (status, note), keys in sorted(not_run.items()):
        rows = ", ".join(w + (f"[{v}]" if v else "") + f" ({system})" for w, system, v in keys)
        print(f"# {status.replace('_', ' ')}: {rows}: {note[:300]}", flush=True)
        if status != interleave.NOT_INTERLEAVED:  # failed in a build: "not in both builds"
            table += [{"key": list(k), "ratio": None, "rounds": 0} for k in keys if k not in measured]
    with open(path, "w") as f:
        json.dump({"a": commit_a, "b": commit_b, "rounds": len(pairs_a), "interleaved": True,
                   "device": read_device(out), "rows": table,
                   "not_run": [{"key": list(k), "status": status, "note": note}
                               for (status, note), keys in sorted(not_run.items()) for k in keys]},
                  f, indent=1)
    print(format_table(table, commit_a, commit_b, over="pairs"), flush=True)
    print(f"# wrote {path} and the rows under {out}")
    return 0


def read_pairs(path):
    """The rows of an interleaved run: ([{key: A ms} per pair], [{key: B ms} per pair],
    {(status, note): [key, ...]} of the rows that have no pairs)."""
    pairs_a, pairs_b, not_run = [], [], {}
    for r in records(path):
        key = (r["workload"], r["system"], r.get("variant", ""))
        if r.get("status") != "ok":
            not_run.setdefault((r["status"], r.get("note", "")), []).append(key)
            continue
        for i, (a, b) in enumerate(zip(r["a_ms"], r["b_ms"])):
            while len(pairs_a) <= i:
                pairs_a.append({})
                pairs_b.append({})
            pairs_a[i][key], pairs_b[i][key] = a, b
    return pairs_a, pairs_b, not_run


def format_table(table, a, b, over="rounds"):
    lines = [f"| workload | system | {a} ms | {b} ms | {b} / {a} (median) | spread over {over} |",
             "|---|---|---|---|---|---|"]
    for t in table:
        w, s, v = t["key"]
        name = w + (f"[{v}]" if v else "")
        if t["ratio"] is None:
            lines.append(f"| {name} | {s} | | | not in both builds | |")
            continue
        flag = " **slower**" if t["min"] > 1.02 else (" faster" if t["max"] < 0.98 else "")
        lines.append(f"| {name} | {s} | {t['a_ms']:.4f} | {t['b_ms']:.4f} | {t['ratio']:.3f}{flag} | "
                     f"{t['min']:.3f}–{t['max']:.3f} ({t['rounds']}) |")
    return "\n".join(lines)
