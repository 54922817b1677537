"""A small Llama-style decoder for trace capture (imported by capture.py once torch is known to exist).

`--code torchtitan` switches the attention and MLP to torchtitan's llama3 model code (separate
projections, complex RoPE, repeat_kv); the default keeps the fused projections described below.

RMSNorm, optional rotary embeddings, causal attention through F.scaled_dot_product_attention (grouped
KV heads allowed), SwiGLU MLP. Tensor parallelism is Megatron-style: the QKV and gate/up projections
are column-parallel (each TP rank holds heads/tp heads and ffn/tp FFN columns), the attention output
and down projections are row-parallel and followed by an all-reduce over the TP group; the gradient
of the input of a column-parallel block is all-reduced in backward. The embedding, norms and LM head
are replicated on every TP rank (Megatron shards the vocabulary too; kept simple here). Every rank
initialises its own shard at random: the numbers are meaningless, the kernels and messages are real.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


class _CopyToTP(torch.autograd.Function):
    """Forward: identity. Backward: all-reduce the input gradient over the TP group (Megatron's "f")."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """Forward: all-reduce the partial sums over the TP group. Backward: identity (Megatron's "g")."""

    @staticmethod
    def forward(ctx, x, group):
        dist.all_reduce(x, group=group)  # in place: x is a fresh matmul output nobody saved
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _to_fp8(t, dtype):
    """torchao's dynamic tensorwise scaling (float8/float8_scaling_utils.py, hp_tensor_to_float8_dynamic):
    scale = FP8 max / amax(|t|) in FP32, cast t * scale with saturation; returns the FP8 tensor and
    1 / scale, which torch._scaled_mm multiplies back."""
    fmax = torch.finfo(dtype).max
    amax = t.abs().max().float().clamp(min=1e-12)
    scale = fmax / amax
    return (t.float() * scale).clamp(-fmax, fmax).to(dtype), scale.reciprocal()


class _Float8Matmul(torch.autograd.Function):
    """y = x W^T with torchao's Float8Linear recipe "tensorwise" (torchao/float8/float8_linear.py,
    matmul_with_hp_or_float8_args): the forward casts x and W to e4m3, the backward casts the
    output gradient to e5m2 and x and W again, each in the layout torch._scaled_mm wants (row-major
    first operand, column-major second), and keeps the high-precision x and W for it. The forward
    GEMM accumulates fast, the backward's do not (torchao's Float8LinearConfig defaults:
    gemm_config_output use_fast_accum=True, grad_input and grad_weight False). Here the transposes
    are copied in BF16 before their cast; torchao casts first and copies FP8 (half the bytes)."""

    @staticmethod
    def forward(ctx, x, w):
        x2 = x.reshape(-1, x.shape[-1])
        x8, sx = _to_fp8(x2, torch.float8_e4m3fn)
        w8, sw = _to_fp8(w, torch.float8_e4m3fn)  # (out, in) row-major: its .t() is column-major
        y = torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sw, out_dtype=x.dtype, use_fast_accum=True)
        ctx.save_for_backward(x, w)
        return y.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g2 = g.reshape(-1, g.shape[-1])
        x2 = x.reshape(-1, x.shape[-1])
        g8, sg = _to_fp8(g2, torch.float8_e5m2)
        wt8, sw = _to_fp8(w.t().contiguous(), torch.float8_e4m3fn)  # (in, out) row-major
        dx = torch._scaled_mm(g8, wt8.t(), scale_a=sg, scale_b=sw, out_dtype=g.dtype)
        gt8, sgt = _to_fp8(g2.t().contiguous(), torch.float8_e5m2)  # (out, tokens) row-major
        xt8, sx = _to_fp8(x2.t().contiguous(), torch.float8_e4m3fn)  # (in, tokens) row-major
        dw = torch._scaled_mm(gt8, xt8.t(), scale_a=sgt, scale_b=sx, out_dtype=g.dtype)
        return dx.reshape(x.shape), dw


class Float8Linear(nn.Linear):
    """A bias-free nn.Linear whose product runs in FP8 (tensorwise), as torchao's convert_to_float8_training
    makes the block's linear layers under torchtitan's Float8 converter (the output layer stays BF16)."""

    def forward(self, x):
        return _Float8Matmul.apply(x, self.weight)


def make_linear(a, d_in, d_out):
    """The block's linear layers: FP8 with --fp8 tensorwise, else nn.Linear (no bias either way)."""
    return Float8Linear(d_in, d_out, bias=False) if getattr(a, "fp8", "none") == "tensorwise" else nn.Linear(d_in, d_out, bias=False)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight


