#!/usr/bin/env python3
"""Plots where a training step's time goes, from the JSON that `clustersim run --json FILE` writes.

One horizontal bar per file, split into the breakdown's parts (compute, exposed TP/CP/PP/DP
communication, pipeline bubble, optimizer), labelled with the file's layout (config: tp/cp/pp/dp)
and MFU. Several files compare layouts or clusters side by side.

  plot_step.py run.json -o step.png
  plot_step.py tp8pp4.json tp4pp8.json -o compare.png
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PARTS = [("compute_s", "compute", "#4c72b0"), ("exposed_tp_s", "exposed TP", "#dd8452"),
         ("exposed_cp_s", "exposed CP", "#937860"), ("exposed_pp_s", "exposed PP", "#da8bc3"),
         ("exposed_dp_s", "exposed DP", "#c44e52"), ("bubble_s", "pipeline bubble", "#8c8c8c"),
         ("optimizer_s", "optimizer", "#55a868"), ("host_wait_s", "host launch wait", "#8172b3")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json", nargs="+")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    args = p.parse_args()
    runs = []
    for path in args.json:
        with open(path) as f:
            j = json.load(f)
        if "breakdown" not in j:
            sys.exit(f"plot_step.py: {path} has no 'breakdown' (a training run's JSON is needed)")
        c = j.get("config", {})
        name = f"{c.get('model', j.get('scenario', path))}\ntp{c.get('tp', '?')} cp{c.get('cp', '?')} " \
               f"pp{c.get('pp', '?')} dp{c.get('dp', '?')}, MFU {100 * j.get('mfu', 0):.1f}%"
        runs.append((name, j["breakdown"], j.get("step_time_s", 0)))
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.8 * len(runs)))
    for i, (name, b, step) in enumerate(runs):
        left = 0.0
        for key, lab, color in PARTS:
            v = float(b.get(key, 0.0))
            if v <= 0:
                continue
            ax.barh(i, v, left=left, color=color, label=lab if i == 0 or lab not in ax.get_legend_handles_labels()[1] else None)
            if step > 0 and v / step > 0.06:
                ax.text(left + v / 2, i, f"{100 * v / step:.0f}%", ha="center", va="center", fontsize=8, color="white")
            left += v
    ax.set_yticks(range(len(runs)), [r[0] for r in runs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step (mean over ranks; the parts add up to the step time)")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    ax.set_title("where the step's time goes")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
