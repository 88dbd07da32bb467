#!/usr/bin/env python3
"""docs/PERF.md, README's performance block and the pictures in docs/img, generated from
the suite's result files (bench/results/*.jsonl).

    python3 bench/suite/report.py                       # writes docs/PERF.md and docs/img/*.png
    python3 bench/suite/report.py --readme README.md    # also fills README's perf block
    python3 bench/suite/report.py --check               # exit 1 if docs/PERF.md is stale

For each workload the newest result file that has it supplies all its rows (so a table row's
numbers come from one run: one device, one date, shown on the row). Older runs stay in
bench/results and in bench/results/history.md. The output depends only on the result files
and the workload list (no clock), so regenerating is deterministic.
"""
import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
REPO = os.path.dirname(os.path.dirname(HERE))

from suite import targets as tg  # noqa: E402
from suite import workloads as wl  # noqa: E402

SYSTEM_ORDER = ["fragmask", "fragmask_cli", "sdpa", "flex", "flex_fa4", "fa4", "fa4_varlen",
                "torch_compile", "torch"]
SYSTEM_NAMES = {"fragmask": "fragmask", "fragmask_cli": "fragmask (CLI)", "sdpa": "SDPA",
                "flex": "Flex (Triton)", "flex_fa4": "Flex (FA4 backend)", "fa4": "FA4",
                "fa4_varlen": "FA4 varlen", "torch_compile": "torch.compile", "torch": "torch eager"}
FAMILY_TITLES = [
    ("forward", "Attention forward"),
    ("backward", "Attention backward (dQ, dK, dV)"),
    ("split", "Split-KV forward (short Sq over long Sk)"),
    ("decode", "Decode"),
    ("lightning", "Lightning decode (MiniMax-01)"),
    ("packer", "Mask packers"),
    ("overhead", "Python per-call overhead"),
]
README_ROWS = {  # the workloads of README's block, by family
    "forward": ["fwd.s16384.none", "fwd.s16384.causal", "fwd.s16384.window1024", "fwd.s16384.docs12",
                "fwd.s16384.random50", "fwd.s16384.blocksparse10", "fwd.s16384.topk8",
                "fwd.s4096.random50", "fwd.wu002.blocks10", "fwd.wu002.blocks50"],
    "backward": ["bwd.s16384.none", "bwd.s16384.random50", "bwd.s8192.docs12", "bwd.wu002.blocks10"],
    "split": ["split.wu002.blocks50", "split.wu002.blocks10"],
    "decode": ["dec.b16.h32kv8.s8192", "dec.b1.h32kv8.s65536", "dec.b64.h32kv8.s4096",
               "dec.b8.h64kv8.s16384", "dec.paged16.b16.h32kv8.s8192", "dec.topk2048.b16.s65536"],
    "lightning": ["light.b1", "light.b16", "light.b64", "light.b128"],
}


def read_runs(paths):
    """[(meta, rows)] of each result file (JSONL: one meta line, then rows)."""
    runs = []
    for path in paths:
        meta, rows = None, []
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                r = json.loads(line)
                if r.get("kind") == "meta":
                    meta = r
                elif r.get("kind") == "row":
                    rows.append(r)
        if meta is None:
            raise SystemExit(f"{path}: no meta line")
        meta = dict(meta, file=os.path.relpath(path, REPO))
        runs.append((meta, rows))
    return runs


def latest_rows(runs):
    """{workload: (meta, rows)} from the newest run (date, time, file name) that has it,
    whatever its rows' status (a peer or fragmask failing in the newest run shows)."""
    best = {}
    for meta, rows in sorted(runs, key=lambda mr: (mr[0].get("date", ""), mr[0].get("time", ""), mr[0]["file"])):
        by = {}
        for r in rows:
            by.setdefault(r["workload"], []).append(r)
        for w, rs in by.items():
            if all(r["status"] == "skipped" for r in rs):
                continue  # a shard that ran out of time did not measure it
            best[w] = (meta, rs)
    return best


# The device of the page's and README's tables (every target of the issues is an H100 number);
# runs on other devices (a lent H200) get their own section, never mixed into those tables.
PRIMARY_DEVICE = "NVIDIA H100 80GB HBM3"


