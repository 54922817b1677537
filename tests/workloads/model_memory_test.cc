// Tests of workloads/model/memory.h: Adam/ZeRO model-state bytes and Korthikanti activation
// memory, every expected value worked by hand in the comment next to it.
#include "workloads/model/memory.h"

#include <gtest/gtest.h>

#include "sim/error.h"

namespace wl {
namespace {

// Mixed-precision Adam, P = 1e9 parameters, d = 8 (ZeRO paper §3.1 accounting, 2 + 2 + 12):
//   stage 0: 2 + 2 + 12        = 16   bytes/param -> 16e9
//   stage 1: 2 + 2 + 12/8      = 5.5              -> 5.5e9
//   stage 2: 2 + (2 + 12)/8    = 3.75             -> 3.75e9
//   stage 3: (2 + 2 + 12)/8    = 2                -> 2e9
TEST(ModelMemory, AdamZeroStagesByHand) {
  const int64_t p = 1000000000;
  const MemoryBreakdown z0 = model_state_memory(p, 8, 0);
  EXPECT_DOUBLE_EQ(z0.params, 2e9);
  EXPECT_DOUBLE_EQ(z0.grads, 2e9);
  EXPECT_DOUBLE_EQ(z0.optimizer, 12e9);
  EXPECT_DOUBLE_EQ(z0.total(), 16e9);
  EXPECT_DOUBLE_EQ(model_state_memory(p, 8, 1).total(), 5.5e9);
  EXPECT_DOUBLE_EQ(model_state_memory(p, 8, 2).total(), 3.75e9);
  EXPECT_DOUBLE_EQ(model_state_memory(p, 8, 3).total(), 2e9);
  // FP32 gradients (Megatron main_grad, Llama 3): 2 + 4 + 12 = 18 bytes/param unsharded.
  EXPECT_DOUBLE_EQ(model_state_memory(p, 1, 0, AdamBytes{2, 4, 12}).total(), 18e9);
  // activations and comm buffers are the caller's.
  EXPECT_EQ(z0.activations, 0.0);
  EXPECT_EQ(z0.comm_buffers, 0.0);
}

// ZeRO paper (Rajbhandari et al., arXiv 1910.02054) Figure 1: 7.5B parameters, N_d = 64, K = 12:
// baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB.
//   (2+2+12)*7.5 = 120; (4 + 12/64)*7.5 = 31.41; (2 + 14/64)*7.5 = 16.64; 16/64*7.5 = 1.875.
TEST(ModelMemory, ZeroPaperFigure1) {
  const int64_t p = 7500000000;
  EXPECT_NEAR(model_state_memory(p, 64, 0).total() / 1e9, 120.0, 0.05);
  EXPECT_NEAR(model_state_memory(p, 64, 1).total() / 1e9, 31.4, 0.05);
  EXPECT_NEAR(model_state_memory(p, 64, 2).total() / 1e9, 16.6, 0.05);
  EXPECT_NEAR(model_state_memory(p, 64, 3).total() / 1e9, 1.9, 0.05);
}

// Llama 3 405B, tp = 8, pp = 16 (first/last one layer fewer), stage 1 holds 8 layers. One layer
// per rank: norms 2*16384 = 32,768 (replicated); QKV 16384 * (16 + 2*1)*128 = 37,748,736;
// out 2048 * 16384 = 33,554,432; SwiGLU 3 * 16384 * 6656 = 327,155,712 -> 398,491,648.
// 8 layers: 3,187,933,184 params. ZeRO-1 over dp = 8 with fp32 grads: 2 + 4 + 12/8 = 7.5 B/param
// -> 23,909,498,880 bytes.
TEST(ModelMemory, Llama405bStage) {
  const ModelSpec m = find_model_preset("llama3-405b");
  EXPECT_EQ(layer_params_per_rank(m, 8), 398491648);
  const MemoryBreakdown mb =
      stage_model_state_memory(m, 1, 8, 16, 8, 1, PipelineSplit::kFirstLastOneFewer, AdamBytes{2, 4, 12});
  EXPECT_DOUBLE_EQ(mb.params, 2.0 * 3187933184);
  EXPECT_DOUBLE_EQ(mb.total(), 23909498880.0);
  // First stage: 7 layers + vocab shard 16,032 x 16,384 = 262,668,288 parameters.
  const MemoryBreakdown first =
      stage_model_state_memory(m, 0, 8, 16, 8, 0, PipelineSplit::kFirstLastOneFewer);
  EXPECT_DOUBLE_EQ(first.params, 2.0 * (7 * 398491648.0 + 262668288.0));
  EXPECT_THROW(stage_model_state_memory(m, 16, 8, 16, 8, 0, PipelineSplit::kFirstLastOneFewer),
               sim::ConfigError);
  EXPECT_THROW(model_state_memory(10, 8, 4), sim::ConfigError);
  EXPECT_THROW(model_state_memory(10, 0, 1), sim::ConfigError);
}

// Korthikanti Eq. 1-6 on GPT-3 175B: s = 2048, b = 1, h = 12288, a = 96, t = 8.
//   sbh = 2048 * 12288 = 25,165,824; 5as/h = 5 * 96 * 2048 / 12288 = 80.
//   no parallelism:      sbh (34 + 80)            = 2,868,903,936
//   TP only:             sbh (10 + 24/8 + 80/8)   =   578,813,952
//   TP + SP:             sbh (34 + 80) / 8        =   358,612,992
//   selective + SP:      34 sbh / 8               =   106,954,752
//   selective, TP only:  sbh (10 + 24/8)          =   327,155,712
//   full recompute:      2 sbh                    =    50,331,648   (SP: / 8 = 6,291,456)
TEST(ModelMemory, KorthikantiGpt3ByHand) {
  const double s = 2048, b = 1, h = 12288, a = 96;
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes_per_layer(s, b, h, a, 1, false, Recompute::kNone), 2868903936.0);
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes_per_layer(s, b, h, a, 8, false, Recompute::kNone), 578813952.0);
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes_per_layer(s, b, h, a, 8, true, Recompute::kNone), 358612992.0);
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes_per_layer(s, b, h, a, 8, true, Recompute::kSelective), 106954752.0);
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes_per_layer(s, b, h, a, 8, false, Recompute::kSelective), 327155712.0);
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes_per_layer(s, b, h, a, 8, false, Recompute::kFull), 50331648.0);
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes_per_layer(s, b, h, a, 8, true, Recompute::kFull), 6291456.0);
  // Flash attention drops the 5as/h term: 34 sbh = 855,638,016 at t = 1.
  EXPECT_DOUBLE_EQ(korthikanti_activation_bytes_per_layer(s, b, h, a, 1, false, Recompute::kNone, true), 855638016.0);
}

