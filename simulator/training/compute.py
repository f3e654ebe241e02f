"""Compute time of one GPU's work: a roofline per operation with a shape-dependent efficiency.

time(op) = max(flops / (peak x efficiency), bytes / (hbm x MEMORY_EFFICIENCY)) + KERNEL_LAUNCH_S

- peak is the GPU's dense tensor rate at the compute precision (topologies/data/gpus.yaml).
- GEMM efficiency saturates with the GEMM's smallest dimension d: GEMM_EFFICIENCY[arch] x d /
  (d + GEMM_HALF_DIM). The asymptote is what cuBLAS reaches on large bf16/fp16 GEMMs: ~80% of
  dense peak on V100 and A100 (NVIDIA cuBLAS/Megatron reports: A100 ~250 of 312 TFLOP/s), ~67% on
  H100 SXM (public cuBLAS bf16 benchmarks reach ~650-700 of 989 TFLOP/s on transformer shapes) and
  ~62% on B200 (new, less mature kernels; an assumption until measured). Those are each generation's reference
  part (GEMM_REFERENCE_GPU); another part of the generation whose peak a matmul reaches a different share of
  (its clocks under load, its power limit) scales the asymptote by its measured maximum achievable matmul
  rate's share of its peak over the reference part's (gemm_rate_factor; the same sweep on both, topologies/data/
  gpus.yaml [MAMF]): GB200 reaches 72.9% of its 2,500 TFLOP/s where B200 reaches 77.6% of 2,250 (0.94: 4% more
  TFLOP/s than B200, not the 11% the datasheets' peaks say), GH200 at 900 W 83.8% where H100 SXM reaches 80.3%
  (1.04), A100 PCIe 81.1% of A100 SXM's 86.9% (0.93), B300 78.6% (1.01); rows of one table, though not all under
  the same torch and CUDA release (the table's own caveat). The table is read within a generation only: across
  generations its best shapes would move the asymptotes above (A100 1.08 x H100's share, B200 0.97 x), which come
  from each generation's own kernels on transformer shapes. A part without a measured rate keeps its generation's
  share; GB300, whose rate is not published, is presumed to stand to B300 as GB200 to B200 (gpus.yaml). Looked
  for because NeMo's GB200 runs (held out) were fast; the figures are the table's, nothing fitted: those runs 9.9%
  -> 7.4% median.
- Attention runs as a fused (flash) kernel at ATTENTION_EFFICIENCY of dense peak, forward and
  backward together: FlashAttention-2 reaches 50-73% of A100 peak forward and less backward
  (Dao 2023), and only ~35% of H100 peak (Shah et al. 2024, FlashAttention-3, section 1); Volta
  has no flash kernels (xformers/apex memory-efficient attention, ~25%). cuDNN's fused attention,
  which Transformer Engine picks on Hopper and later (Megatron-Core, NeMo), reaches ~50% of H100
  peak and at least ~52% of B200's (CUDNN_ATTENTION_EFFICIENCY: FlashAttention-4's comparison with cuDNN
  9.13); elsewhere the two are taken as equal, and MPT's Triton kernel
  (LLM Foundry) starts from FlashAttention-2's figures. FlashAttention 1.x (flash-attn before 2.0, the
  kernel of mid-2023 stacks) runs at half FlashAttention-2's rate: FlashAttention-2 is "around 2x" faster and
  FlashAttention reached "only 25-40%" of A100 peak (Dao 2023, abstract; FLASH2_OVER_FLASH1). The efficiencies apply to
  the full score FLOPs (attention_forward_flops, the MFU convention) with a backward of twice the
  forward; the kernels' own benchmarks count half of them under a causal mask and 2.5x the forward
  for the backward, so in the benchmarks' terms these rates are 55-65% of what the kernels reach
  alone, which is what the published training runs imply (README: pricing attention at the
  benchmark rates makes the validation cases 5.8% -> 12.7% median error, all too fast).
- Those efficiencies hold at the figures' own shape, head dim 128 and about 8k keys a query
  (ATTENTION_REFERENCE_SEQ); other shapes scale them by ATTENTION_SHAPE, a_d x s / (s + s_half) over its
  value there. A kernel pays a fixed cost per query block (loading Q, the final rescale and write of O, and
  under a causal mask the part-masked diagonal tiles) that its s keys amortise; a 64-wide head does half
  the multiply-adds per loaded tile of a 128-wide one, an 80-wide one runs padded to the kernels' next
  tile width (96), and heads wider than 128 get smaller tiles. Measured through torch's SDPA on an H200
  (benchmarks/data/h200_compute.yaml; benchmarks/fit_compute_curves.py): FlashAttention-2 at 1,024 keys
  runs at 0.62 of its 8k-key rate, cuDNN at 0.64; head dims 64, 80, 96, 192 and 256 at 0.88, 0.72, 0.90,
  0.92 and 0.89 of head dim 128 (FlashAttention-2) and 0.76, 0.68, 0.80, 0.73 and 0.82 (cuDNN). A
  context-parallel ring's kernels see seq_len / c keys each; outside the measured 512-64k keys and head
  dims 64-256 the curve is held at its ends. Hopper, where it was measured, and Blackwell
  (ATTENTION_SHAPE_ARCHS), whose cuDNN and FlashAttention kernels tile a query block over its keys the same
  way: there it takes NeMo's B200 runs at 256k-1M tokens from 20% to 15% slow and leaves the held-out NeMo
  runs' median where it was (of the 11 Blackwell runs it moves, 7 come closer, the 4 already slow 1-2 points
  slower). Taken for Ampere it moved the A100 runs of LLM Foundry and Megatron the wrong way
  (leave-one-source-out 0.7 points worse), so Ampere and Volta keep their flat figure until measured.
- Without a fused attention kernel (Megatron-LM before 2023, BLOOM's Megatron-DeepSpeed, eager
  PyTorch) the b a s^2 score matrix goes through HBM: the QK^T GEMM writes it (2 B per score),
  the fused scale-mask-softmax reads and writes it (4 B), attention dropout reads and writes it
  and writes its 1-byte mask (5 B), and the AV GEMM reads it (2 B): UNFUSED_SCORE_BYTES = 13 per
  score forward; backward reads and writes it about UNFUSED_SCORE_BYTES_BACKWARD = 17 times
  (dprobs, dropout and softmax backward, dscores for the QK^T backward). Memory-bound on top of
  the attention GEMMs. Those GEMMs (cuBLAS strided batches over the heads) read each head's rows of q, k
  and v in place; when a head's row is not a whole number of 16-byte vectors (a head dim not a multiple
  of 8 in bf16/fp16: BLOOM prototypes at 14,400 / 64 = 225 or 13,824 / 128 = 108), the tensor-core
  kernels, which need 128-bit aligned operands (cuBLAS documentation, "Tensor Core Usage"; NVIDIA/cutlass
  #75), are out, and the batch runs on CUDA cores accumulating in fp32: at the GPU's fp32 peak
  (TENSOR_CORE_ALIGN_BYTES), at the table's share of it (a fitted attention factor, which describes the
  tensor-core kernels, does not apply). Checked, not fitted: the BigScience prototypes' rows with such heads were
  predicted 45-69% too fast and their aligned siblings (same tables) 10-16%; priced so, the misaligned
  rows come out 8-26% fast, and the source's two A/B pairs (hidden 14,400 against 13,824; 128 heads of
  108 against 64) at 0.78 and 0.73 of the aligned rate, as measured (0.79 and 0.75-0.77).
- fp8 training (Transformer Engine, torchao float8) runs the block's GEMMs at the fp8 rate on 1-byte
  operands but attention, element-wise work and the output layer (kept in bf16 by TE setups and
  torchtitan's float8 filter) in bf16. The casts are kernels of their own, memory-bound and in
  series with the GEMMs: forward each GEMM's two inputs, backward its output gradient, each element
  read in bf16 and written in fp8 twice, as is and transposed for the other GEMMs (Hopper's fp8
  tensor cores take K-major operands; TE's fused cast_transpose): FP8_CAST_BYTES = 2 + 1 + 1. A weight is cast
  on every micro-batch unless the framework caches the cast for the step's later micro-batches
  (TrainingSpec.fp8_weight_cache: Transformer Engine's weight cache, which Megatron-Core drives; weight_cast_share).
  Delayed scaling (Megatron-Core's default recipe) takes a tensor's scale from its amax history and computes the
  new amax inside the cast; so do the block-scaled recipes (mxfp8, blockwise) for their blocks. Per-tensor current
  scaling (TrainingSpec.fp8_recipe tensorwise; torchao's dynamic scaling too) needs the amax before the cast, a pass
  of its own that reads the tensor once more (FP8_AMAX_BYTES: Transformer Engine's
  Float8CurrentScalingQuantizer::quantize_impl runs compute_amax, then quantize), except where the kernel that
  writes the tensor computes it: TE's norm before qkv and mlp_up and its activation before mlp_down, forward and
  backward (normalization.cpp and activation.cpp, FUSED_NORM_AMAX_FP8 / FUSED_ACTIVATION_AMAX_FP8); a mixture of
  experts' MLPs run outside those fused modules, so there only qkv's input is spared.
  The GEMMs themselves reach a smaller share of the fp8 peak than bf16 GEMMs of the bf16 peak: measured point for
  point over the weight GEMMs the Hopper validation runs price (benchmarks/data/h100_compute.yaml and
  h200_compute.yaml, torch._scaled_mm against torch.matmul), forward GEMMs at 0.945 (H100 and H200 alike) and
  input-gradient GEMMs at 0.89 / 0.92 of the bf16 share, median (FP8_GEMM_EFFICIENCY; the weight-gradient GEMMs,
  not measured in fp8, take the input gradient's); Ada, fp8 on the same generation of tensor cores, takes them.
  Blackwell keeps about the bf16 share: the one comparison of both generations by one method, the best shape of
  a sweep (stas00/ml-engineering, "Maximum Achievable Matmul FLOPS comparison table": H100 SXM fp8 70.9% of peak
  against bf16 80.3%, a ratio of 0.88; B200 76.3% against 77.6%, 0.98), puts B200's ratio 1.11x H100's, which
  on the ratios measured here is 1.05 forward and 1.00 for the gradients: 1.0 both, an fp8 GEMM being no more
  efficient than its bf16 twin.
- Element-wise work (norms, rotary, residual adds, the MLP activation, dropout) is memory-bound:
  ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN bytes per token per hidden unit per layer forward: two norms
  (read + write, 4 B each), two residual adds (6 B each), rotary on q/k (~4 B), and the MLP
  activation over the 2.7-4h wide intermediate (~16 B) -- about 40 bytes, as fused kernels move them
  (torch.compile, Megatron/apex/Transformer Engine fused norms and activations, or blocks whose
  element-wise steps are single kernels anyway). PyTorch eager Llama code (torchtitan without
  compile) runs each step as kernels of their own through HBM: its RMSNorm casts to fp32, squares,
  averages, scales, casts back and multiplies by the weight (r 20 + w 16 = 36 B a norm element
  against 4 fused), rotary casts q and k to fp32, multiplies by the complex frequencies and casts
  back (20 B an element over h + kv: ~25 B per h with 4:1 GQA), SwiGLU's silu and product are two
  kernels (10 B an element of the 3.5h intermediate: 35 B), the residual adds 12 B:
  ELEMENTWISE_EAGER_BYTES_PER_TOKEN_HIDDEN = 72 + 25 + 35 + 12, about 145 bytes. A framework whose block
  is neither states its own count (TrainingSpec.elementwise_bytes, the framework's convention; its norms and
  residual adds take the fused count's half when tensor parallelism replicates them). Checked, not fitted, on an
  H100 (benchmarks/data/h100_llama_blocks.yaml): Llama 2 7B and Llama 3 8B blocks of 8,192 tokens took 3.5-4.5 ms
  longer forward + backward eager than under torch.compile, where the two byte counts differ by 3.7 ms; torch's
  own fused RMSNorm (torch.nn.functional.rms_norm, torch 2.11) took 2.3-3.3 ms of that away.
- The loss: the output layer's GEMM writes the logits (bf16); the cross entropy over them is memory-bound passes
  of their own, LOSS_BYTES_PER_LOGIT bytes a logit forward and backward together (half in each, on the vocabulary
  shard of a tensor-parallel rank), as the framework's loss runs them. Megatron's vocabulary-parallel cross entropy
  (megatron/core/tensor_parallel/cross_entropy.py, its default: model_parallel_config.py cross_entropy_loss_fusion
  False) upcasts to fp32 (read 2, write 4), takes the row max (4), subtracts it in place (8), exponentiates in place
  (8), sums (4) and divides in place (8), then backward scales the saved softmax in place (8) and casts the
  gradient to bf16 (6): 52; its fused form (fusions/fused_cross_entropy.py, NeMo's GPTConfig
  cross_entropy_loss_fusion True) joins the upcast with the max and the subtraction with the exponent: 40.
  PyTorch's eager F.cross_entropy on logits.float() (Hugging Face models, torchtitan without compile): the upcast
  (6), log_softmax (reads 8, writes 4), nll_loss's dense fp32 gradient (4), log_softmax's backward (reads 12,
  writes 4) and the cast back (6): 44. A compiled loss (Inductor, XLA) reads the bf16 logits for its reductions and
  once more for the gradient it writes: 8. flash-attn's Triton cross entropy (LLM Foundry's default loss_fn
  fused_crossentropy; InternEvo's FlashGPTLMLoss) reads them once forward, once backward, writing the gradient: 6.
- Tensor parallelism over t GPUs (Megatron, Shoeybi et al. 2019): qkv and mlp_up are split by
  columns (n / t), attn_out and mlp_down by rows (k / t), attention by heads (/ t), the output layer
  by vocabulary (V / t). Rotary and the MLP activation work on sharded tensors; norms, residual adds
  and dropout are replicated (REPLICATED_ELEMENTWISE_BYTES of the bytes) unless sequence
  parallelism shards them over t too (Korthikanti et al. 2022).
- A mixture of experts (workloads.model) runs its routed experts as grouped GEMMs: over e-way
  expert parallelism a GPU holds E / e experts and computes, routing being balanced, the k x tokens
  rows of its tokens' share (its experts' tokens from every expert-parallel rank), k x tokens / (E / e)
  rows an expert: the efficiency is that of one expert's GEMM, and each local expert's weights are
  read. The dispatcher's permutation copies every routed token in and out (MOE_PERMUTE_BYTES per
  token per hidden unit and routed copy, plus the input read and the output written) and the MLP
  activation runs over the (k + S) f_e wide intermediate instead of f (4 B an element, as in the
  element-wise bytes above). The router is replicated over the tensor-parallel group. Unbalanced or
  capacity-bound routing (simulator.training.routing) makes the representative GPU the busiest
  expert-parallel rank: its routed rows, permutation copies and routed intermediates are
  `routed_load` times the balanced share.
- Context parallelism over c GPUs (ring attention; simulator.training.tasks.cp_call) gives each GPU
  seq_len / c tokens of every sequence: its GEMMs, element-wise work and output layer are those of
  its tokens, its attention that of its queries against all seq_len keys (1 / c of the whole, the
  causal work balanced by the 2c-chunk split). Of a ring's c steps only the first (the local block)
  runs the causal kernel; the other c - 1 attend to blocks wholly in the past, with the non-causal
  kernel (Transformer Engine's AttnFuncWithCPAndKVP2P and PyTorch's ring attention both split the
  2c-chunk layout so), which does the same useful work NONCAUSAL_SPEEDUP times faster: causal
  kernels lose time to the masked tiles and the uneven rows (FlashAttention-3 paper, H100, head dim
  128, 4k-16k tokens: cuDNN 595-609 TFLOP/s non-causal against 518-539 causal, FlashAttention-2
  368-370 against 319-335, forward; taken for backward too). All-to-all CP runs whole sequences of
  its heads: causal kernels only. PyTorch's ring (`cp_merge: eager`; torch.distributed.tensor.
  experimental._attention) merges each step's output into an fp32 accumulator and accumulates the
  gradients in eager element-wise kernels: per step after the first, forward CP_EAGER_MERGE_BYTES["q"]
  per output element (the bf16 -> fp32 cast 6, the (out - block) difference 12, its scaling 8, the
  update 12: 38 B, partial steps half of it plus a torch.cat copy of the whole output, 8 B: ~32 B
  averaged) and ["kv"] per key or value element (the torch.cat of K and V it rotates), backward
  ["q_grad"] per query element (the fp32 += of dq, or half of it and a cat) and ["kv_grad"] per key
  or value element (the fp32 += of dk and dv, the cat it rotates), all at HBM speed.
- Packed sequences (`packed_sample_len` l): samples packed into a sequence attend only within themselves
  (FlashAttention's variable-length kernels, Transformer Engine's THD layout), so each query attends to l
  keys instead of seq_len: attention FLOPs, and without a fused kernel the score matrix's bytes, scale by
  l / seq_len; GEMMs and element-wise work are per token and do not change. Each short sample runs the
  kernel at its own length's rate (ATTENTION_SHAPE, where measured): more masked tiles and fixed cost per
  key than one long sequence.
- LoRA (`lora_rank` r; Hu et al. 2021; NeMo's adapters, nemo/collections/llm/peft/lora.py) freezes the
  weights: backward computes each weight GEMM's input gradient and not its weight gradient (one GEMM instead
  of two), and the frozen output layer's input gradient only. Each weight GEMM the job's `lora_targets` names
  (m x k by k x n, as its tensor-parallel shard has it; a part of a fused one, q of qkv, its share of n) gets an
  adapter, x A [k, r] then B [r, n], priced by the roofline at their own (thin) shapes in half precision (NeMo
  runs them unquantized even under fp8), plus its element-wise scaling and add (LORA_ELEMENTWISE_BYTES); backward
  the adapters' input and weight gradients, twice their forward. Which matrices carry adapters matters: the
  scaling and add move 10 bytes an output element, on an H100 about half the time an fp8 weight GEMM with a
  4,096-wide input takes for that element (2 x 4,096 FLOPs), so NeMo 2.0's adapters on all four matrices cost far
  more than NeMo 1.x's on qkv alone.
- Recomputation: full re-runs the layer's forward, selective (Megatron's) the submodules its recompute
  modules name (TrainingSpec.recompute_modules; Megatron-Core's transformer_config.py recompute_modules, default
  core_attn), each as its own forward: core_attn the attention core, layernorm the two norms (their share of the
  element-wise bytes, NORM_SHARE), moe_act the routed experts' activation (MOE_ACTIVATION_BYTES an element of
  their intermediate), mla_up_proj MLA's query and key-value up projections (from the latents it keeps; the
  rotary embedding applied with them is not counted), mlp a dense block's MLP (its two matmuls and activation),
  shared_experts the shared experts' MLP, moe the whole mixture-of-experts layer (router, permutation, routed and
  shared experts; its all-to-alls go with the re-run's collectives, simulator.training.tasks.module_rerun_calls), op
  (torchtitan's per-op policy, TransformerModel.op_recomputed_gemms) every second weight matmul up to the
  last one backward needs (wk, wo, w3 of a Llama block), and the element-wise work; attention's output is
  kept, so attention is not re-run. Its save list names aten.mm (torchtitan parallelize_llama.py
  _save_list), so under float8 training every matmul (torch._scaled_mm) is re-run, with its casts. A JAX
  policy (workloads.remat, MaxText's remat_policy) re-runs the matmuls whose outputs backward needs and it
  does not keep (never the MLP's down projection), attention unless it keeps attention's output, and the
  element-wise work.
- The optimizer is memory-bound: Adam reads and writes fp32 master weights, two moments and the
  gradient (OPTIMIZER_BYTES_PER_PARAM per locally owned parameter).
- Gradient accumulation outside the GEMMs (DeepSpeed's bf16 optimizer adds each micro-batch's
  bf16 gradients into an fp32 buffer) is a memory-bound pass: the strategy's bytes per locally held
  parameter, after every micro-batch's backward.
- ZeRO++'s quantized collectives (Wang et al. 2023; DeepSpeed's kernels) are memory-bound passes too.
  qwZ dequantizes each gathered block on the compute stream when its gather is waited for
  (partition_parameters.py AllGatherCoalescedHandle.wait): it reads the int8 weights and writes them in
  bf16, QWZ_DEQUANTIZE_BYTES = 1 + 2 per gathered parameter (the per-block scales are a fraction of a
  percent). qgZ's hierarchical all-to-all (runtime/comm/coalesced_collectives.py all_to_all_quant_reduce)
  first quantizes the whole gradient to int4 with the slices reordered for the exchange (swizzle_quant:
  read 2 B, write 0.5 B an element), then dequantizes, reduces and requantizes what the node's GPUs sent it
  (quantized_reduction: read 0.5 B an element of the whole gradient, write a node's share of it); the last
  dequantization touches 1 / n of it: QGZ_QUANTIZE_BYTES = 2.5 + 0.5 + 0.1, on the reduction stream ahead
  of the reduce-scatter it replaces.
- A power cap below the TDP lowers the clock the GPU sustains under load: dynamic power goes as
  C V^2 f and, along the DVFS curve, V roughly with f, so P ~ f^3 and the clock falls as the cube
  root of cap / TDP (the standard DVFS approximation; A100 PCIe at 250 W against SXM at 400 W gives
  0.855, in line with its ~10-15% lower sustained GEMM rate). Compute-bound work slows by that
  factor; memory-bound work does not.
- CUDA_LAUNCH_BLOCKING=1 (`launch_blocking`) makes every launch return only when its kernel has
  finished, so the host's work for the next operation (Python, the framework's dispatch, the launch
  itself) no longer runs ahead of the GPU: each kernel is followed by a gap of BLOCKING_LAUNCH_GAP_S
  in which the GPU idles. A Megatron GPT layer (fused norm, bias-GeLU, bias-dropout-add and
  scale-mask-softmax kernels, no flash attention) launches about LAYER_KERNELS["forward"] = 20
  kernels forward (norms 2, GEMMs 4, score and context batched GEMMs 2, softmax 1, dropout 1, the
  context permute 1, TP all-reduces 2, bias-dropout-adds 2, bias-GeLU 1, and the q/k/v views that
  copy, ~4) and LAYER_KERNELS["backward"] = 45 backward (two GEMMs per GEMM, bias and norm
  gradients, the element-wise backwards, and one gradient-accumulation add per weight and bias);
  selective recomputation re-runs the 4 kernels of the attention core. The gap itself is what the
  BigScience team measured: their 200B prototype (80 layers, hidden 14400, TP 8, PP 10, micro-batch
  1, 512 micro-batches, 80 A100) ran 91.04 TFLOP/s with blocking launches and 97.20 without, 6.8%
  longer (tr11-176B-ml chronicles-prequel, "dealing with JZ hanging"): 15.1 s more a step, its
  hardware FLOPs over those rates. Over the kernels a step launches with these counts that is
  BLOCKING_LAUNCH_GAP_S = 43 us a kernel, in line with PyTorch's tens of microseconds of host time
  per eager operation. The gap is derived from the measured seconds, not from the model's step, so it
  does not move when the compute model does. The A/B run is not one of the validation cases.
A compute calibration (benchmarks/gpu_calibration.py) replaces the GEMM asymptote with the
measured median; a user's measured single-GPU tokens/s for the job scales all compute (`scale`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from simulator.training.recompute import modules_of
from simulator.training.routing import routed_load
from topologies.hardware import GpuSpec, gpu_spec
from workloads.model import ACTIVATION_BYTES, TransformerModel
from workloads.remat import is_remat_policy, recomputes_attention
from workloads.spec import MEGATRON_RECOMPUTE_DEFAULT, TrainingSpec

GEMM_EFFICIENCY = {"volta": 0.80, "turing": 0.75, "ampere": 0.80, "ada": 0.70, "hopper": 0.67, "blackwell": 0.62}
# the part of each generation whose figures GEMM_EFFICIENCY states (module docstring)
GEMM_REFERENCE_GPU = {"ampere": "A100-SXM4-80GB", "hopper": "H100-SXM5-80GB", "blackwell": "B200-180GB"}
GEMM_HALF_DIM = 512.0
NONCAUSAL_SPEEDUP = 1.13  # non-causal over causal attention per unit of useful work (module docstring)
# bytes a step of PyTorch's eager ring merge moves per element (module docstring)
CP_EAGER_MERGE_BYTES = {"q": 32.0, "kv": 4.0, "q_grad": 11.5, "kv_grad": 23.5}
ATTENTION_EFFICIENCY = {"volta": 0.25, "turing": 0.30, "ampere": 0.55, "ada": 0.45, "hopper": 0.35, "blackwell": 0.35}
# cuDNN's fused attention where it differs: H100 SXM5, head dim 128, 4k-16k tokens, causal forward 518-539
# and backward 499-516 TFLOP/s of 989 (Shah et al. 2024, FlashAttention-3, figures 5-6; FlashAttention-2
# 319-335 and 310-322 there, the 0.35 above). B200: FlashAttention-4 reaches up to 1,613 TFLOP/s bf16 (71% of
# 2,250) and up to 1.3x cuDNN 9.13 (Zadouri et al. 2026, arXiv 2603.05451, abstract), so cuDNN reaches at least
# 1,613 / 1.3 = 1,240 TFLOP/s, 55% of peak: the Hopper entry's share of its benchmark rate (0.50 of 0.53).
CUDNN_ATTENTION_EFFICIENCY = {**ATTENTION_EFFICIENCY, "hopper": 0.50, "blackwell": 0.52}
# per TrainingSpec.attention_kernel; MPT's Triton FlashAttention (a port of FlashAttention's algorithm built
# with a 2022 Triton compiler) has no published benchmark on these GPUs: FlashAttention-2's rates are its
# prior, and the fit over the published runs (simulator.validation.training_fit) gives it its own factor
# FlashAttention 1.x (flash-attn before 2.0): FlashAttention-2 yields "around 2x speedup compared to FlashAttention",
# which reached "only 25-40% of the theoretical maximum FLOPs/s" on A100 (Dao 2023, arXiv 2307.08691, abstract)
FLASH2_OVER_FLASH1 = 2.0
ATTENTION_EFFICIENCY_BY_KERNEL = {"flash2": ATTENTION_EFFICIENCY, "cudnn": CUDNN_ATTENTION_EFFICIENCY,
                                  "triton": ATTENTION_EFFICIENCY,
                                  "flash1": {arch: e / FLASH2_OVER_FLASH1 for arch, e in ATTENTION_EFFICIENCY.items()}}


@dataclass(frozen=True)
class AttentionShape:
    """A fused attention kernel's efficiency against the keys s each query attends to and the head dim d:
    a_d x s / (s + s_half), a_d interpolated linearly in d between the measured widths; both held at the
    ends of the measured range (ATTENTION_SHAPE_KEYS, the smallest and widest head dims) beyond them."""

    amplitudes: tuple[tuple[int, float], ...]  # (head dim, a_d), by head dim
    s_half: float

    def efficiency(self, keys: int, head_dim: int) -> float:
        widths = [d for d, _ in self.amplitudes]
        amplitude = float(np.interp(head_dim, widths, [a for _, a in self.amplitudes]))
        s = min(ATTENTION_SHAPE_KEYS[1], max(ATTENTION_SHAPE_KEYS[0], keys))
        return amplitude * s / (s + self.s_half)

    def factor(self, keys: int, head_dim: int) -> float:
        """Efficiency at (keys, head_dim) over that at the efficiency tables' reference shape."""
        return self.efficiency(keys, head_dim) / self.efficiency(ATTENTION_REFERENCE_SEQ, 128)


