#!/usr/bin/env python3
"""Matrix-product throughput on one GPU, BF16 and FP8, at the shapes a Llama training step runs.

  python3 scripts/capture/gemm_bench.py --out gemm.json [--tokens 8192] [--seconds 10]

For every (M, K, N) below: BF16 `torch.mm`, and FP8 (e4m3 x e4m3 -> bf16) `torch._scaled_mm` with
one scale per tensor (torchtitan's / torchao's `tensorwise` recipe) and with one scale per row and
column (`rowwise`). Each is timed with CUDA events over `--reps` products after 3 warm-ups; the
result is TFLOP/s (2 M K N per product) and the fraction of the datasheet peak given by --peak-bf16
and --peak-fp8 (H100 SXM: 989 and 1979 TFLOP/s dense). Then, with `--seconds` > 0, one 8192^3 BF16
product runs back to back for that long and TFLOP/s is printed per second, to read the sustained
rate while `nvidia-smi` samples power and clocks beside it. Inputs are random normal (the
GPU's power, and so its clock, depends on the data: zeros run faster).
"""
import argparse
import json
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--tokens", type=int, default=8192, help="M, tokens per micro-batch (default 8192)")
    p.add_argument("--reps", type=int, default=20, help="timed products per shape (default 20)")
    p.add_argument("--seconds", type=float, default=10.0, help="each sustained 8192^3 run (default 10 s)")
    p.add_argument("--sustained", default="bf16", help="comma-separated dtypes of the sustained runs: bf16, fp8 "
                   "(tensorwise torch._scaled_mm) (default bf16)")
    p.add_argument("--only-sustained", action="store_true", help="skip the per-shape table")
    p.add_argument("--peak-bf16", type=float, default=989.0, help="TFLOP/s (default: H100 SXM, 989)")
    p.add_argument("--peak-fp8", type=float, default=1979.0, help="TFLOP/s (default: H100 SXM, 1979)")
    a = p.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"gemm_bench.py: error: PyTorch is not installed ({e})", file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        print("gemm_bench.py: error: no CUDA device is visible", file=sys.stderr)
        sys.exit(2)
    dev = torch.device("cuda")
    m = a.tokens
    # Llama 3 8B's linears (hidden 4096, KV 1024, FFN 14336, vocabulary 128256), forward (x W^T) and
    # the backward's data-gradient shapes (K and N swapped); 70B's (hidden 8192, FFN 28672) and a cube.
    shapes = [(m, 4096, 4096), (m, 4096, 1024), (m, 4096, 14336), (m, 14336, 4096),
              (m, 4096, 128256), (m, 1024, 4096), (m, 128256, 4096),
              (m, 8192, 8192), (m, 8192, 28672), (m, 28672, 8192), (8192, 8192, 8192)]

    def timed(fn):
        for _ in range(3):
            fn()
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0.record()
        for _ in range(a.reps):
            fn()
        t1.record()
        torch.cuda.synchronize()
        return t0.elapsed_time(t1) / a.reps / 1e3  # seconds per product

    rows = []
    f8 = torch.float8_e4m3fn
    for (mm, k, n) in ([] if a.only_sustained else shapes):
        x = torch.randn(mm, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        flops = 2.0 * mm * k * n
        row = {"m": mm, "k": k, "n": n}
        row["bf16_s"] = timed(lambda: torch.mm(x, w.t()))
        xq, wq = x.to(f8), w.to(f8)
        one = torch.ones((), device=dev, dtype=torch.float32)
        row["fp8_tensorwise_s"] = timed(
            lambda: torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        # torchao's forward GEMM accumulates fast (Float8LinearConfig: gemm_config_output use_fast_accum)
        row["fp8_tensorwise_fast_s"] = timed(
            lambda: torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True))
        sa = torch.ones(mm, 1, device=dev, dtype=torch.float32)
        sb = torch.ones(1, n, device=dev, dtype=torch.float32)
        try:
            row["fp8_rowwise_s"] = timed(
                lambda: torch._scaled_mm(xq, wq.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16))
        except RuntimeError as e:  # rowwise scaling needs a recent PyTorch and sm_90
            row["fp8_rowwise_error"] = str(e).splitlines()[0]
        for key, peak in (("bf16", a.peak_bf16), ("fp8_tensorwise", a.peak_fp8), ("fp8_tensorwise_fast", a.peak_fp8),
                          ("fp8_rowwise", a.peak_fp8)):
            if key + "_s" in row:
                tf = flops / row[key + "_s"] / 1e12
                row[key + "_tflops"] = round(tf, 1)
                row[key + "_of_peak"] = round(tf / peak, 4)
        rows.append(row)
        print(f"{mm}x{k}x{n}: bf16 {row['bf16_tflops']} TF ({row['bf16_of_peak']:.0%}), fp8 tensorwise "
              f"{row['fp8_tensorwise_tflops']} TF ({row['fp8_tensorwise_of_peak']:.0%}; fast accumulation "
              f"{row['fp8_tensorwise_fast_tflops']} TF), rowwise "
              f"{row.get('fp8_rowwise_tflops')} TF", flush=True)
        del x, w, xq, wq

    sustained = {}
    for dtype in [d for d in a.sustained.split(",") if d] if a.seconds > 0 else []:
        if dtype not in ("bf16", "fp8"):
            print(f"gemm_bench.py: error: --sustained: unknown dtype {dtype!r} (bf16, fp8)", file=sys.stderr)
            sys.exit(2)
        x = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        w = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        if dtype == "fp8":
            xq, wq = x.to(f8), w.to(f8)
            one = torch.ones((), device=dev, dtype=torch.float32)
            product = lambda: torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            product = lambda: torch.mm(x, w)
        runs = sustained.setdefault(dtype, [])
        end = time.time() + a.seconds
        while time.time() < end:
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            n = 0
            while n < 1000:
                product()
                n += 1
                if n % 50 == 0:
                    t1.record()
                    t1.synchronize()
                    if t0.elapsed_time(t1) > 1000:
                        break
            t1.record()
            t1.synchronize()
            tf = 2.0 * 8192 ** 3 * n / (t0.elapsed_time(t1) / 1e3) / 1e12
            runs.append({"t": round(time.time(), 3), "tflops": round(tf, 1)})
            print(f"sustained 8192^3 {dtype}: {tf:.1f} TF", flush=True)

    info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "peak_bf16_tflops": a.peak_bf16, "peak_fp8_tflops": a.peak_fp8, "reps": a.reps,
            "shapes": rows, "sustained_8192": sustained}
    with open(a.out, "w") as f:
        json.dump(info, f, indent=2)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