def split_by_device(runs):
    """(runs on PRIMARY_DEVICE, {other device: runs}); a run without a device is primary."""
    primary, others = [], {}
    for meta, rows in runs:
        dev = meta.get("device") or PRIMARY_DEVICE
        if dev == PRIMARY_DEVICE:
            primary.append((meta, rows))
        else:
            others.setdefault(dev, []).append((meta, rows))
    return primary, others


def short_device(name):
    return name.replace("NVIDIA ", "")


def fmt_ms(ms):
    if ms is None:
        return ""
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 1:
        return f"{ms:.2f}"
    if ms >= 0.01:
        return f"{ms:.3f}"
    return f"{ms:.4f}"


def cell(r, family):
    """One system's cell: time, its throughput or roof fraction, and the ratio to fragmask."""
    if r is None:
        return ""
    if r["status"] != "ok":
        return r["status"]
    parts = [f"{fmt_ms(r['ms'])} ms" if family != "overhead" else f"{r.get('host_us', r['ms'] * 1e3):.1f} µs"]
    if r["system"] in ("fragmask", "fragmask_cli"):
        if r.get("tflops"):
            parts.append(f"{r['tflops']:.0f} TF/s")
        if r.get("of_roof") is not None:
            parts.append(f"{r['of_roof']:.2f} of roof")
        if r.get("graph_ms") is not None:
            parts.append(f"graph {fmt_ms(r['graph_ms'])} ms")
        if r.get("gib_per_s") is not None:
            parts.append(f"{r['gib_per_s']:.1f} GiB/s")
    elif r.get("vs_fragmask") is not None:
        parts.append(f"{r['vs_fragmask']:.2f}×")
    return " · ".join(parts)


