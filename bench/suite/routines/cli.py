"""Rows only the ``fragmask`` binary times (CUDA graphs of decode and lightning, the
forward's split sweeps): ``fragmask bench ARGS... --json FILE``, one suite row per JSON row.

params: args (list of str after ``fragmask bench``), label (the JSON row keys that name a
row, joined with ","), ms_key ("ms"), keep (optional list of labels to keep).
Needs ``--bin``; without it the rows are reported missing.
"""
import json
import os
import subprocess
import tempfile

from ..common import OK, MISSING, FAILED, row


def run(ctx, p, systems):
    if not ctx.bin or not os.path.exists(ctx.bin):
        return [row("fragmask_cli", MISSING, note=f"no fragmask binary (--bin {ctx.bin!r})")]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        cmd = [ctx.bin, "bench"] + [str(a) for a in p["args"]] + ["--json", out]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=int(p.get("timeout", 300)))
        if res.returncode != 0 or not os.path.exists(out):
            tail = (res.stderr or res.stdout).strip().replace("\n", " ")[-300:]
            return [row("fragmask_cli", FAILED, note=f"rc {res.returncode}: {tail}")]
        with open(out) as f:
            data = json.load(f)
    items = data.get("rows", [data]) if isinstance(data, dict) else data
    keys = [k for k in p.get("label", "").split(",") if k]
    keep = p.get("keep")
    rows = []
    for item in items:
        label = ",".join(f"{k}={item.get(k)}" for k in keys)
        if keep and label not in keep:
            continue
        ms = item.get(p.get("ms_key", "ms"))
        extra = {k: item[k] for k in ("graph_ms", "roof_fraction", "graph_roof_fraction",
                                      "roof_gbps", "splits", "tflops") if k in item}
        if "roof_fraction" in extra:
            extra["of_roof"] = extra.pop("roof_fraction")
        rows.append(row("fragmask_cli", OK, ms, " ".join(cmd[1:-2]), variant=label, **extra))
    return rows
