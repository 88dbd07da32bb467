#!/usr/bin/env python3
"""Instruction counts of the backward's step loop, from SASS, without a GPU.

    cargo run --release --example kernel_fingerprints -- /tmp/fp     # every variant's .cu and .sass
    python3 bench/backward_step_loop.py /tmp/fp/bwd-*d128*window*.sass

For each file: the main kernel (`fragmask_attention_bwd`), its step loop (the innermost
backward branch whose range holds every HGMMA of the loop), the static count by class, and
the instructions on the unmasked path per step and consumer warp: the loop less the mask
apply (a forward-branch range holding `FSEL ... -INF`), less the dK path taken only by a
warpgroup with no dQ chunk, with the lane-0 bulk-reduction block counted for one warp in four.
On 41f7677's D=128 kernel this gives 506 against Nsight Compute's executed 503
(docs/backward.md, "The step loop beside FlashAttention-4").
"""
import collections
import re
import sys

KERNEL = "fragmask_attention_bwd"
BRANCH = re.compile(r"BRA (?:\S+, )?0x([0-9a-f]+)")


def kernel_sass(path):
    """(address, instruction text) of the main kernel's SASS in `cuobjdump -sass` output."""
    out, current = [], None
    with open(path, errors="replace") as f:
        for line in f:
            m = re.match(r"\s*Function : (\S+)", line)
            if m:
                current = m.group(1)
                continue
            if current != KERNEL:
                continue
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
            if m:
                out.append((int(m.group(1), 16), m.group(2)))
    return out


def step_loop(ins):
    """The smallest backward-branch range with the most HGMMAs."""
    best = None
    for pc, text in ins:
        m = BRANCH.search(text)
        if not m or int(m.group(1), 16) >= pc:
            continue
        body = [x for x in ins if int(m.group(1), 16) <= x[0] <= pc]
        key = (-sum("HGMMA" in t for _, t in body), len(body))
        if key[0] < 0 and (best is None or key < best[0]):
            best = (key, body)
    return best[1] if best else []


def opcode(text):
    words = text.split()
    return (words[1] if words[0].startswith("@") else words[0]).split(".")[0]


def kind(op):
    if op.startswith("U") or op in ("R2UR", "S2UR"):
        return "uniform"
    if op in ("LDS", "STS", "STSM", "HGMMA", "WARPGROUP"):
        return op
    if op in ("FFMA", "FADD", "FMUL", "MUFU", "F2FP", "FSEL", "FMNMX"):
        return "float"
    if op in ("BRA", "BSSY", "BSYNC"):
        return "branch"
    if op in ("IMAD", "LOP3", "SHF", "LEA", "VIADD", "IADD3", "ISETP", "PLOP3", "PRMT", "MOV", "SEL", "S2R"):
        return "integer"
    return "other"


def unmasked_path(body):
    weight = {pc: 1.0 for pc, _ in body}
    for i, (pc, text) in enumerate(body):
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) > pc:
            skipped = [x for x in body if pc < x[0] < int(m.group(1), 16)]
            joined = " ".join(t for _, t in skipped)
            if "FSEL" in joined and "-INF" in joined and "HGMMA" not in joined:
                for x in skipped:
                    weight[x[0]] = 0.0
            if "UBLKRED" in joined and "HGMMA" not in joined:
                for x in skipped:
                    weight[x[0]] = min(weight[x[0]], 0.25)
        if text.startswith("BRA "):
            block = []
            for x in body[i + 1:]:
                if "BSYNC" in x[1]:
                    break
                block.append(x)
            if any("HGMMA" in t for _, t in block) and not any("tnspA" in t for _, t in block) and len(block) < 40:
                for x in block:
                    weight[x[0]] = 0.0
    return sum(weight.values())


def main(paths):
    if not paths:
        print(__doc__.strip())
        return 2
    for path in paths:
        body = step_loop(kernel_sass(path))
        if not body:
            print(f"{path}: no step loop found")
            continue
        counts = collections.Counter(kind(opcode(t)) for _, t in body)
        classes = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"{path}: {len(body)} instructions ({classes}); unmasked path {unmasked_path(body):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
