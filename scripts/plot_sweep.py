#!/usr/bin/env python3
"""Plots the CSV that `clustersim sweep --csv FILE` writes.

Two axes (the first two columns of the sweep): a heatmap of a metric over them, one cell per
point, refused points (status other than ok) hatched and labelled with the first words of their
reason. One axis: the metric against it, one line per value of the second axis when there is one.

  plot_sweep.py sweep.csv -o mfu.png                      # heatmap of MFU over the two axes
  plot_sweep.py sweep.csv --metric step_time_s -o t.png
  plot_sweep.py sweep.csv --line -o mfu_vs_tp.png         # MFU against the first axis

The metric is any numeric column (mfu is shown in percent).
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_sweep.py: {path} has no rows")
    header = list(rows[0].keys())
    status = header.index("status")
    axes = header[:status]
    if not axes:
        sys.exit(f"plot_sweep.py: {path} has no axis columns before 'status' (not a clustersim sweep CSV?)")
    return rows, axes


def value(row, metric):
    if row.get("status") != "ok" or row.get(metric, "") == "":
        return None
    v = float(row[metric])
    return v * 100 if metric == "mfu" else v


def label(metric):
    return {"mfu": "MFU (%)", "step_time_s": "step time (s)", "tokens_per_s": "tokens/s",
            "tflops_per_gpu": "TFLOP/s per GPU"}.get(metric, metric)


def short(axis):
    return axis.split(".")[-1]


def ordered(values):
    """Distinct values in first-seen order (the sweep's own order)."""
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def heatmap(rows, axes, metric, out):
    a, b = axes[0], axes[1]
    xs = ordered(r[b] for r in rows)
    ys = ordered(r[a] for r in rows)
    grid = [[None] * len(xs) for _ in ys]
    why = [[""] * len(xs) for _ in ys]
    for r in rows:
        i, j = ys.index(r[a]), xs.index(r[b])
        grid[i][j] = value(r, metric)
        if r["status"] != "ok":
            why[i][j] = " ".join(r.get("error", "").replace(":", " ").split()[-4:]) if "memory" not in r.get("error", "") else "out of memory"
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(xs), 1.2 + 0.9 * len(ys)))
    vals = [v for row in grid for v in row if v is not None]
    lo, hi = (min(vals), max(vals)) if vals else (0, 1)
    cmap = plt.get_cmap("viridis")
    for i in range(len(ys)):
        for j in range(len(xs)):
            v = grid[i][j]
            if v is None:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", hatch="//", edgecolor="0.7"))
                ax.text(j, i, why[i][j] or rows[0].get("status", ""), ha="center", va="center", fontsize=7, color="0.3",
                        wrap=True)
            else:
                t = (v - lo) / (hi - lo) if hi > lo else 0.5
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=cmap(t)))
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=9, color="white" if t < 0.6 else "black")
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_ylim(len(ys) - 0.5, -0.5)
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel(short(b))
    ax.set_ylabel(short(a))
    ax.set_title(f"{label(metric)} over {short(a)} x {short(b)}")
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(lo, hi))
    fig.colorbar(sm, ax=ax, label=label(metric))
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def line(rows, axes, metric, out):
    a = axes[0]
    series = ordered(r[axes[1]] for r in rows) if len(axes) > 1 else [None]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for s in series:
        pts = [(r[a], value(r, metric)) for r in rows if s is None or r[axes[1]] == s]
        xs = [float(x) for x, v in pts if v is not None]
        vs = [v for x, v in pts if v is not None]
        if xs:
            ax.plot(xs, vs, marker="o", label=None if s is None else f"{short(axes[1])} = {s}")
    ax.set_xscale("log", base=2)
    ticks = sorted({float(r[a]) for r in rows})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel(short(a))
    ax.set_ylabel(label(metric))
    ax.grid(True, alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8)
    ax.set_title(f"{label(metric)} against {short(a)} (refused points left out)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    p.add_argument("--metric", default="mfu", help="numeric column to plot (default mfu)")
    p.add_argument("--line", action="store_true", help="the metric against the first axis instead of a heatmap")
    args = p.parse_args()
    rows, axes = read(args.csv)
    if args.metric not in rows[0]:
        sys.exit(f"plot_sweep.py: no column '{args.metric}' in {args.csv}")
    if args.line or len(axes) < 2:
        line(rows, axes, args.metric, args.output)
    else:
        heatmap(rows, axes, args.metric, args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