// The per-tensor count equals Korthikanti's closed form for the GPT block (MHA, GELU 4h, dropout,
// bf16) in every mode.
TEST(ModelMemory, PerTensorCountReproducesKorthikanti) {
  const ModelSpec m = find_model_preset("gpt3-175b");
  for (int64_t t : {1, 8}) {
    for (bool sp : {false, true}) {
      if (t == 1 && sp) continue;
      for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        for (bool flash : {false, true}) {
          ActivationOptions o;
          o.recompute = r;
          o.flash_attention = flash;
          o.dropout = true;
          const double got = activation_bytes_per_layer(m, 1, 2048, {t, 1, sp}, o);
          const double want = korthikanti_activation_bytes_per_layer(2048, 1, 12288, 96,
                                                                     static_cast<double>(t), sp, r, flash);
          EXPECT_DOUBLE_EQ(got, want) << "t=" << t << " sp=" << sp << " r=" << static_cast<int>(r)
                                      << " flash=" << flash;
        }
      }
    }
  }
}

// Llama 3 8B, b = 1, s = 8192, no parallelism, flash, no dropout, bf16 (n = 8192 tokens):
//   replicated: 2 norm inputs + QKV input + MLP input = 4 * 4096 * 2 = 32,768 bytes/token
//   Q + O: 2 * 4096 * 2 = 16,384; K + V: 2 * 8 * 128 * 2 = 4,096;
//   SwiGLU gate, up, product: 3 * 14336 * 2 = 86,016     -> 139,264 bytes/token (= 34 h)
//   total 8192 * 139,264 = 1,140,850,688. With cp = 2 each rank holds half the tokens.
TEST(ModelMemory, Llama8bPerTensorByHand) {
  const ModelSpec m = find_model_preset("llama3-8b");
  ActivationOptions o;  // none, flash, no dropout, bf16
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, {}, o), 1140850688.0);
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, {1, 2, false}, o), 1140850688.0 / 2);
  // Full recompute keeps the layer input: 8192 * 4096 * 2 = 67,108,864.
  o.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, {}, o), 67108864.0);
  // Head: final-norm input + LM-head input 2 * 8192*4096*2 = 134,217,728, plus fp32 logits
  // 8192 * 128,256 * 4 = 4,202,692,608 -> 4,336,910,336.
  EXPECT_DOUBLE_EQ(head_activation_bytes(m, 1, 8192, {}, Precision::kBf16), 4336910336.0);
  // Eager log_softmax + nll_loss: at the loss's backward two more fp32 logit-sized tensors live
  // beside the saved output, 3 x 4,202,692,608 = 12,608,077,824; and the final RMSNorm runs eager
  // with it: its FP32 input copy (4 bytes), the normalised bf16 tensor (2) and the head's input
  // (2) per element, 8192 x 4096 x 8 = 268,435,456, and its rsqrt, 8192 x 4 = 32,768:
  // 12,876,546,048.
  EXPECT_DOUBLE_EQ(head_activation_bytes(m, 1, 8192, {}, Precision::kBf16, true), 12876546048.0);
}

