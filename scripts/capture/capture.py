#!/usr/bin/env python3
"""Capture, per rank, a PyTorch profiler (Kineto) Chrome trace and a PyTorch execution trace of a
Llama-style training step, for `clustersim replay` and `clustersim calibrate` (see README.md here).

  python3 scripts/capture/capture.py --out traces/run1                       # one GPU
  torchrun --nproc-per-node 8 scripts/capture/capture.py --tp 8 --out traces/tp8

Writes into --out: rank{r}.trace.json[.gz] (Kineto, the --steps profiled steps), rank{r}.et.json[.gz]
(execution trace of the same steps) and, from rank 0, capture.json (GPU, versions, arguments, step
times, tokens/s, model FLOPs). APIs: https://pytorch.org/docs/stable/profiler.html
"""
import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import sys
import time


def die(msg):
    print(f"capture.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Capture Kineto + execution traces of a Llama-style training step, per rank.",
        epilog="Multi-GPU: torchrun --nproc-per-node N scripts/capture/capture.py [--tp T] ...; "
        "data parallel = N / T.")
    m = p.add_argument_group("model")
    m.add_argument("--layers", type=int, default=2, help="transformer blocks (default 2)")
    m.add_argument("--hidden", type=int, default=2048, help="model width (default 2048)")
    m.add_argument("--heads", type=int, default=16, help="attention heads (default 16)")
    m.add_argument("--kv-heads", type=int, default=None, help="key/value heads (default: --heads)")
    m.add_argument("--ffn", type=int, default=None,
                   help="SwiGLU inner width (default: 8/3 hidden rounded up to a multiple of 256)")
    m.add_argument("--vocab", type=int, default=32000, help="vocabulary size (default 32000)")
    m.add_argument("--no-rope", dest="rope", action="store_false", help="no rotary embeddings")
    m.add_argument("--norm", choices=["manual", "nn"], default="manual",
                   help="RMSNorm: manual (x.float(), pow, mean, rsqrt, two multiplies: the Llama reference and "
                   "torchtitan's 2024 norms.py; default) or nn (torch.nn.RMSNorm, torchtitan's model code today)")
    m.add_argument("--code", choices=["fused-qkv", "torchtitan"], default="fused-qkv",
                   help="model code: fused-qkv (default: one gate/up projection split by chunk, RoPE by "
                   "halves and cat, GQA by repeat_interleave) or torchtitan (its llama3 model.py: separate w1/w3, "
                   "RoPE as a complex product, repeat_kv by expand + reshape), the code clustersim's "
                   "`kernels: eager` describes")
    m.add_argument("--ac", choices=["none", "full", "selective-op"], default="none",
                   help="activation checkpointing per block, as torchtitan applies it: none (default), full "
                   "(torch.utils.checkpoint of every block) or selective-op (torchtitan's op-level SAC: keep "
                   "the outputs of aten.mm except every second call in a block, of SDPA, reduce_scatter and "
                   "aten.max; recompute the rest)")
    m.add_argument("--fp8", choices=["none", "tensorwise"], default="none",
                   help="tensorwise: the blocks' linear layers in FP8 with torchao's dynamic tensorwise scaling "
                   "(e4m3 forward, e5m2 gradients, torch._scaled_mm; the output layer stays BF16), as torchtitan's "
                   "Float8 converter runs them; needs a GPU with FP8 (Hopper or newer)")
    r = p.add_argument_group("run")
    r.add_argument("--seq", type=int, default=2048, help="sequence length (default 2048)")
    r.add_argument("--batch", type=int, default=1, help="micro-batch per data-parallel rank (default 1)")
    r.add_argument("--warmup", type=int, default=3,
                   help="unrecorded steps first (default 3; DDP settles its buckets in step 2)")
    r.add_argument("--steps", type=int, default=1, help="profiled steps (default 1)")
    r.add_argument("--timed", type=int, default=5,
                   help="steps timed after the profiler stopped, unrecorded (default 5)")
    r.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16",
                   help="parameter and activation dtype (default bf16)")
    r.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    r.add_argument("--compile", action="store_true",
                   help="torch.compile the model (Inductor fuses the elementwise and norm kernels; "
                   "needs --warmup 2 or more, the first steps compile)")
    r.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: a smoke test without a GPU (default cuda)")
    r.add_argument("--out", required=True, help="output directory (created)")
    r.add_argument("--gzip", action="store_true", help="write .trace.json.gz and .et.json.gz")
    a = p.parse_args(argv)
    if a.kv_heads is None:
        a.kv_heads = a.heads
    if a.ffn is None:
        a.ffn = (8 * a.hidden // 3 + 255) // 256 * 256
    return a


def check_args(a, world):
    """Every shape and layout rule, with a message naming the numbers."""
    for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "batch", "steps", "tp"):
        if getattr(a, name) < 1:
            die(f"--{name.replace('_', '-')} must be at least 1")
    if a.warmup < 0 or a.timed < 0:
        die("--warmup and --timed must be 0 or more")
    if a.compile and a.warmup < 2:
        die(f"--compile needs --warmup 2 or more (got {a.warmup}): the first forward and backward compile")
    if a.hidden % a.heads:
        die(f"--hidden {a.hidden} is not a multiple of --heads {a.heads}")
    if a.rope and (a.hidden // a.heads) % 2:
        die(f"head dimension {a.hidden // a.heads} is odd; rotary embeddings need it even (or --no-rope)")
    if a.heads % a.kv_heads:
        die(f"--heads {a.heads} is not a multiple of --kv-heads {a.kv_heads}")
    if world % a.tp:
        die(f"--tp {a.tp} does not divide the {world} processes (launch torchrun --nproc-per-node N, "
            f"N a multiple of {a.tp})")
    if a.heads % a.tp or a.kv_heads % a.tp:
        die(f"--heads {a.heads} and --kv-heads {a.kv_heads} must both be multiples of --tp {a.tp}")
    if a.ffn % a.tp:
        die(f"--ffn {a.ffn} is not a multiple of --tp {a.tp}")
    if a.fp8 != "none":
        if a.device != "cuda":
            die("--fp8 needs --device cuda (torch._scaled_mm runs on FP8 tensor cores)")
        for name in ("hidden", "ffn"):
            if getattr(a, name) % (16 * a.tp):
                die(f"--fp8: --{name} {getattr(a, name)} must be a multiple of 16 x tp (torch._scaled_mm's shapes)")
        if (a.batch * a.seq) % 16:
            die(f"--fp8: --batch x --seq = {a.batch * a.seq} tokens must be a multiple of 16 (torch._scaled_mm's shapes)")


def model_flops(a, dp):
    """Model FLOPs of one training step over the whole job, and the parameter counts.

    FLOPs = 6 * N * T + 12 * L * hidden * seq * T          (forward 2 flops per MAC, backward 2x forward)
      N: parameters that take part in matmuls, all TP shards together: per layer the Q, K, V and output
         projections and the three SwiGLU matrices, plus the LM head (the input embedding is a lookup);
      T: tokens per step = batch * seq * dp;
      the second term is attention's QK^T and softmax(.)V: 2 matmuls * 2 flops * seq * hidden per token
      and layer, times 3 for forward and backward, counted as if not causal (the usual convention;
      causal kernels skip about half of it).
    """
    hd = a.hidden // a.heads
    per_layer = a.hidden * hd * (a.heads + 2 * a.kv_heads) + a.heads * hd * a.hidden + 3 * a.hidden * a.ffn
    n_matmul = a.layers * per_layer + a.hidden * a.vocab
    n_total = n_matmul + a.vocab * a.hidden + (2 * a.layers + 1) * a.hidden  # + embedding and norms
    tokens = a.batch * a.seq * dp
    flops = 6 * n_matmul * tokens + 12 * a.layers * a.hidden * a.seq * tokens
    return flops, n_matmul, n_total, tokens


def gzip_file(path):
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)
    return path + ".gz"


