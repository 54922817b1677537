#!/usr/bin/env python3
"""Makes a large multi-rank PyTorch profiler (Kineto) trace set for replay benchmarks.

Reads the 8 DLRM rank traces in tests/data/param-dlrm-8rank-v100 (one profiled step each) and
writes, per rank, a trace that repeats that step N times back to back: copy i has every event's
`ts` shifted by i x the step span and its ids (args "External id", args "correlation", flow `id`)
offset by i x 10^7, so they stay unique. The span is one for all ranks (the first event of any rank
to the last end of any rank), so the ranks keep their shared clock and their collectives still
line up; every rank keeps 8 NCCL kernels per step. Metadata events (ph "M") are written once;
every other event (cpu_op, cuda_runtime, kernel, gpu_memcpy, ac2g flows, annotations, instants)
is repeated. Top-level keys (distributedInfo, deviceProperties, ...) are kept in their order.

Written as a stream (one copy at a time). Python 3 standard library only.

  scripts/bench/big_kineto.py --out /tmp/clustersim-big-kineto            # N=160: ~1.07 GB in all
  scripts/bench/big_kineto.py --out DIR --repeat 10 --gzip
"""
import argparse
import glob
import gzip
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "tests", "data", "param-dlrm-8rank-v100")
ID_STRIDE = 10_000_000
DEFAULT_REPEAT = 160  # ~1.07 GB in all (the inputs are ~0.9 MB per rank; this layout ~0.83 MB per step)
SENTINEL = "\ue000bigkineto\ue000"  # a JSON string value no trace holds; replaced by numbers


def is_nccl_kernel(e):
    n = e.get("name", "")
    return e.get("cat") == "kernel" and (n.startswith("ncclKernel_") or n.startswith("ncclDevKernel_"))


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def template(e):
    """An event as text pieces around its variable numbers: (pieces, [(base, is_id)])."""
    e = dict(e)
    fields = []  # in the order json.dumps writes them: top-level keys in order, args inside
    for k in list(e.keys()):
        if k == "ts" and number(e[k]):
            fields.append((e[k], False))
            e[k] = SENTINEL
        elif k == "id" and number(e[k]):
            fields.append((e[k], True))
            e[k] = SENTINEL
        elif k == "args" and isinstance(e[k], dict):
            args = dict(e[k])
            for a in list(args.keys()):
                if a in ("External id", "correlation") and number(args[a]):
                    fields.append((args[a], True))
                    args[a] = SENTINEL
            e[k] = args
    text = json.dumps(e, ensure_ascii=False)
    pieces = text.split(json.dumps(SENTINEL, ensure_ascii=False))
    if len(pieces) != len(fields) + 1:
        raise SystemExit("big_kineto: an event holds the sentinel string: %r" % (e,))
    for base, is_id in fields:
        if is_id and (not isinstance(base, int) or base >= ID_STRIDE or base < 0):
            raise SystemExit("big_kineto: id %r is not an integer in [0, %d)" % (base, ID_STRIDE))
    return pieces, fields


def copy_text(templates, i, shift):
    out = []
    for pieces, fields in templates:
        out.append(",\n  ")
        out.append(pieces[0])
        for (base, is_id), piece in zip(fields, pieces[1:]):
            out.append(str(base + i * ID_STRIDE) if is_id else repr(base + i * shift))
            out.append(piece)
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="steps per rank (default %(default)s)")
    ap.add_argument("--gzip", action="store_true", help="write .json.gz instead of .json")
    ap.add_argument("--src", default=SRC, help="folder of the worker*_*.pt.trace.json.gz inputs")
    opt = ap.parse_args()
    if opt.repeat < 1:
        ap.error("--repeat must be at least 1")

    files = sorted(glob.glob(os.path.join(opt.src, "worker*_*.pt.trace.json.gz")),
                   key=lambda f: int(os.path.basename(f)[len("worker"):].split("_")[0]))
    if len(files) != 8:
        raise SystemExit("big_kineto: expected 8 worker traces in %s, found %d" % (opt.src, len(files)))
    docs = []
    for f in files:
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            docs.append(json.load(fh))

    # One span for every rank: from the first event of any rank to the last end of any rank.
    t0, t1 = math.inf, -math.inf
    nccl = []
    for d in docs:
        for e in d["traceEvents"]:
            if e.get("ph") == "M" or not number(e.get("ts")):
                continue
            t0 = min(t0, e["ts"])
            t1 = max(t1, e["ts"] + (e["dur"] if number(e.get("dur")) else 0))
        nccl.append(sum(1 for e in d["traceEvents"] if is_nccl_kernel(e)))
    if len(set(nccl)) != 1:
        raise SystemExit("big_kineto: ranks have different numbers of NCCL kernels: %s" % nccl)
    shift = math.ceil(t1 - t0)  # integer microseconds: integer timestamps stay integers

    os.makedirs(opt.out, exist_ok=True)
    total = 0
    for f, d in zip(files, docs):
        name = os.path.basename(f)[: -len(".gz")]
        path = os.path.join(opt.out, name + (".gz" if opt.gzip else ""))
        meta = [template(e) for e in d["traceEvents"] if e.get("ph") == "M"]
        body = [template(e) for e in d["traceEvents"] if e.get("ph") != "M"]
        keys = list(d.keys())
        if "traceEvents" not in keys:
            raise SystemExit("big_kineto: %s: no traceEvents" % f)
        k = keys.index("traceEvents")
        head = {key: d[key] for key in keys[:k]}
        tail = {key: d[key] for key in keys[k + 1:]}
        head_text = json.dumps(head, indent=2, ensure_ascii=False)[:-2] if head else "{"  # drop "\n}"
        tail_text = json.dumps(tail, indent=2, ensure_ascii=False)[1:]   # drop "{"
        opener = gzip.open(path, "wt", encoding="utf-8", compresslevel=6) if opt.gzip else \
            open(path, "w", encoding="utf-8")
        size = 0
        with opener as out:
            def write(s):
                nonlocal size
                out.write(s)
                size += len(s.encode("utf-8"))
            write(head_text + (",\n" if head else "\n") + '  "traceEvents": [')
            first = copy_text(meta + body, 0, shift)
            write("\n  " + first[len(",\n  "):])
            for i in range(1, opt.repeat):
                write(copy_text(body, i, shift))
            write("\n  ]" + ("," + tail_text if tail else "\n}") + "\n")
        total += size
        print("%s: %d steps, %d events, %d NCCL kernels, %d bytes" %
              (path, opt.repeat, len(meta) + len(body) * opt.repeat, nccl[0] * opt.repeat, size))
    print("step span %d us; total %d bytes uncompressed (%.3f GB) in %d files" % (shift, total, total / 1e9, len(files)))


if __name__ == "__main__":
    sys.exit(main())
