"""One PNG per family from the suite's results (matplotlib, CPU only): forward and backward
as dense-equivalent TF/s against sequence length, one panel per mask; the other families as
grouped bars (decode and packers: fraction of the copy roof; split and lightning: ms;
overhead: host µs per call). fragmask beside every peer that has a time."""
import os

METRIC = {  # family -> (row field, axis label, log scale)
    "forward": ("tflops", "dense-equivalent TF/s", False),
    "backward": ("tflops", "dense-equivalent TF/s", False),
    "split": ("ms", "ms (log)", True),
    "decode": ("of_roof", "fraction of the copy roof", False),
    "lightning": ("ms", "ms (log)", True),
    "packer": ("of_roof", "fraction of the copy roof", False),
    "overhead": ("host_us", "host µs per call", False),
}
COLORS = {"fragmask": "#d62728", "fragmask_cli": "#ff9896", "sdpa": "#1f77b4", "flex": "#2ca02c",
          "flex_fa4": "#98df8a", "fa4": "#9467bd", "fa4_varlen": "#c5b0d5", "torch_compile": "#8c564b",
          "torch": "#7f7f7f"}


def _value(r, field):
    if r["status"] != "ok":
        return None
    if field == "host_us":
        return r.get("host_us")
    return r.get(field)


VS_FA4 = "perf-vs-fa4.png"


def names(best, workloads, fa4=()):
    """{family: png file name} of the families that have results, and "vs_fa4" where
    ``fa4`` (report.fa4_rows) has rows."""
    fams = {w["family"] for w in workloads if w["name"] in best}
    out = {f: f"perf-{f}.png" for f in METRIC if f in fams}
    if fa4:
        out["vs_fa4"] = VS_FA4
    return out


def draw_vs_fa4(fa4, path, plt):
    """FlashAttention-4's time over fragmask's per row, forward and backward side by side,
    a line at 1 (above it fragmask is faster)."""
    fams = [f for f in ("forward", "backward") if any(r[0] == f for r in fa4)]
    n = max(sum(r[0] == f for r in fa4) for f in fams)
    fig, axes = plt.subplots(1, len(fams), figsize=(6.2 * len(fams), 0.8 + 0.32 * n), squeeze=False)
    for ax, family in zip(axes[0], fams):
        rows = [r for r in fa4 if r[0] == family]
        labels = [r[2].replace(f"{family} ", "") + (" (varlen)" if r[4]["system"] == "fa4_varlen" else "")
                  for r in rows]
        ratios = [r[4]["vs_fragmask"] for r in rows]
        colors = [COLORS["fragmask"] if x >= 1 else COLORS["fa4"] for x in ratios]
        ax.barh(range(len(rows)), ratios, color=colors)
        for i, x in enumerate(ratios):
            ax.text(x, i, f" {x:.3f}", va="center", fontsize=7)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        lo, hi = min(ratios + [1.0]), max(ratios + [1.0])
        ax.set_xlim(max(0.0, lo - 0.08), hi + 0.12)
        ax.set_xlabel("FA4's time over fragmask's (above 1: fragmask faster)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(family, fontsize=10)
    from matplotlib.patches import Patch
    fig.legend(handles=[Patch(color=COLORS["fragmask"], label="fragmask as fast or faster"),
                        Patch(color=COLORS["fa4"], label="FlashAttention-4 faster")],
               loc="lower center", ncol=2, fontsize=7, frameon=False)
    fig.suptitle("against FlashAttention-4, same run per row (dates and commits in docs/PERF.md)", fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(fig)


def draw(best, workloads, folder, fa4=()):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(folder, exist_ok=True)
    out = names(best, workloads, fa4)
    if fa4:
        draw_vs_fa4(fa4, os.path.join(folder, VS_FA4), plt)
    for family, png in out.items():
        if family == "vs_fa4":
            continue
        field, label, log = METRIC[family]
        ws = [w for w in workloads if w["family"] == family and w["name"] in best]
        lined = [w for w in ws if w["x"]]
        if family in ("forward", "backward") and lined:
            series = []
            for w in lined:
                if w["series"] not in series:
                    series.append(w["series"])
            cols = min(4, len(series))
            rows_n = -(-len(series) // cols)
            fig, axes = plt.subplots(rows_n, cols, figsize=(3.6 * cols, 3.0 * rows_n), squeeze=False)
            for i, s in enumerate(series):
                ax = axes[i // cols][i % cols]
                pts = {}
                for w in lined:
                    if w["series"] != s:
                        continue
                    x = w["params"][w["x"]]
                    for r in best[w["name"]][1]:
                        v = _value(r, field)
                        if v is not None:
                            pts.setdefault(r["system"], []).append((x, v))
                for system, xy in sorted(pts.items()):
                    xy.sort()
                    ax.plot([a for a, _ in xy], [b for _, b in xy], marker="o", label=system,
                            color=COLORS.get(system), linewidth=2.2 if system == "fragmask" else 1.2)
                ax.set_xscale("log", base=2)
                ax.set_title(s, fontsize=9)
                ax.set_xlabel("sequence length", fontsize=8)
                ax.set_ylabel(label, fontsize=8)
                ax.tick_params(labelsize=7)
                ax.set_ylim(bottom=0)
                ax.grid(alpha=0.3)
                ax.legend(fontsize=6)
            for j in range(len(series), rows_n * cols):
                axes[j // cols][j % cols].axis("off")
            fig.suptitle(f"{family} (B=1, H=16, D=128, bf16; each point from its workload's newest run, "
                         "dated in docs/PERF.md)", fontsize=9)
        else:
            systems = []
            for w in ws:
                for r in best[w["name"]][1]:
                    if r["system"] not in systems and _value(r, field) is not None:
                        systems.append(r["system"])
            labels, groups = [], []
            for w in ws:
                rows = best[w["name"]][1]
                variants = sorted({r.get("variant", "") for r in rows})
                for var in variants:
                    vals = {r["system"]: _value(r, field) for r in rows if r.get("variant", "") == var}
                    if any(v is not None for v in vals.values()):
                        labels.append(w["name"] + (f" [{var}]" if var else ""))
                        groups.append(vals)
            if not labels:
                continue
            height = 0.8 / max(1, len(systems))
            fig, ax = plt.subplots(figsize=(8, 0.5 + 0.42 * len(labels) * max(1, len(systems)) ** 0.5))
            for j, system in enumerate(systems):
                ys = [i + j * height for i in range(len(labels))]
                vals = [g.get(system) or 0 for g in groups]
                ax.barh(ys, vals, height=height, label=system, color=COLORS.get(system))
            ax.set_yticks([i + 0.4 - height / 2 for i in range(len(labels))])
            ax.set_yticklabels(labels, fontsize=7)
            ax.invert_yaxis()
            if log:
                ax.set_xscale("log")
            ax.set_xlabel(label, fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
            ax.grid(axis="x", alpha=0.3)
            ax.legend(fontsize=7, loc="best")
            ax.set_title(family, fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(folder, png), dpi=80, metadata={"Software": None})
        plt.close(fig)
    return out
