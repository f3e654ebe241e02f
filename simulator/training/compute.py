"""Compute time of one GPU's work: a roofline per operation with a shape-dependent efficiency.

time(op) = max(flops / (peak x efficiency), bytes / (hbm x MEMORY_EFFICIENCY)) + KERNEL_LAUNCH_S

- peak is the GPU's dense tensor rate at the compute precision (topologies/data/gpus.yaml).
- GEMM efficiency saturates with the GEMM's smallest dimension d: GEMM_EFFICIENCY[arch] x d /
  (d + GEMM_HALF_DIM). The asymptote is what cuBLAS reaches on large bf16/fp16 GEMMs: ~80% of
  dense peak on V100 and A100 (NVIDIA cuBLAS/Megatron reports: A100 ~250 of 312 TFLOP/s), ~75% on
  H100 SXM (~700-750 of 989) and ~70% on B200 (new, less mature kernels). Attention runs as a fused
  (flash) kernel at ATTENTION_EFFICIENCY of the GEMM asymptote (FlashAttention-2 paper: 50-73% of
  peak forward on A100).
- Element-wise work (norms, residuals, activation functions, dropout, softmax outside flash) is
  memory-bound: ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN bytes per token per hidden unit per layer
  forward (about a dozen bf16 reads and writes of the activations).
- The optimizer is memory-bound: Adam reads and writes fp32 master weights, two moments and the
  gradient (OPTIMIZER_BYTES_PER_PARAM per locally owned parameter).
A measured single-GPU rate (a compute calibration, or a user's tokens/s) scales all of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.hardware import GpuSpec
from workloads.model import TransformerModel

GEMM_EFFICIENCY = {"volta": 0.80, "turing": 0.75, "ampere": 0.80, "ada": 0.70, "hopper": 0.75, "blackwell": 0.70}
GEMM_HALF_DIM = 128.0
ATTENTION_EFFICIENCY = 0.75
MEMORY_EFFICIENCY = 0.85
ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN = 24.0
OPTIMIZER_BYTES_PER_PARAM = {"adam": 32.0, "adamw": 32.0, "sgd": 16.0}
KERNEL_LAUNCH_S = 5e-6  # per layer and pass: a dozen kernels of a few microseconds' launch gap


@dataclass(frozen=True)
class LayerTimes:
    """Seconds for one transformer layer on one micro-batch."""

    forward_s: float
    backward_s: float
    recompute_s: float


@dataclass(frozen=True)
class ComputeModel:
    """Per-GPU compute rates for one GPU type, precision and calibration scale."""

    gpu: GpuSpec
    precision: str
    scale: float = 1.0  # measured / modelled throughput (1.0 = uncalibrated)

    @property
    def peak_flops(self) -> float:
        precision = "fp16" if self.precision == "fp16" or self.gpu.bf16_tflops is None else self.precision
        return self.gpu.peak_tflops(precision) * 1e12  # type: ignore[arg-type]

    def gemm_efficiency(self, m: int, n: int, k: int) -> float:
        smallest = float(min(m, n, k))
        return GEMM_EFFICIENCY[self.gpu.arch] * smallest / (smallest + GEMM_HALF_DIM)

    def _roofline(self, flops: float, efficiency: float, bytes_moved: float) -> float:
        compute = flops / (self.peak_flops * efficiency)
        memory = bytes_moved / (self.gpu.hbm_GBps * 1e9 * MEMORY_EFFICIENCY)
        return max(compute, memory) / self.scale

    def layer(self, model: TransformerModel, micro_batch: int, seq_len: int, checkpointing: str) -> LayerTimes:
        """Forward, backward (2x the forward's matmuls) and recompute time of one layer."""
        tokens = micro_batch * seq_len
        gemm_s = sum(self._roofline(2.0 * m * n * k, self.gemm_efficiency(m, n, k), 2.0 * (m * k + k * n + m * n))
                     for _, m, n, k in model.layer_gemms(tokens))
        attention_flops = model.layer_forward_flops(tokens, seq_len) - 2.0 * sum(
            m * n * k for _, m, n, k in model.layer_gemms(tokens))
        attention_s = self._roofline(attention_flops, GEMM_EFFICIENCY[self.gpu.arch] * ATTENTION_EFFICIENCY, 0.0)
        elementwise_s = tokens * model.spec.hidden * ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN / (
            self.gpu.hbm_GBps * 1e9 * MEMORY_EFFICIENCY) / self.scale
        forward = gemm_s + attention_s + elementwise_s + KERNEL_LAUNCH_S
        backward = 2.0 * (gemm_s + attention_s) + 2.0 * elementwise_s + KERNEL_LAUNCH_S
        recompute = {"none": 0.0, "selective": attention_s, "full": forward}[checkpointing]
        return LayerTimes(forward, backward, recompute)

    def head(self, model: TransformerModel, micro_batch: int, seq_len: int) -> tuple[float, float]:
        """(forward, backward) seconds of the embedding lookup, output projection and loss."""
        tokens = micro_batch * seq_len
        h, v = model.spec.hidden, model.spec.vocab
        logits = self._roofline(model.head_forward_flops(tokens), self.gemm_efficiency(tokens, v, h),
                                2.0 * (tokens * h + h * v) + 4.0 * tokens * v)
        return logits, 2.0 * logits

    def optimizer(self, local_params: float, optimizer: str) -> float:
        """Seconds of one optimizer step over the parameters this GPU owns."""
        return local_params * OPTIMIZER_BYTES_PER_PARAM[optimizer] / (
            self.gpu.hbm_GBps * 1e9 * MEMORY_EFFICIENCY) / self.scale