def family_table(family, names, best, titles, dates=True):
    """Markdown lines of one family's table and the notes on missing/failed peers."""
    present = [n for n in names if n in best]
    if not present:
        return []
    systems = []
    for n in present:
        for r in best[n][1]:
            if r["system"] not in systems:
                systems.append(r["system"])
    systems.sort(key=lambda s: SYSTEM_ORDER.index(s) if s in SYSTEM_ORDER else len(SYSTEM_ORDER))
    head = ["workload"] + [SYSTEM_NAMES.get(s, s) for s in systems] + [
        "device, date, commit" if dates else "device, commit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = {}
    for n in present:
        meta, rows = best[n]
        variants = []
        for r in rows:
            if r.get("variant", "") not in variants:
                variants.append(r.get("variant", ""))
        for var in variants:
            by = {r["system"]: r for r in rows if r.get("variant", "") == var}
            label = titles.get(n, n) + (f" [{var}]" if var else "")
            cells = [label] + [cell(by.get(s), family) for s in systems]
            date = rows[0].get("date", meta.get("date", ""))
            cells.append(f"{short_device(rows[0].get('device', meta.get('device', '')))}, "
                         + (f"{date}, " if dates else "")
                         + f"{rows[0].get('commit', meta.get('commit', ''))}")
            lines.append("| " + " | ".join(cells) + " |")
            for r in by.values():
                if r["status"] != "ok":
                    key = (r["system"], r["status"], r.get("note", ""))
                    notes.setdefault(key, []).append(n)
    if notes:
        lines.append("")
        for (system, status, note), ws in sorted(notes.items()):
            where = ", ".join(sorted(set(ws)))
            lines.append(f"- {SYSTEM_NAMES.get(system, system)} {status} ({where}): {note}")
    return lines


FA4_SYSTEMS = ("fa4", "fa4_varlen")


def fa4_rows(best, workloads):
    """[(family, workload, title, fragmask row, FA4 row)] of the forward and backward
    workloads whose newest run timed both fragmask and FlashAttention-4 (direct or varlen),
    in the workload list's order."""
    out = []
    for w in workloads:
        if w["family"] not in ("forward", "backward") or w["name"] not in best:
            continue
        rows = best[w["name"]][1]
        fm = next((r for r in rows if r["system"] == "fragmask" and r["status"] == "ok"), None)
        peer = next((r for r in rows if r["system"] in FA4_SYSTEMS and r["status"] == "ok"
                     and r.get("vs_fragmask")), None)
        if fm is not None and peer is not None:
            out.append((w["family"], w["name"], w["title"], fm, peer))
    return out


def fa4_section(best, workloads, images):
    """The page's summary against FlashAttention-4: its picture and one line per row."""
    rows = fa4_rows(best, workloads)
    if not rows:
        return []
    out = ["## Against FlashAttention-4", ""]
    if "vs_fa4" in images:
        out += [f"![FlashAttention-4's time over fragmask's](img/{images['vs_fa4']})", ""]
    out += ["FlashAttention-4's time over fragmask's on every row where both ran in the same run "
            "(above 1: fragmask is faster; the causal documents rows use FA4's varlen call). "
            "The tables below hold the times.", "",
            "| workload | fragmask | FA4 | FA4's time over fragmask's | device, date, commit |",
            "|---|---|---|---|---|"]
    for _family, _name, title, fm, peer in rows:
        label = title + (" (varlen)" if peer["system"] == "fa4_varlen" else "")
        out.append(f"| {label} | {fmt_ms(fm['ms'])} ms | {fmt_ms(peer['ms'])} ms | {peer['vs_fragmask']:.3f} | "
                   f"{short_device(fm.get('device', ''))}, {fm.get('date', '')}, {fm.get('commit', '')} |")
    return out + [""]


CONVENTIONS = """Times are medians of CUDA-event-timed calls after warm-up, on one GPU, every
system of a row in the same process and run (bench/suite/run.py). The warm-up is counted
(5 calls), so the clocks are those of a short burst; at the sustained, power-capped clocks
(`--warmup-ms`) the same kernels ran 1.03–1.17× slower on an H100 (bench/README.md). Each
Python-timed call (fragmask and every peer) follows a ~1 ms GPU sleep that hides the host's
enqueue; the **fragmask (CLI)** column times the binary's back-to-back launches, which on the
rows above ~2 ms settle at lower clocks (0–11% slower on an H100, 2026-11-28). **TF/s** is
dense-equivalent: 4·B·H·Sq·Sk·D FLOPs for a forward and 2.5× that for a backward, whatever
the mask keeps, so a mask that skips work shows more than the dense peak. **of roof** is a
device-to-device copy with the same memory traffic (the bytes a decode step or packer must
read), timed in the same run, over the row's time. A peer's **×** is its time over
fragmask's (above 1: fragmask is faster). A peer that is missing, cannot express the mask
or fails shows that word; the reason is listed under the table. An empty cell is a system
the row's newest run did not include (each row shows one run). Rows marked `legacy` come
from the hand-kept tables before the suite existed (their dates say when they were measured);
bench/results/history.md keeps the older measurements."""


def read_ab(folder):
    """The A/B tables (`run.py --ab` writes ab-DATE-A-vs-B.json) in a results folder, oldest first."""
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "ab-*.json"))):
        with open(path) as f:
            d = json.load(f)
        d["file"] = os.path.relpath(path, REPO)
        out.append(d)
    return out


def remeasured(d, ab_runs):
    """The table of ``d``'s two builds: the oldest A/B of that pair, with each row that a later
    A/B of the same pair measured again (a longer run of a noisy row) replaced by the later
    measurement, which names its file."""
    runs = sorted((x for x in ab_runs if x["a"] == d["a"] and x["b"] == d["b"]),
                  key=lambda x: x["file"])
    if len(runs) < 2:
        return d
    rows = {tuple(r["key"]): dict(r) for r in runs[0]["rows"]}
    for x in runs[1:]:
        for r in x["rows"]:
            if r.get("ratio") is not None:
                rows[tuple(r["key"])] = dict(r, file=x["file"])
    return dict(runs[0], rows=list(rows.values()), files=[x["file"] for x in runs])


def repeats(ab_run, n):
    """"3 rounds" of an A/B, or "8 ABBA pairs" of an interleaved one."""
    unit = "ABBA pair" if ab_run.get("interleaved") else "round"
    return f"{n} {unit}{'s' if n != 1 else ''}"