// Sequence parallelism over tp = 8 as PyTorch's DTensor runs it: the QKV and MLP projections keep
// their gathered input (8192 x 4096 x 2 = 67,108,864 bytes each) where Megatron-LM keeps an
// eighth of it and regathers: 2 x 67,108,864 x 7/8 = 117,440,512 bytes more per layer, and the
// backward's two regathers of those inputs (qkv_input_regather, mlp_input_regather, 67,108,864
// bytes each) are gone: 4 backward all-gathers become 2. Full recompute keeps the sharded block
// input either way.
TEST(ModelMemory, SequenceParallelKeepingTheGatheredInputs) {
  const ModelSpec m = find_model_preset("llama3-8b");
  ActivationOptions o;
  ParallelShape megatron{8, 1, true};
  ParallelShape pytorch{8, 1, true, true};
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, pytorch, o) - activation_bytes_per_layer(m, 1, 8192, megatron, o),
                   117440512.0);
  o.eager = true;  // the same two tensors among eager PyTorch's saved ones
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, pytorch, o) - activation_bytes_per_layer(m, 1, 8192, megatron, o),
                   117440512.0);
  // Gathered in FP8 (torchao's tensorwise Float8 under TP), the kept inputs take 1 byte per
  // element: 2 x 8192 x 4096 x (1 - 2/8) = 50,331,648 more than Megatron's bf16 shards.
  o.fp8_gathered = true;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, pytorch, o) - activation_bytes_per_layer(m, 1, 8192, megatron, o),
                   50331648.0);
  o.fp8_gathered = false;
  o.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, pytorch, o), 67108864.0 / 8);
  auto backward_gathers = [&](const ParallelShape& shape, double& bytes) {
    int n = 0;
    bytes = 0;
    for (const CommOp& c : layer_comm(m, 1, 8192, shape, Precision::kBf16).ops)
      if (c.pass == Pass::kBackward && c.kind == CollectiveKind::kAllGather) ++n, bytes += c.bytes;
    return n;
  };
  double with_regather = 0, without = 0;
  EXPECT_EQ(backward_gathers(megatron, with_regather), 4);
  EXPECT_EQ(backward_gathers(pytorch, without), 2);
  EXPECT_DOUBLE_EQ(with_regather - without, 2 * 67108864.0);
}

// The same layer as a parallel block (GPT-J, PaLM): one norm, whose output the QKV and MLP
// projections share: replicated 2 x 4096 x 2 = 16,384 bytes per token instead of 32,768, the rest
// as above (20,480 + 86,016): 122,880 per token, 8192 x 122,880 = 1,006,632,960.
TEST(ModelMemory, AParallelBlockKeepsOneNormInputAndOneSharedGemmInput) {
  ModelSpec m = find_model_preset("llama3-8b");
  m.parallel_block = true;
  ActivationOptions o;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, {}, o), 1006632960.0);
}

