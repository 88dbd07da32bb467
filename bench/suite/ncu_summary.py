"""Side-by-side headline metrics of ncu_pair.sh's raw CSVs (one column per kernel).

    python3 bench/suite/ncu_summary.py DIR     # reads DIR/*.raw.csv[.gz] and the ones in DIR/*.tar
"""
import csv
import glob
import gzip
import io
import re
import sys
import tarfile

KEEP = [
    ("time ms", "gpu__time_duration.sum", 1),
    ("regs", "launch__registers_per_thread", 1),
    ("grid", "launch__grid_size", 1),
    ("block", "launch__block_size", 1),
    ("inst M", "smsp__inst_executed.sum", 1e-6),
    ("issue %", "sm__inst_issued.avg.pct_of_peak_sustained_active", 1),
    ("gmma %", "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", 1),
    ("dram GB/s", "dram__bytes.sum.per_second", 1e-9),
    ("cyc/issue", "smsp__average_warp_latency_per_inst_issued.ratio", 1),
]
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")


def load(path, data=None):
    """(header, rows) of a raw CSV: the file at ``path``, or ``data`` (its bytes) named so."""
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    text = (gzip.decompress(data) if path.endswith(".gz") else data).decode()
    rows = list(csv.reader(io.StringIO(text)))
    head = rows[0]
    body = [r for r in rows[2:] if len(r) == len(head)]   # row 1 holds the units
    return head, body


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def raw_csvs(folder):
    """(name, header, rows) of every raw CSV in ``folder``, loose or in an NCU_BUNDLE tar."""
    out = [(p.split("/")[-1],) + load(p) for p in glob.glob(f"{folder}/*.raw.csv*")]
    for bundle in glob.glob(f"{folder}/*.tar"):
        with tarfile.open(bundle) as tar:
            for m in tar.getmembers():
                if m.isfile() and ".raw.csv" in m.name:
                    out.append((m.name,) + load(m.name, tar.extractfile(m).read()))
    return sorted(out, key=lambda x: x[0])


def main():
    for name, head, body in raw_csvs(sys.argv[1]):
        col = {h: i for i, h in enumerate(head)}
        print(f"== {name}")
        for r in body:
            kernel = r[col.get("Kernel Name", 0)][:60]
            vals = []
            for label, metric, mul in KEEP:
                if metric in col and num(r[col[metric]]) is not None:
                    vals.append(f"{label}={num(r[col[metric]]) * mul:.4g}")
            stalls = []
            for h, i in col.items():
                m = STALL.match(h)
                if m and num(r[i]):
                    stalls.append((num(r[i]), m.group(1)))
            stalls.sort(reverse=True)
            print(f"  {kernel}\n    " + " ".join(vals))
            print("    stalls/issue: " + " ".join(f"{n}={v:.2f}" for v, n in stalls[:8]))


if __name__ == "__main__":
    main()