def main():
    a = parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    check_args(a, world)
    tp, dp = a.tp, world // a.tp

    try:  # imported only now, so that --help and argument errors need no torch
        import torch
        import torch.distributed as dist
        from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule
    except ImportError as e:
        die(f"PyTorch is not installed ({e}); install torch (with CUDA for GPU captures) first")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from model import Llama

    cuda = a.device == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            die("no CUDA device is visible (torch.cuda.is_available() is False; torch "
                f"{torch.__version__}, built for CUDA {torch.version.cuda}); run on a GPU machine, "
                "or pass --device cpu for a smoke test")
        if local_rank >= torch.cuda.device_count():
            die(f"LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} GPUs are visible")
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]

    # Process groups: TP groups are runs of consecutive ranks (TP inside a node), DP groups strided.
    # Every rank creates every group, in the same order, as torch.distributed requires.
    tp_group = dp_group = None
    if world > 1:
        dist.init_process_group(backend="nccl" if cuda else "gloo")
        for i in range(dp):  # TP groups
            ranks = list(range(i * tp, (i + 1) * tp))
            g = dist.group.WORLD if tp == world else (dist.new_group(ranks) if tp > 1 else None)
            if rank in ranks:
                tp_group = g
        for j in range(tp):  # DP groups
            ranks = list(range(j, world, tp))
            g = dist.group.WORLD if dp == world else (dist.new_group(ranks) if dp > 1 else None)
            if rank in ranks:
                dp_group = g

    def barrier():
        if world > 1 and cuda:
            dist.barrier(device_ids=[local_rank])
        elif world > 1:
            dist.barrier()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    torch.manual_seed(1234 + rank)
    model = Llama(a, tp, tp_group).to(device=device, dtype=dtype)
    model.prepare(device)
    if dp > 1:  # DDP-style gradient all-reduce over the DP group (buffers: none to broadcast)
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank] if cuda else None, process_group=dp_group,
            broadcast_buffers=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    if a.compile:  # after DDP, as the DDP + torch.compile notes advise; the warmup steps compile
        model = torch.compile(model)
    # One random batch, made once and reused: no host-to-device copies inside the profiled steps.
    gen = torch.Generator(device=device).manual_seed(99 + rank // tp)  # same data on a TP group
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=device, generator=gen)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    os.makedirs(a.out, exist_ok=True)
    trace_path = os.path.join(a.out, f"rank{rank}.trace.json")
    et_path = os.path.join(a.out, f"rank{rank}.et.json")
    written = []

    def on_trace_ready(prof):  # called once, after the last active step
        prof.export_chrome_trace(trace_path)
        written.append(gzip_file(trace_path) if a.gzip else trace_path)

    et = ExecutionTraceObserver()
    et.register_callback(et_path)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    total = a.warmup + a.steps
    step_ms, losses = [], []

    def train_step():  # one step; returns its GPU time in ms (CUDA events) and the loss tensor
        if cuda:
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
        else:
            c0 = time.perf_counter()
        loss = model(inputs, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            t1.record()
        sync()  # ends the step on the GPU; no .item() (a copy) inside the step
        return (t0.elapsed_time(t1) if cuda else (time.perf_counter() - c0) * 1e3), loss.detach()

    sync()
    barrier()  # all ranks enter the profiled loop together (the barrier itself is not recorded)
    with profile(activities=activities, record_shapes=True, with_stack=False,
                 schedule=schedule(wait=0, warmup=a.warmup, active=a.steps, repeat=1),
                 on_trace_ready=on_trace_ready) as prof:
        for i in range(total):
            # The execution trace covers exactly the steps Kineto records, so that replay's
            # k-th NCCL kernel and k-th nccl:* node are the same collective.
            if i == a.warmup:
                et.start()
            ms, loss = train_step()
            step_ms.append(ms)
            losses.append(loss)
            if i == total - 1:
                et.stop()
            prof.step()
    et.unregister_callback()  # finalises the file
    written.append(gzip_file(et_path) if a.gzip else et_path)
    sync()
    barrier()
    # Steps without the profiler (its CPU-side recording slows the host): the step time to compare
    # a simulation against.
    free_ms = [train_step()[0] for _ in range(a.timed)]

    # Step times: the slowest rank per step (this all-reduce runs after the profiler stopped).
    def slowest(values):
        t = torch.tensor(values, dtype=torch.float64, device=device)
        if world > 1:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()
    times, free_ms = slowest(step_ms), slowest(free_ms)
    mem = {}
    if cuda:  # this rank's peaks over the whole run: tensors allocated, and what the allocator reserved
        mem = {"max_memory_allocated": torch.cuda.max_memory_allocated(device),
               "max_memory_reserved": torch.cuda.max_memory_reserved(device),
               "device_memory_total": torch.cuda.get_device_properties(device).total_memory}
        # The caching allocator's view, for modelling what it reserves beyond the tensors: peaks of
        # what tensors asked for (requested), what the allocator gave them (allocated, rounded up),
        # the free tails of split blocks (inactive_split), what it holds from the driver (reserved)
        # and in how many segments, per pool (small: requests up to 1 MiB, in 2 MiB segments), and
        # the segments held at the end of the run (size, bytes in use, pool).
        stats = torch.cuda.memory_stats(device)
        keys = [f"{k}.{pool}.{w}" for k in ("requested_bytes", "allocated_bytes", "active_bytes",
                                            "inactive_split_bytes", "reserved_bytes", "segment")
                for pool in ("all", "large_pool", "small_pool") for w in ("peak", "current")]
        keys += ["num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"]
        mem["allocator"] = {k: stats[k] for k in keys if k in stats}
        mem["segments_at_end"] = [[sg["total_size"], sg["allocated_size"], sg["segment_type"]]
                                  for sg in torch.cuda.memory_snapshot()]
    for f in written:
        print(f"rank {rank}: wrote {f} ({os.path.getsize(f) / 1e6:.2f} MB)")

    if rank == 0:
        flops, n_matmul, n_total, tok = model_flops(a, dp)
        steady = times[1:] if len(times) > 1 else times  # the first step pays one-time setup
        med_s = statistics.median(steady) / 1e3
        # tokens/s and TFLOP/s from the steps without the profiler when there are any
        rate_s = statistics.median(free_ms) / 1e3 if free_ms else med_s
        nccl = None
        if cuda and hasattr(torch.cuda, "nccl"):
            try:
                v = torch.cuda.nccl.version()
                nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
            except Exception:  # NCCL absent from this build
                nccl = None
        info = {
            "tool": "clustersim scripts/capture/capture.py",
            "host": socket.gethostname(),
            "device": torch.cuda.get_device_name(local_rank) if cuda else "cpu",
            "gpus_visible": torch.cuda.device_count() if cuda else 0,
            "torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl,
            "cudnn": torch.backends.cudnn.version() if cuda else None,
            "args": vars(a), "world": world, "tp": tp, "dp": dp,
            "layout": "TP groups: consecutive ranks; DP groups: ranks r, r+tp, r+2tp, ...",
            "params_total": n_total, "params_matmul": n_matmul,
            "tokens_per_step": tok,
            "flops_per_step": flops,
            "flops_formula": "6*N*T + 12*layers*hidden*seq*T, N = matmul params, T = batch*seq*dp",
            "step_ms": times,  # per step, max over ranks, CUDA events (warmup steps first)
            "profiled_steps": list(range(a.warmup, total)),
            "median_step_ms": med_s * 1e3,
            "unprofiled_step_ms": free_ms,  # after the profiler stopped (--timed), max over ranks
            "median_unprofiled_step_ms": statistics.median(free_ms) if free_ms else None,
            "memory_rank0": mem,
            "tokens_per_s": tok / rate_s,
            "tflops_per_gpu": flops / rate_s / world / 1e12,
            "loss_last": losses[-1].float().item(),
            "files": [f"rank{r}.{kind}.json" + (".gz" if a.gzip else "")
                      for kind in ("trace", "et") for r in range(world)],  # rank order
        }
        with open(os.path.join(a.out, "capture.json"), "w") as f:
            json.dump(info, f, indent=2)
        print(f"{info['device']}: median step {med_s * 1e3:.2f} ms profiling, {rate_s * 1e3:.2f} ms not; "
              f"{info['tokens_per_s']:.0f} tokens/s, "
              f"{info['tflops_per_gpu']:.1f} model TFLOP/s per GPU; wrote {a.out}/capture.json")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