def rope_tables(seq, head_dim, device, base=10000.0):
    """cos/sin of the rotary angles, [seq, head_dim/2] each."""
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim)
    angles = torch.outer(torch.arange(seq, device=device).float(), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """Rotate the two halves of the head dimension of x [batch, heads, seq, head_dim]."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def rope_complex_table(seq, head_dim, device, base=10000.0):
    """torchtitan's freqs_cis: complex64 [seq, head_dim/2] (precompute_freqs_cis)."""
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim)
    angles = torch.outer(torch.arange(seq, device=device).float(), inv_freq)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope_complex(x, freqs_cis):
    """torchtitan's apply_rotary_emb for one tensor x [batch, seq, heads, head_dim]: pairs of the
    head dimension as complex numbers times freqs_cis broadcast over batch and heads."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    f = freqs_cis.view(1, xc.shape[1], 1, xc.shape[-1])
    return torch.view_as_real(xc * f).flatten(3).type_as(x)


def repeat_kv(x, n_rep):
    """torchtitan's repeat_kv: [batch, seq, kv_heads, head_dim] -> [batch, seq, kv_heads * n_rep,
    head_dim] by expand + reshape (a copy)."""
    if n_rep == 1:
        return x
    b, s, kv, hd = x.shape
    return x[:, :, :, None, :].expand(b, s, kv, n_rep, hd).reshape(b, s, kv * n_rep, hd)


class Attention(nn.Module):
    def __init__(self, a, tp, group):
        super().__init__()
        self.torchtitan = a.code == "torchtitan"
        self.hd = a.hidden // a.heads
        self.h, self.kv = a.heads // tp, a.kv_heads // tp  # heads held by this TP rank
        self.tp, self.group = tp, group
        if self.torchtitan:  # torchtitan's wq, wk, wv: three column-parallel projections
            self.wq = make_linear(a, a.hidden, self.h * self.hd)
            self.wk = make_linear(a, a.hidden, self.kv * self.hd)
            self.wv = make_linear(a, a.hidden, self.kv * self.hd)
        else:
            self.qkv = make_linear(a, a.hidden, (self.h + 2 * self.kv) * self.hd)  # column-parallel
        self.o = make_linear(a, self.h * self.hd, a.hidden)  # row-parallel

    def forward(self, x, rope):
        b, s, _ = x.shape
        if self.tp > 1:
            x = _CopyToTP.apply(x, self.group)
        if self.torchtitan:  # torchtitan's order: rotate in [b, s, h, d], repeat K/V, then transpose
            q = self.wq(x).view(b, s, self.h, self.hd)
            k, v = self.wk(x).view(b, s, self.kv, self.hd), self.wv(x).view(b, s, self.kv, self.hd)
            if rope is not None:
                q, k = apply_rope_complex(q, rope), apply_rope_complex(k, rope)
            k, v = repeat_kv(k, self.h // self.kv), repeat_kv(v, self.h // self.kv)
            y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            y = self.o(y.transpose(1, 2).reshape(b, s, self.h * self.hd))
            return _ReduceFromTP.apply(y, self.group) if self.tp > 1 else y
        q, k, v = self.qkv(x).split([self.h * self.hd, self.kv * self.hd, self.kv * self.hd], dim=-1)
        q = q.view(b, s, self.h, self.hd).transpose(1, 2)
        k = k.view(b, s, self.kv, self.hd).transpose(1, 2)
        v = v.view(b, s, self.kv, self.hd).transpose(1, 2)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if self.kv != self.h:  # grouped-query attention: share each KV head among h/kv query heads
            k = k.repeat_interleave(self.h // self.kv, dim=1)
            v = v.repeat_interleave(self.h // self.kv, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = self.o(y.transpose(1, 2).reshape(b, s, self.h * self.hd))
        return _ReduceFromTP.apply(y, self.group) if self.tp > 1 else y


class SwiGLU(nn.Module):
    def __init__(self, a, tp, group):
        super().__init__()
        self.tp, self.group = tp, group
        self.torchtitan = a.code == "torchtitan"
        if self.torchtitan:  # torchtitan's FeedForward: w2(silu(w1(x)) * w3(x)), three Linear layers
            self.w1 = make_linear(a, a.hidden, a.ffn // tp)
            self.w3 = make_linear(a, a.hidden, a.ffn // tp)
        else:
            self.gate_up = make_linear(a, a.hidden, 2 * (a.ffn // tp))  # column-parallel, fused
        self.down = make_linear(a, a.ffn // tp, a.hidden)  # row-parallel

    def forward(self, x):
        if self.tp > 1:
            x = _CopyToTP.apply(x, self.group)
        if self.torchtitan:
            gate, up = self.w1(x), self.w3(x)
        else:
            gate, up = self.gate_up(x).chunk(2, dim=-1)  # strided halves: PyTorch's generic kernels
        y = self.down(F.silu(gate) * up)
        return _ReduceFromTP.apply(y, self.group) if self.tp > 1 else y


def make_norm(a):
    """The RMSNorm --norm names: the hand-written one above, or torch.nn.RMSNorm (same eps)."""
    return nn.RMSNorm(a.hidden, eps=1e-5) if a.norm == "nn" else RMSNorm(a.hidden)


class Block(nn.Module):
    def __init__(self, a, tp, group):
        super().__init__()
        self.attn_norm, self.mlp_norm = make_norm(a), make_norm(a)
        self.attn, self.mlp = Attention(a, tp, group), SwiGLU(a, tp, group)

    def forward(self, x, rope):
        x = x + self.attn(self.attn_norm(x), rope)
        return x + self.mlp(self.mlp_norm(x))


def op_sac_context():
    """torchtitan's op-level selective activation checkpointing (torchtitan/distributed/
    activation_checkpoint.py, `_ops_sac_save` and `_get_custom_policy`, 2025): inside one block call,
    keep the outputs of aten.mm except every second one (counted apart for the forward and the
    recompute), of the fused attention ops, of reduce_scatter and of aten.max; recompute the rest.
    A fresh counter per block call, as torchtitan's context_fn makes one per call."""
    from collections import defaultdict
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    aten = torch.ops.aten
    save = {aten.mm.default, aten.max.default,
            torch.ops._c10d_functional.reduce_scatter_tensor.default}
    for name in ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                 "_scaled_dot_product_cudnn_attention"):
        if hasattr(aten, name):
            save.add(getattr(aten, name).default)
    count = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == aten.mm.default:
            count[mode] += 1
        keep = func in save and not (func == aten.mm.default and count[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
    return create_selective_checkpoint_contexts(policy)


class Llama(nn.Module):
    """forward(tokens, targets) -> mean cross-entropy loss."""

    def __init__(self, a, tp=1, group=None):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.hidden)
        self.blocks = nn.ModuleList(Block(a, tp, group) for _ in range(a.layers))
        self.norm = make_norm(a)
        self.head = nn.Linear(a.hidden, a.vocab, bias=False)
        # Rotary tables: plain attributes, not buffers, so that DDP has nothing to broadcast per step.
        self.rope = None
        self.rope_args = (a.seq, a.hidden // a.heads) if a.rope else None
        self.code = a.code
        self.ac = a.ac

    def prepare(self, device):
        """Builds the rotary tables on `device` once, before the steps (so torch.compile sees no
        attribute set inside forward)."""
        if self.rope_args is not None and self.rope is None:
            self.rope = (rope_complex_table if self.code == "torchtitan" else rope_tables)(*self.rope_args, device=device)

    def forward(self, tokens, targets):
        self.prepare(tokens.device)
        x = self.embed(tokens)
        for blk in self.blocks:
            if self.ac == "full":
                x = torch.utils.checkpoint.checkpoint(blk, x, self.rope, use_reentrant=False)
            elif self.ac == "selective-op":
                x = torch.utils.checkpoint.checkpoint(blk, x, self.rope, use_reentrant=False,
                                                      context_fn=op_sac_context)
            else:
                x = blk(x, self.rope)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))