# the efficiency tables' figures are for head dim 128 at 4k-16k tokens (FlashAttention-3 paper): 8k their middle
ATTENTION_REFERENCE_SEQ = 8192
ATTENTION_SHAPE_KEYS = (512, 65536)  # the keys a query attended to in the measurements
# measured: FlashAttention-2 and cuDNN 9.19 through torch 2.11's SDPA on an H200, causal, 512-64k tokens, head
# dims 64-256 (benchmarks/data/h200_compute.yaml; fitted by benchmarks/fit_compute_curves.py, median |error|
# 1.5% and 2.5%); MPT's Triton port takes FlashAttention-2's
FLASH2_SHAPE = AttentionShape(((64, 0.502), (80, 0.41), (96, 0.514), (128, 0.571), (192, 0.523), (256, 0.51)), 778.0)
ATTENTION_SHAPE = {"flash2": FLASH2_SHAPE,
                   "cudnn": AttentionShape(((64, 0.792), (80, 0.706), (96, 0.83), (128, 1.042), (192, 0.757),
                                            (256, 0.851)), 703.0),
                   "triton": FLASH2_SHAPE, "flash1": FLASH2_SHAPE}
ATTENTION_SHAPE_ARCHS = frozenset({"hopper", "blackwell"})  # measured on Hopper; Blackwell by its kernels (docstring)
MEMORY_EFFICIENCY = 0.85
# bytes per output element of a LoRA adapter's element-wise steps beside its two matmuls (PEFT's
# base(x) + lora_B(lora_A(x)) * scaling): forward the scaling (read and write the output, 4 B) and the add to
# the base layer's output (read both, write one: 6 B); backward the scaled output gradient (4 B) and the add of
# the adapter's input gradient into the base layer's (6 B), per input element
LORA_ELEMENTWISE_BYTES = {"forward": 10.0, "backward": 10.0}
ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN = 40.0
ELEMENTWISE_EAGER_BYTES_PER_TOKEN_HIDDEN = 145.0
FP8_CAST_BYTES = 4.0  # read bf16 (2 B), write fp8 (1 B) and its transpose (1 B)
# per-tensor current scaling: the amax pass reads the tensor once more before its cast (module docstring)
FP8_AMAX_BYTES = 2.0
# GEMM inputs (forward) and output gradients (backward) whose producer computes the amax as it writes them under
# current scaling: TE's norm kernels before qkv and mlp_up (normalization.cpp FUSED_NORM_AMAX_FP8) and its
# activation and activation-gradient kernels before mlp_down and after mlp_up (activation.cpp
# FUSED_ACTIVATION_AMAX_FP8), inside TE's LayerNormLinear and LayerNormMLP. A mixture of experts' MLPs are not
# LayerNormMLP (Megatron-Core's GroupedMLP and shared experts take the router's normed input and run their own
# activation): there only qkv's input is fused
AMAX_FUSED_INPUTS = {"dense": frozenset({"qkv", "mlp_up", "mlp_down"}), "moe": frozenset({"qkv"})}
AMAX_FUSED_GRADIENTS = {"dense": frozenset({"mlp_up"}), "moe": frozenset()}
# an fp8 weight GEMM's share of the fp8 peak over the same bf16 GEMM's share of the bf16 peak, by GPU generation
# (module docstring): measured on Hopper, Blackwell's from the one same-method comparison of the two
FP8_GEMM_EFFICIENCY = {"hopper": {"forward": 0.945, "backward": 0.90}, "blackwell": {"forward": 1.0, "backward": 1.0}}
# bytes a logit the loss's element-wise passes move, forward and backward together (module docstring)
LOSS_BYTES_PER_LOGIT = {"megatron": 52.0, "megatron-fused": 40.0, "eager": 44.0, "compiled": 8.0, "flash-attn": 6.0}
LOSS_BYTES_BY_CROSS_ENTROPY = {"fused": LOSS_BYTES_PER_LOGIT["megatron-fused"], "eager": LOSS_BYTES_PER_LOGIT["eager"]}
QWZ_DEQUANTIZE_BYTES = 3.0  # ZeRO++ qwZ, per gathered parameter: read int8 (1 B), write bf16 (2 B)
QGZ_QUANTIZE_BYTES = 3.1  # ZeRO++ qgZ, per gradient element: swizzle_quant 2.5, quantized_reduction ~0.6
MOE_PERMUTE_BYTES = 4.0  # per routed copy: written by the dispatch permutation, read by the unpermutation (2 B each)
MOE_ACTIVATION_BYTES = 4.0  # per element of the MLP intermediate (the ~16 B per token-hidden of a 4 h MLP)
OPTIMIZER_BYTES_PER_PARAM = {"adam": 32.0, "adamw": 32.0, "sgd": 16.0}
UNFUSED_SCORE_BYTES = 13.0
UNFUSED_SCORE_BYTES_BACKWARD = 17.0
TENSOR_CORE_ALIGN_BYTES = 16  # operand rows tensor-core GEMM kernels need in whole 128-bit vectors (docstring)
# the norms' and residual adds' bytes of the above (fused: 8 + 12 of 40; eager: 72 + 12 of 145)
REPLICATED_ELEMENTWISE_BYTES = {True: 20.0, False: 84.0}
# of those, the norms' (fused 8 of 20, eager 72 of 84): what Megatron-Core's layernorm recompute module re-runs
NORM_SHARE = {True: 8.0 / 20.0, False: 72.0 / 84.0}
KERNEL_LAUNCH_S = 5e-6  # per layer and pass: a dozen kernels of a few microseconds' launch gap
LAYER_KERNELS = {"forward": 20, "backward": 45, "attention": 4}  # launches per layer (CUDA_LAUNCH_BLOCKING)
BLOCKING_LAUNCH_GAP_S = 43e-6  # GPU idle after each blocking launch (BigScience's A/B, module docstring)


