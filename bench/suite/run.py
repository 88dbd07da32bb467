#!/usr/bin/env python3
"""The benchmark suite's driver: runs named workloads (bench/suite/workloads.toml) beside
their peers in one process on one GPU and writes one JSONL file of rows.

    python3 bench/suite/run.py --quick --bin .carry/suite/fragmask --out bench/results
    python3 bench/suite/run.py --shard 2/4 --fa4 /tmp/fa4site
    python3 bench/suite/run.py --list-workloads
    python3 bench/suite/run.py --ab BUILD_A BUILD_B --rounds 3 --quick   # A/B of two builds
    python3 bench/suite/run.py --ab BUILD_A BUILD_B --interleave --rounds 8 --only '^fwd[.]s16384[.]'

A row is keyed by (workload, system, variant, commit, device, date). Times are medians of
CUDA-event-timed calls after warm-up; ``tflops`` is dense-equivalent (4·B·H·Sq·Sk·D for a
forward, 2.5× that for a backward, whatever the mask keeps); ``of_roof`` is the time of a
device-to-device copy with the same traffic, measured in the same run, over the row's
time. ``vs_fragmask`` on a peer row is peer ms / fragmask ms (above 1: fragmask faster).
A peer that is missing, unsupported for the workload or fails is a row with that status
and the reason in ``note``.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from suite import workloads as wl  # noqa: E402
from suite import ab as ab_mode  # noqa: E402
from suite import common  # noqa: E402


class Context:
    """What routines share: torch, timing settings, the fragmask binary."""

    def __init__(self, torch, warmup, iters, binary):
        self.torch, self.warmup, self.iters, self.bin = torch, warmup, iters, binary


def commit_of(args):
    if args.commit:
        return args.commit
    if os.environ.get("FRAGMASK_COMMIT"):
        return os.environ["FRAGMASK_COMMIT"]
    if args.site and os.path.exists(os.path.join(args.site, "COMMIT")):
        with open(os.path.join(args.site, "COMMIT")) as f:
            return f.read().strip()
    try:
        return subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True,
                              text=True, cwd=HERE, timeout=10).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def add_ratios(rows):
    """``vs_fragmask`` (peer ms / fragmask ms) on every ok peer row of a workload."""
    fm = {r.get("variant", ""): r["ms"] for r in rows if r["system"] == "fragmask" and r["status"] == "ok"}
    for r in rows:
        base = fm.get(r.get("variant", ""))
        if r["system"] != "fragmask" and r["status"] == "ok" and base and r["ms"]:
            r["vs_fragmask"] = r["ms"] / base


def run_workloads(args, selected):
    if args.fa4:
        from suite import peers
        peers.add_fa4_path(args.fa4)
    import torch
    for knob in ("cache_size_limit", "recompile_limit"):  # one compiled Flex per shape and
        try:                                             # mask: keep them all, never eager
            setattr(torch._dynamo.config, knob, 256)
        except (AttributeError, KeyError):
            pass
    try:
        import fragmask
        fm_version = fragmask.__version__
    except ImportError as e:  # a binary-only build (A/B): its Python rows fail with the reason
        fm_version = f"not importable ({e})"
    from suite import routines
    from suite.common import row, FAILED, merge_repeats
    device = torch.cuda.get_device_name()
    meta = {
        "kind": "meta", "commit": commit_of(args), "device": device,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%SZ"),
        "torch": torch.__version__, "fragmask": fm_version,
        "python": platform.python_version(), "quick": args.quick, "shard": args.shard,
        "warmup": args.warmup, "warmup_ms": args.warmup_ms, "iters": args.iters, "repeat": args.repeat,
        "host": platform.node(),
    }
    from suite import peers
    fa4_mod, fa4_why = peers.fa4()
    meta["fa4"] = "importable" if fa4_mod else fa4_why
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    ctx = Context(torch, args.warmup, args.iters, args.bin)
    start = time.time()
    systems_filter = set(args.systems.split(",")) if args.systems else None
    with open(args.output, "w") as out:
        out.write(json.dumps(meta) + "\n")
        out.flush()
        print(f"# {device}, commit {meta['commit']}, torch {meta['torch']}, FA4: {meta['fa4']}", flush=True)
        for w in selected:
            systems = [s for s in w["systems"] if systems_filter is None or s in systems_filter]
            t0 = time.time()
            if args.budget_s and t0 - start > args.budget_s:
                rows = [row(s, "skipped", note=f"time budget of {args.budget_s} s spent") for s in systems]
            else:
                runs = []
                for rep in range(args.repeat):
                    # Alternate repeats run the systems in reverse (routines that honour the
                    # order: attention), so a median over repeats does not favour the first.
                    order = systems if rep % 2 == 0 else systems[::-1]
                    try:
                        runs.append(routines.get(w["routine"])(ctx, w["params"], order))
                    except Exception as e:
                        msg = f"{type(e).__name__}: {e}".replace("\n", " ")[:300]
                        runs.append([row(s, FAILED, note=f"workload setup: {msg}") for s in systems])
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
                rows = runs[0] if args.repeat == 1 else merge_repeats(runs)
            add_ratios(rows)
            for r in rows:
                full = {"kind": "row", "workload": w["name"], "family": w["family"],
                        "variant": r.pop("variant", ""), **r, "commit": meta["commit"],
                        "device": device, "date": meta["date"]}
                out.write(json.dumps(full) + "\n")
                print(fmt(full), flush=True)
            out.flush()
            print(f"#   {w['name']}: {time.time() - t0:.1f} s", flush=True)
    print(f"# wrote {args.output} ({time.time() - start:.0f} s)")


CHILD_GRACE_S = 60


def run_isolated(args, selected, child_argv, child_cmd=None):
    """Runs each workload in its own process (``--isolate``), so that a peer that kills its
    CUDA context (an illegal address, an abort) loses that workload's rows only. Where such a
    process dies, each system it left without a row runs again alone, in a process of its
    own, so the failure is charged to the system that caused it: its rows are written as
    ``failed`` rows naming the exit status and the last line of its output.
    ``child_cmd(name, output, systems)`` gives the command of one workload (``systems``: a
    list of one system for a retry, else None); tests pass their own."""
    import re
    import tempfile
    if child_cmd is None:
        def child_cmd(name, output, systems=None):
            cmd = [sys.executable, os.path.abspath(__file__), *child_argv,
                   "--only", f"^{re.escape(name)}$", "--output", output]
            return cmd + (["--systems", ",".join(systems)] if systems else [])
    systems_filter = set(args.systems.split(",")) if args.systems else None
    start = time.time()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    wrote_meta = False

    def run_child(name, child_out, systems):
        """(lines of its output file, why it is missing rows, whether the budget stopped it)."""
        if os.path.exists(child_out):
            os.remove(child_out)
        # With a budget, a workload may overrun it by at most CHILD_GRACE_S, so the
        # caller's outer timeout (budget + more than that) never cuts the file short.
        limit = None
        if args.budget_s:
            limit = max(args.budget_s - (time.time() - start), 0) + CHILD_GRACE_S
        stopped = None
        try:
            proc = subprocess.run(child_cmd(name, child_out, systems), capture_output=True,
                                  text=True, timeout=limit)
        except subprocess.TimeoutExpired as e:
            out_text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            proc = subprocess.CompletedProcess(e.cmd, None, out_text, "")
            stopped = f"stopped after {limit:.0f} s (time budget)"
        sys.stdout.write(proc.stdout)
        lines = []
        if os.path.exists(child_out):
            with open(child_out) as f:
                lines = [json.loads(x) for x in f if x.strip()]
        tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1]
        why = (stopped or f"process exited with status {proc.returncode}: {tail}")[:300]
        return lines, why, stopped is not None

    with open(args.output, "w") as out, tempfile.TemporaryDirectory() as tmp:
        for w in selected:
            systems = [s for s in w["systems"] if systems_filter is None or s in systems_filter]
            child_out = os.path.join(tmp, "rows.jsonl")
            failed_why = {}
            if args.budget_s and time.time() - start > args.budget_s:
                lines, status = [], "skipped"
                failed_why = {s: f"time budget of {args.budget_s} s spent" for s in systems}
            else:
                status = "failed"
                lines, why, stopped = run_child(w["name"], child_out, None)
                have = {x["system"] for x in lines if x.get("kind") == "row"}
                missing = [s for s in systems if s not in have]
                if len(missing) > 1 and not stopped:
                    for s in missing:
                        more, why_s, _ = run_child(w["name"], child_out, [s])
                        lines += [x for x in more if x.get("kind") == "meta" or x.get("system") == s]
                        failed_why[s] = why_s
                else:
                    failed_why = {s: why for s in missing}
            meta = [x for x in lines if x.get("kind") == "meta"]
            rows = [x for x in lines if x.get("kind") == "row"]
            if meta and not wrote_meta:
                out.write(json.dumps({**meta[0], "isolated": True}) + "\n")
                wrote_meta = True
            have = {x["system"] for x in rows}
            for system in systems:
                if system not in have:
                    rows.append({"kind": "row", "workload": w["name"], "family": w["family"],
                                 "variant": "", "system": system, "status": status, "ms": None,
                                 "note": failed_why.get(system, "no row")})
            if failed_why:
                add_ratios(rows)  # rows of systems run again alone had no fragmask row beside them
            for x in rows:
                out.write(json.dumps(x) + "\n")
                if x["system"] not in have:
                    print(fmt(x), flush=True)
            out.flush()
    return 0


def fmt(r):
    ms = f"{r['ms']:.4f}" if r.get("ms") is not None else "-"
    extra = []
    for key, f in (("tflops", "{:.1f} TF/s"), ("of_roof", "{:.2f} of roof"), ("vs_fragmask", "x{:.2f}")):
        if r.get(key) is not None:
            extra.append(f.format(r[key]))
    name = r["workload"] + (f"[{r['variant']}]" if r.get("variant") else "")
    note = "" if r["status"] == "ok" else f"{r['status'].upper()}: {r['note']}"
    return f"{name:<34} {r['system']:<13} {ms:>9} ms  {' '.join(extra):<28} {note}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", default=wl.DEFAULT_LIST, help="workload list (TOML)")
    ap.add_argument("--quick", action="store_true", help="the quick subset (one device call)")
    ap.add_argument("--only", help="regex on workload names")
    ap.add_argument("--shard", help="i/n: every n-th workload starting at the i-th")
    ap.add_argument("--systems", help="comma list: run only these systems (e.g. fragmask)")
    ap.add_argument("--fa4", default=os.environ.get("FA4_SITE"),
                    help="unpacked FlashAttention-4 (e.g. /tmp/fa4site); missing = reported missing")
    ap.add_argument("--bin", default=os.environ.get("FRAGMASK_BIN"), help="fragmask binary (cli rows)")
    ap.add_argument("--site", help="a folder with an installed fragmask package (put first on sys.path)")
    ap.add_argument("--commit", help="commit of the fragmask build (default: $FRAGMASK_COMMIT, SITE/COMMIT, git)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "results"),
                    help="folder of the results file")
    ap.add_argument("--output", help="results file (default OUT/suite-DATE-TIME-COMMIT.jsonl)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup-ms", type=int, default=0,
                    help="then warm up for this many milliseconds (every system, and the fragmask "
                         "binary's --warmup-ms), so timed calls run at the sustained, power-capped clocks")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each workload's systems this many times in turn (1 to 9); a "
                    "row reports each field's median, and repeats_ms the runs' times; alternate "
                    "repeats run the systems in reverse order")
    ap.add_argument("--budget-s", type=float, default=0, help="skip (and report) workloads after this many seconds")
    ap.add_argument("--isolate", action="store_true",
                    help="each workload in its own process: a crash (illegal address) costs its rows only")
    ap.add_argument("--list-workloads", action="store_true")
    ap.add_argument("--ab", nargs=2, metavar=("BUILD_A", "BUILD_B"),
                    help="A/B: two build folders (a fragmask wheel or site folder, optional fragmask binary)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="A/B rounds (A and B alternate, order flips each round); with --interleave, "
                         "ABBA pairs per row")
    ap.add_argument("--interleave", action="store_true",
                    help="with --ab: per row, the two builds' binaries back to back in ABBA pairs "
                         "(fragmask_cli rows of attention workloads; others are listed as not interleaved)")
    ap.add_argument("--ab-bins", nargs=2, metavar=("A_BIN", "B_BIN"),
                    help="internal (--ab --interleave): time the selected rows with these two binaries "
                         "in ABBA pairs (--rounds pairs per row)")
    args = ap.parse_args(argv)
    if not 0 <= args.warmup_ms <= 60000:
        ap.error(f"--warmup-ms {args.warmup_ms}: expected 0..=60000")
    common.WARMUP_MS = args.warmup_ms
    if not 1 <= args.repeat <= 9:
        ap.error(f"--repeat {args.repeat}: expected 1..=9")
    if args.repeat > 1 and (args.ab or args.ab_bins):
        ap.error("--repeat is for side-by-side runs; an A/B has --rounds")
    _, workloads = wl.load(args.list)
    selected = wl.select(workloads, args.quick, args.only, args.shard)
    if args.list_workloads:
        for w in selected:
            print(f"{w['name']:<34} {w['family']:<10} {w['routine']:<10} {','.join(w['systems'])}")
        return 0
    if args.ab:
        return ab_mode.run(args, selected)
    if args.interleave:
        ap.error("--interleave needs --ab BUILD_A BUILD_B")
    if args.site:
        sys.path.insert(0, os.path.abspath(args.site))
    if not args.output:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H%M")
        args.output = os.path.join(args.out, f"suite-{stamp}-{ab_mode.file_label(commit_of(args))}.jsonl")
    if args.ab_bins:
        from suite import interleave
        return interleave.run(args, selected)
    if args.isolate:
        child_argv = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--isolate"]
        return run_isolated(args, selected, strip_selection(child_argv))
    run_workloads(args, selected)
    return 0


def strip_selection(argv):
    """The arguments a child of ``--isolate`` inherits: all but the selection (``--quick``,
    ``--only``, ``--shard``) and ``--output``, which the parent sets per workload."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--only", "--shard", "--output"):
            skip = True
            continue
        if a == "--quick" or a.startswith(("--only=", "--shard=", "--output=")):
            continue
        out.append(a)
    return out


if __name__ == "__main__":
    sys.exit(main())