def ab_section(ab_runs):
    """The current state of the A/B record: the tables of the current builds only. The
    newest baseline is the build most recently first used as one (an older baseline timed
    again later stays older); every build timed against it is a current
    build, and each keeps its table (a merged build's whole table beside the narrower A/Bs of
    its fixes). An A/B of an older baseline (the start of an issue, say) keeps its table only
    where its build B is a current build; the rest are named in one line as superseded
    (bench/results/history.md keeps what they found). Per table: B/A per row, median over rounds
    and its spread, for the rows whose whole spread lies above 1.02 (slower) or below 0.98
    (faster); the rest are counted. Rows only one build has are named in one line. The slower
    rows come first, as the open regressions, each row judged by its latest measurement
    against its baseline."""
    if not ab_runs:
        return []
    out = ["## A/B of builds", "",
           "Two builds timed alternately on one GPU (`run.py --ab`, `bench/suite/device_ab.sh`); "
           "B/A is the median over rounds, the spread its min-max. An interleaved A/B (`--interleave`, "
           "the `fragmask_cli` rows of attention workloads) runs each row's two binaries back to back "
           "in ABBA order; its B/A is the median over adjacent pairs. Only the current builds' A/Bs "
           "are shown.", ""]
    # The newest baseline is the build most recently first used as one: an A/B of an older
    # baseline (the start of an issue) written later does not displace it.
    first_used = {}
    for d in ab_runs:
        first_used.setdefault(d["a"], d["file"])
    recent = max(first_used, key=first_used.get)
    current = {d["b"] for d in ab_runs if d["a"] == recent}
    newest = {}
    for d in ab_runs:
        if d["a"] == recent or d["b"] in current:
            newest[(d["a"], d["b"])] = remeasured(d, ab_runs)
    # Against each baseline, a row is judged by its latest measurement, whichever current B it timed.
    latest_file = {}
    for (a, _), d in newest.items():
        for r in d["rows"]:
            k = (a, tuple(r["key"]))
            latest_file[k] = max(r.get("file", d["file"]), latest_file.get(k, ""))
    open_rows = []
    for (a, _), d in sorted(newest.items()):
        for r in d["rows"]:
            if r.get("file", d["file"]) != latest_file[(a, tuple(r["key"]))]:
                continue
            if r.get("ratio") is not None and r["min"] > 1.02:
                w, system = r["key"][0], r["key"][1]
                if len(r["key"]) > 2 and r["key"][2]:
                    w += f" [{r['key'][2]}]"
                open_rows.append(f"- `{w}` ({system}): {d['b']} takes {r['ratio']:.3f}x the time of {a} "
                                 f"({repeats(d, r['rounds'])}, `{r.get('file', d['file'])}`)")
    if open_rows:
        out += ["### Open regressions", "",
                "Rows slower than a baseline build in the current builds' A/Bs against it (each row "
                "judged by its latest measurement against that baseline):", ""] + open_rows + [""]
    for d in sorted(newest.values(), key=lambda d: d["file"]):
        on = f", {short_device(d['device'])}" if d.get("device") else ""
        out += [f"### {d['a']} (A) vs {d['b']} (B), {repeats(d, d['rounds'])}{on} "
                f"(`{d['file']}`)"]
        table = ["", "| workload | system | A ms | B ms | B/A | spread | |", "|---|---|---|---|---|---|---|"]
        absent, level = [], 0
        for r in d["rows"]:
            w, system = r["key"][0], r["key"][1]
            if len(r["key"]) > 2 and r["key"][2]:
                w += f" [{r['key'][2]}]"
            if r.get("ratio") is None:
                absent.append(w)
                continue
            verdict = "slower" if r["min"] > 1.02 else "faster" if r["max"] < 0.98 else ""
            if not verdict:
                level += 1  # within the noise band: counted, not listed
                continue
            again = f" (`{r['file']}`, {repeats(d, r['rounds'])})" if r.get("file") else ""
            table.append(f"| {w} | {system} | {r['a_ms']:.4f} | {r['b_ms']:.4f} | {r['ratio']:.3f} | "
                         f"{r['min']:.3f}-{r['max']:.3f} | {verdict}{again} |")
        if len(table) > 3:  # a table only where a row moved beyond the noise band
            out += table
        more = " more" if len(table) > 3 else ""
        out += ["", f"{level}{more} row{'s' if level != 1 else ''} in both builds: no change beyond 2% "
                    f"(the spread over {'pairs' if d.get('interleaved') else 'rounds'} crosses 0.98-1.02); "
                    "every row is in the JSON file."]
        if absent:
            out += ["", f"Not in both builds (failed, unsupported or not run in one): "
                        + ", ".join(f"`{x}`" for x in sorted(set(absent)))]
        out.append("")
    shown = {f for d in newest.values() for f in d.get("files", [d["file"]])}
    older = [d for d in ab_runs if d["file"] not in shown]
    if older:
        builds = sorted({d["b"] for d in older})
        out += [f"Superseded: {len(older)} earlier A/B run{'s' if len(older) != 1 else ''} of "
                f"{len(builds)} earlier build{'s' if len(builds) != 1 else ''} ("
                + ", ".join(builds) + "), from `" + older[0]["file"] + "` to `" + older[-1]["file"]
                + "`; bench/results/history.md keeps what they found.", ""]
    return out