@cache
def gemm_rate_factor(gpu: GpuSpec) -> float:
    """A part's measured matmul share of its bf16 peak over its generation's reference part's (module docstring);
    1 where either has no measured rate."""
    reference = GEMM_REFERENCE_GPU.get(gpu.arch)
    if reference is None or gpu.mamf_bf16_tflops is None or gpu.bf16_tflops is None:
        return 1.0
    ref = gpu_spec(reference)
    if ref.mamf_bf16_tflops is None or ref.bf16_tflops is None:
        return 1.0
    return (gpu.mamf_bf16_tflops / gpu.bf16_tflops) / (ref.mamf_bf16_tflops / ref.bf16_tflops)


def fp8_gemm_ratio(arch: str, role: str) -> float:
    """FP8_GEMM_EFFICIENCY of generation `arch` for a forward or backward GEMM; Hopper's for other fp8 GPUs."""
    return FP8_GEMM_EFFICIENCY.get(arch, FP8_GEMM_EFFICIENCY["hopper"])[role]


@dataclass(frozen=True)
class LayerTimes:
    """Seconds for one transformer layer on one micro-batch."""

    forward_s: float
    backward_s: float
    recompute_s: float

    @property
    def total_s(self) -> float:
        """Forward, recompute and backward together."""
        return self.forward_s + self.recompute_s + self.backward_s


