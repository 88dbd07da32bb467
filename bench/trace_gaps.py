"""Summarise torch.profiler chrome traces (``cp_bench.py --trace DIR``), run as
``python3 bench/trace_gaps.py DIR/*.json``: per trace, the kernels per stream (count,
ms), the busy time of the stream with the most kernel time, its idle gaps longer than
15 us (with the kernels around them), and how long each NCCL kernel ran beside the
attention kernels (docs/distributed.md, "Measurements")."""
import json
import sys
from collections import defaultdict


def load(path):
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    return [e for e in ev if e.get("cat") == "kernel" and "dur" in e]


def short(n):
    return n.split("(")[0].split("<")[0][:48]


def main(paths):
    for path in paths:
        ks = load(path)
        by = defaultdict(list)
        for e in ks:
            by[e["args"].get("stream", -1)].append(e)
        print(f"== {path.split('/')[-1]}: {len(ks)} kernels")
        for s, l in sorted(by.items(), key=lambda x: -sum(e["dur"] for e in x[1])):
            names = defaultdict(lambda: [0, 0.0])
            for e in l:
                names[short(e["name"])][0] += 1
                names[short(e["name"])][1] += e["dur"] / 1e3
            top = sorted(names.items(), key=lambda x: -x[1][1])[:8]
            print(f"  stream {s}: {len(l)} kernels, {sum(e['dur'] for e in l)/1e3:.3f} ms: "
                  + "; ".join(f"{n} x{c} {t:.3f}" for n, (c, t) in top))
        main_s = max(by, key=lambda s: sum(e["dur"] for e in by[s]))
        l = sorted(by[main_s], key=lambda e: e["ts"])
        span = (l[-1]["ts"] + l[-1]["dur"] - l[0]["ts"]) / 1e3
        busy = sum(e["dur"] for e in l) / 1e3
        print(f"  main stream {main_s}: span {span:.3f} ms, kernels {busy:.3f} ms, idle {span-busy:.3f} ms")
        gaps = []
        for a, b in zip(l, l[1:]):
            g = b["ts"] - (a["ts"] + a["dur"])
            if g > 15:
                gaps.append((g, short(a["name"]), short(b["name"])))
        gaps.sort(reverse=True)
        for g, a, b in gaps[:12]:
            print(f"    gap {g/1e3:.3f} ms after {a} before {b}")
        print(f"    gaps > 15 us: {len(gaps)}, total {sum(g for g, _, _ in gaps)/1e3:.3f} ms")
        nccl = [e for e in ks if "nccl" in e["name"].lower()]
        att = [e for e in l if "fragmask_attention" in e["name"]]
        for n in nccl:
            a0, a1 = n["ts"], n["ts"] + n["dur"]
            ov = sum(max(0, min(a1, e["ts"] + e["dur"]) - max(a0, e["ts"])) for e in att)
            print(f"    nccl {n['dur']/1e3:.3f} ms at +{(a0-l[0]['ts'])/1e3:.3f} ms, "
                  f"beside attention {ov/1e3:.3f} ms, grid {n['args'].get('grid')}")


if __name__ == "__main__":
    main(sys.argv[1:])