def targets_section(best, heading):
    """Issue 24's targets (bench/suite/targets.py) against the newest rows of one device."""
    lines, (met, missed, unmeasured) = tg.table(best)
    return [heading, "",
            f"Each target of issue 24 against the newest run that has its rows (the fragmask column, "
            f"Python-timed; FA4's or Flex's time over ours for a peer; the issue's bounds are H100 "
            f"numbers): {met} met, {missed} missed, {unmeasured} not measured.", ""] + lines + [""]


def other_devices_section(others, workloads, titles):
    """One table per family for each other device, from its newest runs."""
    out = []
    for dev, runs in sorted(others.items()):
        best = latest_rows(runs)
        files = sorted({best[n][0]["file"] for n in best})
        out += [f"## On {short_device(dev)}", "",
                f"The same workloads run on a lent {short_device(dev)} (not comparable with the "
                f"{short_device(PRIMARY_DEVICE)} tables above except through each row's ratios): "
                + ", ".join(f"`{f}`" for f in files) + ".", ""]
        out += targets_section(best, f"### Issue 24's targets on {short_device(dev)}")
        for family, title in FAMILY_TITLES:
            names = [w["name"] for w in workloads if w["family"] == family and w["name"] in best]
            lines = family_table(family, names, best, titles)
            if lines:
                out += [f"### {title}", ""] + lines + [""]
    return out


def perf_md(runs, workloads, images, ab_runs=()):
    runs, others = split_by_device(runs)
    best = latest_rows(runs)
    titles = {w["name"]: w["title"] for w in workloads}
    order = [w["name"] for w in workloads]
    out = ["# Performance", "",
           "<!-- Generated by bench/suite/report.py from bench/results/*.jsonl; do not edit by hand. -->", "",
           CONVENTIONS, ""]
    used = sorted({best[n][0]["file"] for n in best})
    out += ["Result files behind this page:", ""]
    for meta, rows in sorted(runs, key=lambda mr: mr[0]["file"]):
        if meta["file"] in used:
            out.append(f"- `{meta['file']}`: {short_device(meta.get('device', ''))}, {meta.get('date', '')}, "
                       f"commit {meta.get('commit', '')}, torch {meta.get('torch', '?')}, FA4 {meta.get('fa4', '?')}"
                       + (", the --quick list" if meta.get("quick") else ""))
    out.append("")
    out += fa4_section(best, workloads, images)
    out += targets_section(best, f"## Issue 24's targets on {short_device(PRIMARY_DEVICE)}")
    for family, title in FAMILY_TITLES:
        names = [w["name"] for w in workloads if w["family"] == family]
        lines = family_table(family, names, best, titles)
        if not lines:
            continue
        out += [f"## {title}", ""]
        if family in images:
            out += [f"![{title}](img/{images[family]})", ""]
        out += lines + [""]
    out += other_devices_section(others, workloads, titles)
    out += ab_section(list(ab_runs))
    missing = [n for n in order if n not in best]
    if missing:
        out += ["## Not measured yet", "", "Workloads of bench/suite/workloads.toml without a result:", "",
                ", ".join(f"`{n}`" for n in missing), ""]
    return "\n".join(out).rstrip() + "\n"