// The same layer in eager PyTorch (torchtitan's llama3 block, hand-written RMSNorm), per token:
//   each RMSNorm: FP32 input copy 4096 x 4 = 16,384, normalised bf16 8,192, rsqrt 4; its output
//   (the projections' saved input) 8,192: 2 x 32,772 = 65,544;
//   SDPA: Q 8,192, K and V after repeat_kv 2 x 8,192, output (= wo's input) 8,192, log-sum-exp
//   32 x 4 = 128: 32,896;
//   SwiGLU: w1's output, silu's output, w3's output, their product: 4 x 14,336 x 2 = 114,688.
// 213,128 bytes per token, 8192 x 213,128 = 1,745,944,576 per layer. Measured on an H100 with
// torchtitan's model code, 8 layers, 8192 tokens (tests/data/captures/h100-sxm/tt-h4096-l8-b1-
// s8192-ac-none and -ac-full): the peaks differ by 13,430,693,888 bytes = 204,936 per token and
// layer, and full recompute keeps the 8,192-byte block input: 204,936 + 8,192 = 213,128.
TEST(ModelMemory, Llama8bEagerPerTensorByHand) {
  const ModelSpec m = find_model_preset("llama3-8b");
  ActivationOptions o;
  o.eager = true;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, {}, o), 1745944576.0);
  // Recompute modes that keep a fixed set are the same eager or not.
  for (Recompute r : {Recompute::kFull, Recompute::kSelectiveOp}) {
    o.recompute = r;
    ActivationOptions fused = o;
    fused.eager = false;
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, {}, o), activation_bytes_per_layer(m, 1, 8192, {}, fused));
  }
}

// torchtitan's op-level selective checkpointing on the same layer keeps, per token: the block
// input 4096 x 2 = 8,192; SDPA's output 4096 x 2 = 8,192 and its fp32 log-sum-exp 32 x 4 = 128;
// the odd-numbered aten.mm outputs of wq, wk, wv, wo, w1, w3, w2: wq 4096 x 2 = 8,192, wv 8 x 128
// x 2 = 2,048, w1 14336 x 2 = 28,672, w2 4096 x 2 = 8,192. 63,616 bytes/token: 8192 x 63,616 =
// 521,142,272. FP8 linears call _scaled_mm, not in the save list: 16,512 x 8192 = 135,266,304.
TEST(ModelMemory, TorchtitanOpSelectiveCheckpointingByHand) {
  const ModelSpec m = find_model_preset("llama3-8b");
  ActivationOptions o;
  o.recompute = Recompute::kSelectiveOp;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, {}, o), 521142272.0);
  // TP 8 with sequence parallelism, per token: the block input 4096 x 2 / 8 = 1,024; SDPA's output
  // 512 x 2 = 1,024 and log-sum-exp 4 x 4 = 16; wq 512 x 2 = 1,024, wv 128 x 2 = 256, w1 1,792 x 2
  // = 3,584, w2 (the partial sums before the reduce-scatter) 4,096 x 2 = 8,192; and the two
  // reduce-scatters' outputs, in the save list, 2 x 4,096 x 2 / 8 = 2,048: 17,168 bytes/token,
  // 8192 x 17,168 = 140,640,256.
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, {8, 1, true}, o), 140640256.0);
  o.precision = Precision::kFp8;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 8192, {}, o), 135266304.0);
  o.flash_attention = false;
  EXPECT_THROW(activation_bytes_per_layer(m, 1, 8192, {}, o), sim::ConfigError);
}

// 1F1B keeps min(p - stage, m) micro-batches in flight (Megatron SC'21 §2.2).
TEST(ModelMemory, InflightMicrobatches) {
  EXPECT_EQ(inflight_microbatches_1f1b(4, 0, 8), 4);
  EXPECT_EQ(inflight_microbatches_1f1b(4, 3, 8), 1);
  EXPECT_EQ(inflight_microbatches_1f1b(4, 0, 2), 2);
  EXPECT_THROW(inflight_microbatches_1f1b(4, 4, 8), sim::ConfigError);
}

}  // namespace
}  // namespace wl