@dataclass(frozen=True)
class ComputeModel:
    """Per-GPU compute rates for one GPU type, precision and calibration scale."""

    gpu: GpuSpec
    precision: str
    scale: float = 1.0  # measured / modelled throughput (1.0 = uncalibrated)
    gemm_efficiency_asymptote: float | None = None  # measured (compute calibration) instead of the table
    clock_factor: float = 1.0  # sustained clock under a power cap over the uncapped one (power_capped_clock)
    attention_kernel: str = "flash2"  # flash2, cudnn, triton or flash1 (TrainingSpec.attention_kernel)
    fused_elementwise: bool = True  # TrainingSpec.fused_elementwise
    launch_blocking: bool = False  # TrainingSpec.launch_blocking
    ring_attention: bool = True  # context parallelism by a key/value ring (ParallelSpec.cp_comm p2p), not a2a
    eager_cp_merge: bool = False  # PyTorch's ring: step outputs merged in eager fp32 ops (ParallelSpec.cp_merge)
    routed_load: float = 1.0  # the busiest expert-parallel rank's routed rows over the balanced share (routing)
    attention_scale: float = 1.0  # on the attention efficiency table (simulator.validation.training_fit)
    packed_sample_len: int | None = None  # TrainingSpec.packed_sample_len: attention within samples this long
    lora_rank: int | None = None  # TrainingSpec.lora_rank: frozen weights, adapters of this rank
    lora_targets: tuple[str, ...] | None = None  # TrainingSpec.lora_targets: the matrices with adapters (None: all)
    elementwise_bytes: float | None = None  # TrainingSpec.elementwise_bytes (None: by fused_elementwise)
    loss_bytes_per_logit: float = LOSS_BYTES_PER_LOGIT["megatron-fused"]  # TrainingSpec.loss_bytes_per_logit
    weight_cast_share: float = 1.0  # of a step's micro-batches, the share that cast the weights to fp8 (for_job)
    # what selective recomputation re-runs (TrainingSpec.recompute_modules; Megatron-Core's default core_attn)
    recompute_modules: tuple[str, ...] = MEGATRON_RECOMPUTE_DEFAULT
    fp8_recipe: str = "delayed"  # TrainingSpec.fp8_recipe

    def elementwise_profile(self) -> tuple[float, float]:
        """(bytes, of which those of the norms and residual adds) the block's element-wise work moves per token per
        hidden unit a layer forward: fused or eager (module docstring), or a framework's own count
        (TrainingSpec.elementwise_bytes), its norms and adds taking the fused count's share."""
        if self.elementwise_bytes is not None:
            return self.elementwise_bytes, self.elementwise_bytes * REPLICATED_ELEMENTWISE_BYTES[True] / \
                ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN
        fused = self.fused_elementwise
        return (ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN if fused else ELEMENTWISE_EAGER_BYTES_PER_TOKEN_HIDDEN,
                REPLICATED_ELEMENTWISE_BYTES[fused])

    @classmethod
    def for_job(cls, gpu: GpuSpec, training: TrainingSpec, power_limit_w: float | None = None, scale: float = 1.0,
                gemm_efficiency: float | None = None, attention_scale: float = 1.0,
                micro_steps: int = 1) -> ComputeModel:
        """The compute model of `training` on `gpu` run under a power cap of `power_limit_w` (None: none), a step
        of `micro_steps` micro-batches (over which a framework caching fp8 weights casts them once)."""
        return cls(gpu, training.precision, scale, gemm_efficiency, power_capped_clock(gpu, power_limit_w),
                   training.attention_kernel, training.fused_elementwise, training.launch_blocking,
                   training.parallel.cp_comm == "p2p", training.parallel.cp_merge == "eager",
                   routed_load(training.routing, training.parallel.ep), attention_scale, training.packed_sample_len,
                   training.lora_rank, training.lora_targets, training.elementwise_bytes,
                   training.loss_bytes_per_logit or LOSS_BYTES_BY_CROSS_ENTROPY[training.cross_entropy],
                   recompute_modules=modules_of(training), fp8_recipe=training.fp8_recipe
                   ).casting_weights_over(training, micro_steps)

    def casting_weights_over(self, training: TrainingSpec, micro_steps: int) -> ComputeModel:
        """This model in a step of `micro_steps` micro-batches: its fp8 weights cast once a step where `training`
        caches the cast (TrainingSpec.fp8_weight_cache), else on every micro-batch (weight_cast_share)."""
        cached = training.fp8_weight_cache and training.precision == "fp8"
        return replace(self, weight_cast_share=1.0 / micro_steps if cached else 1.0)

    def keys(self, seq_len: int) -> int:
        """Keys each query attends to: the sequence's, or its packed sample's (module docstring)."""
        return min(seq_len, self.packed_sample_len or seq_len)

    def with_routed_load(self, load: float) -> ComputeModel:
        """This model for a rank whose routed rows are `load` times the balanced share."""
        return replace(self, routed_load=load)

    @property
    def peak_flops(self) -> float:
        """Dense peak of the GEMMs at the compute precision (fp16 where the GPU has no bf16)."""
        precision = "fp16" if self.precision == "fp16" or self.gpu.bf16_tflops is None else self.precision
        return self.gpu.peak_tflops(precision) * 1e12  # type: ignore[arg-type]

    @property
    def hbm_Bps(self) -> float:
        """Device-memory bandwidth that memory-bound kernels reach: MEMORY_EFFICIENCY of the datasheet's."""
        return self.gpu.hbm_GBps * 1e9 * MEMORY_EFFICIENCY

    @property
    def attention_efficiency(self) -> float:
        """The fused attention kernel's share of the half-precision peak (see the module docstring)."""
        return min(1.0, ATTENTION_EFFICIENCY_BY_KERNEL[self.attention_kernel][self.gpu.arch] * self.attention_scale)

    @property
    def half_precision_flops(self) -> float:
        """Dense bf16 (or fp16) peak: what attention and non-GEMM work run at, fp8 or not."""
        precision = "bf16" if self.gpu.bf16_tflops is not None and self.precision != "fp32" else (
            "fp16" if self.precision != "fp32" else "fp32")
        return self.gpu.peak_tflops(precision) * 1e12  # type: ignore[arg-type]

    def gemm_efficiency(self, m: int, n: int, k: int) -> float:
        smallest = float(min(m, n, k))
        asymptote = self.gemm_efficiency_asymptote or GEMM_EFFICIENCY[self.gpu.arch] * gemm_rate_factor(self.gpu)
        return asymptote * smallest / (smallest + GEMM_HALF_DIM)

    def _roofline(self, flops: float, efficiency: float, bytes_moved: float, peak: float | None = None) -> float:
        compute = flops / ((peak or self.peak_flops) * efficiency * self.clock_factor)
        memory = bytes_moved / self.hbm_Bps
        return max(compute, memory)

    def layer(self, model: TransformerModel, micro_batch: int, seq_len: int, checkpointing: str,
              tp: int = 1, sequence_parallel: bool = False, flash_attention: bool = True, cp: int = 1,
              ep: int = 1, expert_tp: int | None = None) -> LayerTimes:
        """Forward, backward (2x the forward's matmuls) and recompute time of one layer on one GPU of
        a tensor-parallel group of `tp` and a context-parallel group of `cp`, which holds seq_len / cp
        of each sequence's tokens and attends them to all seq_len keys, and of an expert-parallel group
        of `ep` whose routed experts split over `expert_tp` GPUs (ParallelSpec.expert_tp; default tp; see the
        module docstring)."""
        tokens = micro_batch * seq_len // cp
        fp8 = self.precision == "fp8"
        hbm = self.hbm_Bps
        gemms = model.sharded_layer_gemms(tokens, tp, expert_tp)
        each_gemm_s = self._gemms_s(gemms, model, ep)
        gemm_s = sum(each_gemm_s.values())
        gemm_backward_s = sum(self._gemms_s(gemms, model, ep, "backward").values()) if fp8 else gemm_s
        cast_forward_s, cast_backward_s = (b / hbm for b in self._cast_bytes(gemms, model.spec.moe)) if fp8 \
            else (0.0, 0.0)
        attention_s = self._attention_s(model, tokens, seq_len, tp, cp,
                                        tensor_cores=flash_attention or self.heads_aligned(model))
        per_hidden, replicated = self.elementwise_profile()
        norms_s = tokens * model.spec.hidden * replicated * NORM_SHARE[self.fused_elementwise] / hbm
        replicated = 0.0 if sequence_parallel else replicated
        elementwise_s = tokens * model.spec.hidden * (replicated + (per_hidden - replicated) / tp
                                                      + _moe_elementwise_bytes(model, tp, self.routed_load)) / hbm
        scores = 0.0 if flash_attention else (micro_batch * model.spec.heads / tp * float(seq_len)
                                              * self.keys(seq_len) / cp)
        gap = BLOCKING_LAUNCH_GAP_S if self.launch_blocking else 0.0
        merge_forward_s, merge_backward_s = self._eager_merge_s(model, tokens, tp, cp)
        adapter_forward_s, adapter_backward_s = self._lora_s(model.lora_adapters(gemms, self.lora_targets))
        weight_grads = 0.0 if self.lora_rank is not None else gemm_backward_s  # frozen weights: input gradients only
        forward = (gemm_s + cast_forward_s + attention_s + merge_forward_s + elementwise_s + adapter_forward_s
                   + scores * UNFUSED_SCORE_BYTES / hbm + KERNEL_LAUNCH_S + LAYER_KERNELS["forward"] * gap)
        backward = (gemm_backward_s + weight_grads + 2.0 * attention_s + merge_backward_s + cast_backward_s
                    + 2.0 * elementwise_s + adapter_backward_s + scores * UNFUSED_SCORE_BYTES_BACKWARD / hbm
                    + KERNEL_LAUNCH_S + LAYER_KERNELS["backward"] * gap)
        core = attention_s + merge_forward_s + scores * UNFUSED_SCORE_BYTES / hbm + LAYER_KERNELS["attention"] * gap
        if checkpointing == "op":  # the matmuls torchtitan's policy re-runs (with their fp8 casts) and the
            # element-wise work, not attention (its output is kept); its save list names aten.mm, so float8
            # matmuls (torch._scaled_mm) are all re-run
            recomputed_s = gemm_s if fp8 else sum(each_gemm_s[name] * part
                                                  for name, part, _ in model.op_recomputed_gemms())
            recompute = recomputed_s * (1.0 + cast_forward_s / gemm_s) + elementwise_s + KERNEL_LAUNCH_S
        elif is_remat_policy(checkpointing):  # a JAX policy re-runs the matmuls whose outputs it does not keep
            # (their fp8 casts too), attention unless it keeps its output, and the element-wise work
            recomputed_s = sum(each_gemm_s[name] for name in model.remat_recomputed_gemms(checkpointing))
            recompute = (recomputed_s * (1.0 + cast_forward_s / gemm_s) + elementwise_s + KERNEL_LAUNCH_S
                         + (core if recomputes_attention(checkpointing) else 0.0))
        elif checkpointing == "selective":  # Megatron-Core's recompute modules, each re-run on its own
            recast = 1.0 + (cast_forward_s / gemm_s if gemm_s else 0.0)
            recompute = sum(self._module_s(module, model, tokens, tp, each_gemm_s, recast, core,
                                           norms_s / tp if sequence_parallel else norms_s)
                            for module in self.recompute_modules)
        else:
            recompute = {"none": 0.0, "full": forward}[checkpointing]
        return LayerTimes(forward / self.scale, backward / self.scale, recompute / self.scale)

    def _module_s(self, module: str, model: TransformerModel, tokens: int, tp: int, each_gemm_s: dict[str, float],
                  recast: float, core_s: float, norms_s: float) -> float:
        """Seconds one layer's re-run of a Megatron-Core recompute module takes (module docstring): its GEMMs (with
        their fp8 casts, `recast`), element-wise work and attention core; 0 where the block lacks the module."""
        spec, hbm = model.spec, self.hbm_Bps

        def mlp_s(gemms: tuple[str, ...], intermediate: float) -> float:  # GEMMs and the activation between them
            return recast * sum(each_gemm_s[name] for name in gemms) + MOE_ACTIVATION_BYTES * intermediate / tp / hbm

        if module == "core_attn":
            return core_s
        if module == "layernorm":
            return norms_s
        if module == "mla_up_proj":  # MLA's query and key-value up projections (the rotary part rides along)
            return recast * sum(each_gemm_s[name] for name in ("q_up", "kv_up")) if spec.mla else 0.0
        if not spec.moe:
            return mlp_s(("mlp_up", "mlp_down"), tokens * model.ffn_hidden) if module == "mlp" else 0.0
        act_s = MOE_ACTIVATION_BYTES * tokens * spec.experts_per_token * self.routed_load * model.expert_ffn_hidden \
            / tp / hbm
        shared_s = mlp_s(("shared_up", "shared_down"), tokens * spec.shared_experts * model.expert_ffn_hidden) \
            if spec.shared_experts else 0.0
        if module == "moe_act":
            return act_s
        if module == "shared_experts":
            return shared_s
        if module == "moe":  # the router, the permutation, the routed experts and their activation, shared experts
            permute_s = tokens * spec.hidden * (2.0 * ACTIVATION_BYTES + spec.experts_per_token * self.routed_load
                                                * MOE_PERMUTE_BYTES) / hbm
            return recast * sum(each_gemm_s[name] for name in ("router", "mlp_up", "mlp_down")) + permute_s + act_s \
                + shared_s
        return 0.0

    def _lora_s(self, adapters: list[tuple[str, int, int, int]]) -> tuple[float, float]:
        """(forward, backward) seconds of one layer's LoRA `adapters`, each as the (sharded) weight GEMM share it
        adapts (TransformerModel.lora_adapters; module docstring); 0 without LoRA."""
        r = self.lora_rank
        if r is None:
            return 0.0, 0.0
        forward = backward = 0.0
        for _, m, n, k in adapters:
            down = self._roofline(2.0 * m * k * r, self.gemm_efficiency(m, r, k), 2.0 * (m * k + k * r + m * r),
                                  self.half_precision_flops)
            up = self._roofline(2.0 * m * r * n, self.gemm_efficiency(m, n, r), 2.0 * (m * r + r * n + m * n),
                                self.half_precision_flops)
            forward += down + up + LORA_ELEMENTWISE_BYTES["forward"] * m * n / self.hbm_Bps
            backward += 2.0 * (down + up) + LORA_ELEMENTWISE_BYTES["backward"] * m * k / self.hbm_Bps
        return forward, backward

    def _eager_merge_s(self, model: TransformerModel, tokens: int, tp: int, cp: int) -> tuple[float, float]:
        """(forward, backward) seconds of PyTorch's eager ring merges over one layer (module docstring); 0
        without context parallelism or with fused merges."""
        if cp == 1 or not self.ring_attention or not self.eager_cp_merge:
            return 0.0, 0.0
        out, kv = tokens * model.out_dim / tp, tokens * (model.k_dim + model.v_dim) / tp
        b = CP_EAGER_MERGE_BYTES
        steps = (cp - 1) / self.hbm_Bps
        return steps * (b["q"] * out + b["kv"] * kv), steps * (b["q_grad"] * out + b["kv_grad"] * kv)

    def _cast_bytes(self, gemms: list[tuple[str, int, int, int]], moe: bool) -> tuple[float, float]:
        """Bytes the fp8 casts of a layer's GEMMs move, (forward, backward): forward each GEMM's input and its
        weight (weight_cast_share of it), backward each output gradient, FP8_CAST_BYTES an element; under
        tensorwise (current) scaling FP8_AMAX_BYTES more for each tensor whose producer does not compute its amax
        (AMAX_FUSED_INPUTS, AMAX_FUSED_GRADIENTS, by whether the block is a mixture of experts, `moe`) and for every
        weight (module docstring)."""
        amax = FP8_AMAX_BYTES if self.fp8_recipe == "tensorwise" else 0.0
        block = "moe" if moe else "dense"
        inputs, gradients = AMAX_FUSED_INPUTS[block], AMAX_FUSED_GRADIENTS[block]
        forward = sum(m * k * (FP8_CAST_BYTES + (0.0 if name in inputs else amax))
                      + self.weight_cast_share * k * n * (FP8_CAST_BYTES + amax) for name, m, n, k in gemms)
        backward = sum(m * n * (FP8_CAST_BYTES + (0.0 if name in gradients else amax)) for name, m, n, k in gemms)
        return forward, backward

    def _gemms_s(self, gemms: list[tuple[str, int, int, int]], model: TransformerModel,
                 ep: int, role: str = "forward") -> dict[str, float]:
        """Roofline seconds of each GEMM, forward or (`role` "backward") one of its two backward GEMMs; a grouped
        expert GEMM's rows, routed_load times the balanced share, split over the GPU's E / ep experts, each
        expert's weights read once; fp8 GEMMs at FP8_GEMM_EFFICIENCY of the bf16 share (module docstring)."""
        fp8 = self.precision == "fp8"
        operand = 1.0 if fp8 else 2.0
        relative = fp8_gemm_ratio(self.gpu.arch, role) if fp8 else 1.0
        seconds = {}
        for name, m, n, k in gemms:
            experts = model.gemm_experts(name)
            groups = max(1, experts // ep)
            if experts > 1:
                m = max(1, round(m * self.routed_load))
            efficiency = relative * self.gemm_efficiency(max(1, m // groups), n, k)
            seconds[name] = self._roofline(2.0 * m * n * k, efficiency,
                                           operand * (m * k + groups * k * n) + 2.0 * m * n)
        return seconds

    def gemms_s(self, model: TransformerModel, micro_batch: int, seq_len: int, tp: int = 1,
                cp: int = 1, ep: int = 1, expert_tp: int | None = None) -> dict[str, float]:
        """Forward seconds of each of a block's weight GEMMs (qkv, attn_out, mlp_up, mlp_down; a mixture of
        experts' router and shared experts too) on one GPU of a tensor-parallel group of `tp` (and
        context- and expert-parallel groups of `cp` and `ep`): part of layer()'s forward, what an
        overlapped TP collective can hide behind (simulator.training.tasks.overlap_budgets). With MLA, `qkv` is
        also given, as its column-parallel projections q_up and kv_up together: the GEMMs the attention's TP
        collectives pair with, as a plain block's qkv (sharded_gemms splits them so)."""
        gemms = model.sharded_layer_gemms(micro_batch * seq_len // cp, tp, expert_tp)
        seconds = {name: each / self.scale for name, each in self._gemms_s(gemms, model, ep).items()}
        if model.spec.mla is not None:
            seconds["qkv"] = seconds["q_up"] + seconds["kv_up"]
        return seconds

    def attention_forward_s(self, model: TransformerModel, micro_batch: int, seq_len: int, tp: int = 1,
                            cp: int = 1) -> float:
        """Forward seconds of one layer's fused attention kernel on one GPU (part of layer()'s forward;
        backward takes twice): what a context-parallel ring step hides behind."""
        return self._attention_s(model, micro_batch * seq_len // cp, seq_len, tp, cp) / self.scale

    def heads_aligned(self, model: TransformerModel) -> bool:
        """Whether a head's row of q, k or v is a whole number of 16-byte vectors at the attention's precision,
        as unfused attention's batched tensor-core GEMMs need (module docstring)."""
        element_bytes = 4 if self.precision == "fp32" else 2
        return model.head_dim * element_bytes % TENSOR_CORE_ALIGN_BYTES == 0

    def _attention_s(self, model: TransformerModel, tokens: int, seq_len: int, tp: int, cp: int = 1,
                     tensor_cores: bool = True) -> float:
        """Seconds of `tokens` queries' attention to `seq_len` keys, at the kernel's efficiency for the keys
        each of its calls sees (a ring step's seq_len / cp) and the head dim (ATTENTION_SHAPE, where measured); over a
        context-parallel ring of `cp`, the c - 1 of its c steps that run the non-causal kernel go
        NONCAUSAL_SPEEDUP faster; without `tensor_cores` (unfused attention on misaligned heads) at the fp32
        peak (module docstring)."""
        keys = self.keys(seq_len)
        kernel_keys = max(1, keys // cp) if self.ring_attention else keys
        flops = model.attention_forward_flops(tokens, keys) / tp
        if tensor_cores:
            shape = (ATTENTION_SHAPE[self.attention_kernel].factor(kernel_keys, model.head_dim)
                     if self.gpu.arch in ATTENTION_SHAPE_ARCHS else 1.0)
            causal = self._roofline(flops, self.attention_efficiency * shape, 0.0, self.half_precision_flops)
        else:  # CUDA cores: the table's share of the fp32 peak; a fitted attention_scale is the kernels' own
            causal = self._roofline(flops, ATTENTION_EFFICIENCY_BY_KERNEL[self.attention_kernel][self.gpu.arch], 0.0,
                                    self.gpu.peak_tflops("fp32") * 1e12)
        if cp == 1 or not self.ring_attention:
            return causal
        return causal * (1.0 + (cp - 1) / NONCAUSAL_SPEEDUP) / cp

    def head(self, model: TransformerModel, micro_batch: int, seq_len: int, tp: int = 1,
             cp: int = 1) -> tuple[float, float]:
        """(forward, backward) seconds of the embedding lookup, output projection and loss (its element-wise
        passes: LOSS_BYTES_PER_LOGIT; the vocabulary split over a tensor-parallel group of `tp`; seq_len / cp
        tokens a sequence)."""
        tokens = micro_batch * seq_len // cp
        h, v = model.spec.hidden, -(-model.spec.vocab // tp)
        logits = self._roofline(model.head_forward_flops(tokens) / tp, self.gemm_efficiency(tokens, v, h),
                                2.0 * (tokens * h + h * v) + 4.0 * tokens * v, self.half_precision_flops)
        loss = 0.5 * self.loss_bytes_per_logit * tokens * v / self.hbm_Bps  # each pass's half (module docstring)
        frozen = self.lora_rank is not None  # a frozen output layer: its input gradient only
        return (logits + loss) / self.scale, ((1.0 if frozen else 2.0) * logits + loss) / self.scale

    def mtp_heads(self, model: TransformerModel, micro_batch: int, seq_len: int, tp: int = 1,
                  cp: int = 1) -> tuple[float, float]:
        """(forward, backward) seconds of the model's multi-token prediction modules' passes through the output
        layer and loss (head's, once a module; their blocks are priced as blocks)."""
        forward, backward = self.head(model, micro_batch, seq_len, tp, cp)
        return model.mtp_layers * forward, model.mtp_layers * backward

    def micro_step_s(self, model: TransformerModel, micro_batch: int, seq_len: int, checkpointing: str,
                     recomputing: list[tuple[TransformerModel, int, int]] | None = None) -> float:
        """Compute of one micro-step alone (all layers forward, recompute and backward, the head); `recomputing`:
        (block, layers, how many recompute) where not every layer does (simulator.training.recompute)."""
        head_f, head_b = self.head(model, micro_batch, seq_len)
        mtp_f, mtp_b = self.mtp_heads(model, micro_batch, seq_len)
        counts = recomputing or [(block, n, n) for block, n in model.blocks]
        total = 0.0
        for block, n, r in counts:
            t = self.layer(block, micro_batch, seq_len, checkpointing)
            total += n * (t.forward_s + t.backward_s) + r * t.recompute_s
        return total + head_f + head_b + mtp_f + mtp_b

    def grad_accumulation(self, local_params: float, bytes_per_param: float) -> float:
        """Seconds of adding one micro-batch's gradients into the accumulation buffer (see the module
        docstring); 0 where the weight-gradient GEMMs accumulate in place."""
        return self.memory_pass_s(local_params, bytes_per_param)

    def memory_pass_s(self, elements: float, bytes_per_element: float) -> float:
        """Seconds of a memory-bound pass moving `bytes_per_element` HBM bytes for each of `elements`."""
        return elements * bytes_per_element / self.hbm_Bps / self.scale

    def optimizer(self, local_params: float, optimizer: str) -> float:
        """Seconds of one optimizer step over the parameters this GPU owns."""
        return self.memory_pass_s(local_params, OPTIMIZER_BYTES_PER_PARAM[optimizer])


def _moe_elementwise_bytes(model: TransformerModel, tp: int, load: float = 1.0) -> float:
    """A mixture of experts' element-wise bytes per token per hidden unit beyond a dense block's (see the
    module docstring): the permutation's input read and output write and its k routed copies (each
    TP rank permutes all its tokens), and the MLP activation's wider intermediate (split over tp); the
    routed copies and intermediates `load` times the balanced share (routing)."""
    spec = model.spec
    if not spec.moe:
        return 0.0
    k = spec.experts_per_token * load
    wider = (k + spec.shared_experts) * model.expert_ffn_hidden - model.ffn_hidden
    return 2.0 * ACTIVATION_BYTES + k * MOE_PERMUTE_BYTES + MOE_ACTIVATION_BYTES * wider / spec.hidden / tp


def power_capped_clock(gpu: GpuSpec, power_limit_w: float | None) -> float:
    """The clock a GPU sustains under a power cap, over its uncapped clock: (cap / TDP)^(1/3) (see
    the module docstring); 1 without a cap."""
    if power_limit_w is None or power_limit_w >= gpu.tdp_w:
        return 1.0
    return float((power_limit_w / gpu.tdp_w) ** (1.0 / 3.0))
