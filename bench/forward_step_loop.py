#!/usr/bin/env python3
"""Instruction counts of the forward's step loop, from SASS, without a GPU.

    fragmask attention --emit-source --synthetic-mask random:0.5 > r.cu   # or no mask flag
    (compile with NVRTC for sm_90a, `cuobjdump -sass` into r.sass; or use the .sass files of
    `cargo run --release --example kernel_fingerprints -- DIR`)
    python3 bench/forward_step_loop.py r.sass none.sass

For each file: the main kernel (`fragmask_attention_fwd`), its steady-state step loop (the
smallest backward-branch range holding a step's QK^T and PV wgmmas: two wgmma groups, each
closed by an HGMMA with `gsb0`; 16 HGMMA at head dim 128, 12 at head dim 64's 192x128),
its static instruction count by class, and the forward-branch ranges that
a step with nothing masked skips: the mask words' select pass (`R2P` + `FSEL ... -INF`),
the key bound of the last block (`FSEL ... -INF` without `R2P`) and the lazy rescale of O
(32 or more `FMUL`). "full step" is the loop less all three; "partial step" adds the
select pass back (the path of every step of a random token mask).
"""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backward_step_loop as b  # noqa: E402

b.KERNEL = "fragmask_attention_fwd"


def step_loop(ins):
    """The smallest backward-branch range holding two wgmma groups (QK^T and PV: two HGMMAs
    that close a group, `gsb0`)."""
    best = None
    for pc, text in ins:
        m = b.BRANCH.search(text)
        if not m or int(m.group(1), 16) >= pc:
            continue
        body = [x for x in ins if int(m.group(1), 16) <= x[0] <= pc]
        groups = sum("HGMMA" in t and "gsb0" in t for _, t in body)
        if groups >= 2 and (best is None or len(body) < len(best)):
            best = body
    return best or []


def skipped_ranges(body):
    """(kind, instructions) of the forward-branch ranges without a wgmma that a full step skips."""
    out = []
    for pc, text in body:
        m = b.BRANCH.search(text)
        if not m or int(m.group(1), 16) <= pc:
            continue
        inside = [x for x in body if pc < x[0] < int(m.group(1), 16)]
        joined = " ".join(t for _, t in inside)
        if "HGMMA" in joined or not inside:
            continue
        if "R2P" in joined and "-INF" in joined:
            out.append(("select", inside))
        elif "-INF" in joined and "FSEL" in joined:
            out.append(("keybound", inside))
        elif sum(b.opcode(t) == "FMUL" for _, t in inside) >= 32:
            out.append(("rescale", inside))
    # A select range may hold the key bound's range (base: one `if (t.partial)` around both):
    # the select pass is the range less the nested key-bound ranges. Then keep the outermost
    # range of each kind.
    bound = [{p for p, _ in r} for kind, r in out if kind == "keybound"]
    out = [(kind, [x for x in r if not (kind == "select" and any(x[0] in k for k in bound))])
           for kind, r in out]
    kept = []
    for kind, r in sorted(out, key=lambda x: -len(x[1])):
        pcs = {p for p, _ in r}
        if not any(pcs <= {p for p, _ in k[1]} for k in kept):
            kept.append((kind, r))
    return kept


def main(paths):
    if not paths:
        print(__doc__.strip())
        return 2
    for path in paths:
        body = step_loop(b.kernel_sass(path))
        if not body:
            print(f"{path}: no step loop found")
            continue
        counts = collections.Counter(b.kind(b.opcode(t)) for _, t in body)
        classes = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        ranges = skipped_ranges(body)
        size = collections.Counter()
        for kind, r in ranges:
            size[kind] += len(r)
        full = len(body) - sum(size.values())
        print(f"{os.path.basename(path)}: loop {len(body)} ({classes})")
        print(f"    skipped on a full step: " + ", ".join(f"{k} {v}" for k, v in sorted(size.items())))
        print(f"    full step {full}, partial step {full + size['select']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