def readme_block(runs, workloads):
    runs, others = split_by_device(runs)
    best = latest_rows(runs)
    titles = {w["name"]: w["title"] for w in workloads}
    out = ["<!-- perf:begin (generated by bench/suite/report.py; edit the workloads, not this block) -->", ""]
    for family, title in FAMILY_TITLES:
        if family not in README_ROWS:
            continue
        # README carries no dates (docs/reliability.md, "first hour"): the commit keys a row.
        lines = family_table(family, README_ROWS[family], best, titles, dates=False)
        lines = [x for x in lines if not x.startswith("- ")]  # reasons live in docs/PERF.md
        while lines and not lines[-1]:
            lines.pop()
        if lines:
            out += [f"**{title}**", ""] + lines + [""]
    for dev, dev_runs in sorted(others.items()):
        newest = max(dev_runs, key=lambda mr: (mr[0].get("date", ""), mr[0].get("time", "")))[0]
        out += [f"These rows are from {short_device(PRIMARY_DEVICE)} runs. The newest run on a lent "
                f"{short_device(dev)} (commit {newest.get('commit', '')}"
                + (", the --quick list" if newest.get("quick") else "")
                + f") is in docs/PERF.md, \"On {short_device(dev)}\".", ""]
    counts = [(PRIMARY_DEVICE, tg.table(best)[1])] + [
        (dev, tg.table(latest_rows(dev_runs))[1]) for dev, dev_runs in sorted(others.items())]
    out += ["Issue 24's targets, from each device's newest rows: " + "; ".join(
        f"{short_device(dev)} {met} met, {missed} missed" + (f", {un} not measured" if un else "")
        for dev, (met, missed, un) in counts) + " (docs/PERF.md lists each).", ""]
    out += ["Conventions, every other row and the reasons for missing peers: [docs/PERF.md](docs/PERF.md).",
            "", "<!-- perf:end -->"]
    return "\n".join(out)


def fill_readme(path, block):
    with open(path) as f:
        text = f.read()
    begin, end = text.find("<!-- perf:begin"), text.find("<!-- perf:end -->")
    if begin < 0 or end < 0:
        raise SystemExit(f"{path}: no <!-- perf:begin --> ... <!-- perf:end --> markers")
    new = text[:begin] + block + text[end + len("<!-- perf:end -->"):]
    if new != text:
        with open(path, "w") as f:
            f.write(new)


def result_files(folder):
    return sorted(glob.glob(os.path.join(folder, "*.jsonl")))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(REPO, "bench", "results"), help="folder of *.jsonl")
    ap.add_argument("--files", nargs="*", help="result files (default: every *.jsonl in --results)")
    ap.add_argument("--list", default=wl.DEFAULT_LIST)
    ap.add_argument("--perf", default=os.path.join(REPO, "docs", "PERF.md"))
    ap.add_argument("--img", default=os.path.join(REPO, "docs", "img"), help="folder of the PNGs ('' = none)")
    ap.add_argument("--readme", help="fill this file's <!-- perf:begin/end --> block")
    ap.add_argument("--readme-block", help="write README's block to this file")
    ap.add_argument("--check", action="store_true", help="only compare docs/PERF.md with what would be written")
    args = ap.parse_args(argv)
    _, workloads = wl.load(args.list)
    files = args.files if args.files else result_files(args.results)
    runs = read_runs(files)
    images = {}
    if args.img:
        from suite import plots
        best = latest_rows(split_by_device(runs)[0])
        ratios = fa4_rows(best, workloads)
        if args.check:
            images = plots.names(best, workloads, ratios)
        else:
            images = plots.draw(best, workloads, args.img, ratios)
    text = perf_md(runs, workloads, images, read_ab(args.results))
    if args.check:
        same = False
        if os.path.exists(args.perf):
            with open(args.perf) as f:
                same = f.read() == text
        print("docs/PERF.md is current" if same else "docs/PERF.md is stale: run bench/suite/report.py")
        return 0 if same else 1
    with open(args.perf, "w") as f:
        f.write(text)
    print(f"wrote {args.perf} ({text.count(chr(10))} lines)")
    block = readme_block(runs, workloads)
    if args.readme_block:
        with open(args.readme_block, "w") as f:
            f.write(block + "\n")
    if args.readme:
        fill_readme(args.readme, block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
