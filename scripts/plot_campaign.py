#!/usr/bin/env python3
"""Plots fault-tolerance campaigns from the JSON that `clustersim faults --json FILE` writes.

One file with a checkpoint-interval sweep (`checkpoint.sweep`): goodput and ETTR against the
checkpoint interval (mean and the 2.5-97.5th percentile band over trials), with Young's and
Daly's intervals and the best one marked. Several files: goodput per GPU and ETTR against cluster
size (GPUs), one point per file (its campaign at the configured interval).

The JSON (workloads/campaign/campaign.h, campaign_to_json and campaign_sweep_to_json):
  campaign: {job: {gpus, ...}, policy, ...}
  results: {ettr: {mean, p2_5, p97_5}, goodput_tokens_per_s: {...}, ...}
  sweep: {young_interval_s, daly_interval_s, best_interval_s, job: {gpus, ...},
          points: [{interval_s, every_steps, ettr: {...}, goodput_tokens_per_s: {...}, wall_h: {...}}]}

  plot_campaign.py sweep.json -o sweep.png
  plot_campaign.py 16k.json 32k.json 64k.json 131k.json -o scale.png
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def find(node, key):
    """The first dict value under `key`, searching the JSON depth-first."""
    if isinstance(node, dict):
        if key in node and isinstance(node[key], dict):
            return node[key], node
        for v in node.values():
            hit = find(v, key)
            if hit[0] is not None:
                return hit
    elif isinstance(node, list):
        for v in node:
            hit = find(v, key)
            if hit[0] is not None:
                return hit
    return None, None


def band(ax, x, est, scale, label, color):
    mean = [e["mean"] * scale for e in est]
    ax.plot(x, mean, "o-", color=color, label=label)
    ax.fill_between(x, [e["p2_5"] * scale for e in est], [e["p97_5"] * scale for e in est], color=color, alpha=0.2)


def plot_sweep(sweep, out, title):
    pts = sorted(sweep["points"], key=lambda p: p["interval_s"])
    x = [p["interval_s"] / 60 for p in pts]
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 7))
    band(ax1, x, [p["goodput_tokens_per_s"] for p in pts], 1e-6, "goodput", "tab:blue")
    band(ax2, x, [p["ettr"] for p in pts], 100, "ETTR", "tab:green")
    ax1.set_ylabel("goodput (M tokens/s)")
    ax2.set_ylabel("ETTR (%)")
    ax2.set_xlabel("checkpoint interval (min)")
    ax2.set_xscale("log")
    for ax in (ax1, ax2):
        for key, style, name in (("young_interval_s", "--", "Young"), ("daly_interval_s", ":", "Daly"),
                                 ("best_interval_s", "-", "best simulated")):
            if sweep.get(key):
                ax.axvline(sweep[key] / 60, linestyle=style, color="gray", label=f"{name} {sweep[key] / 60:.3g} min")
        ax.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8)
    job = sweep.get("job", {})
    ax1.set_title(title or f"{job.get('gpus', '?')} GPUs, {job.get('policy', '')}: mean and 2.5-97.5th percentile")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_scale(docs, out, title):
    rows = []
    for name, doc in docs:
        results, parent = find(doc, "results")
        if results is None or "ettr" not in results:
            sys.exit(f"{name}: no campaign results")
        gpus = parent.get("campaign", {}).get("job", {}).get("gpus")
        if not gpus:
            sys.exit(f"{name}: no campaign.job.gpus")
        rows.append((gpus, results))
    rows.sort(key=lambda r: r[0])
    x = [r[0] for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 7))
    per_gpu = [{k: v / g for k, v in r["goodput_tokens_per_s"].items()} for g, r in rows]
    band(ax1, x, per_gpu, 1, "goodput per GPU", "tab:blue")
    band(ax2, x, [r["ettr"] for _, r in rows], 100, "ETTR", "tab:green")
    ax1.set_ylabel("goodput per GPU (tokens/s)")
    ax2.set_ylabel("ETTR (%)")
    ax2.set_xlabel("cluster size (GPUs)")
    ax2.set_xscale("log", base=2)
    ax2.set_xticks(x, [f"{g:,}" for g in x])
    ax2.minorticks_off()
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_title(title or "campaigns by cluster size: mean and 2.5-97.5th percentile")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="JSON files written by clustersim faults --json")
    ap.add_argument("-o", "--output", default="campaign.png", help="PNG to write (default campaign.png)")
    ap.add_argument("--title", default="", help="plot title")
    args = ap.parse_args()
    docs = []
    for path in args.json:
        with open(path) as f:
            docs.append((path, json.load(f)))
    if len(docs) == 1:
        sweep, _ = find(docs[0][1], "sweep")
        if sweep is None or not sweep.get("points"):
            sys.exit(f"{args.json[0]}: no checkpoint sweep (set checkpoint.sweep); give several files to plot "
                     "against cluster size")
        plot_sweep(sweep, args.output, args.title)
    else:
        plot_scale(docs, args.output, args.title)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
