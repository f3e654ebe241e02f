"""Warnings about a training job that can run but was probably not meant: a global batch that reads
as a count of tokens, a sequence longer than the model's context, more recomputing layers than the model
has, an fp8 recipe on a job not in fp8, a model whose matrix dimensions
miss the tensor cores' alignment, a GB200 NVL72 job whose tray count splits over racks only into small
NVLink domains (TopologySpec.uneven_nvlink_note). The job is predicted all the same.

A batch in tokens typed where sequences are asked for multiplies the step by the sequence length:
`--global-batch 8000000 --seq-len 2048` is 16 billion tokens a step. The rule: more than
TOKENS_PER_STEP_WARN tokens a step (global batch x sequence length), four times the largest batch
published for a large training run, is taken for such a mistake.

Tensor-core GEMMs run fastest when their dimensions are multiples of 8 fp16/bf16 elements, on A100 and
later of 64 (128 bytes), and below that through slower kernels (NVIDIA, Matrix Multiplication Background
User's Guide, "Tensor Core Requirements"). The model prices the weight GEMMs by their size only, so a
tensor-parallel rank's share of the hidden size not a multiple of ALIGN_ELEMENTS_WIDE is predicted too fast;
a head width (the attention GEMMs' inner dimension) not a multiple of ALIGN_ELEMENTS is priced at the CUDA
cores' fp32 rate where attention is unfused (simulator.training.compute), and at a fused kernel's usual rate
otherwise, which such a kernel may not reach. Both are flagged. BigScience measured how
much on A100: a 200B prototype at hidden 14,400 (1,800 a rank at TP 8, head width 225) ran 94 TFLOP/s
a GPU where hidden 13,824 ran 120, and 128 heads of 108 at hidden 13,824 ran 100 where 64 heads ran
134 (tr11-176B-ml chronicles-prequel, "tile and wave quantization", "NHEADs comparison").
"""

from __future__ import annotations

from simulator.training.compute import TENSOR_CORE_ALIGN_BYTES
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec

# 2^28 = 268M tokens a step: over 4x DeepSeek-V3's 15,360 sequences x 4,096 tokens = 63M (DeepSeek-V3 Technical
# Report, arXiv:2412.19437, section 4.2), the largest published; Llama 3 405B ramps to 16M (arXiv:2407.21783, 3.4.1)
TOKENS_PER_STEP_WARN = 2**28
ALIGN_ELEMENTS = TENSOR_CORE_ALIGN_BYTES // 2  # fp16/bf16 elements of a 16-byte vector (module docstring)
ALIGN_ELEMENTS_WIDE = 64  # 128 bytes, A100 and later


def job_warnings(training: TrainingSpec, model: ModelSpec, topology: TopologySpec | None = None) -> list[str]:
    """One line per thing that looks unintended about `training` of `model` on `topology` (see module
    docstring)."""
    warnings = []
    if topology is not None and (note := topology.uneven_nvlink_note):
        warnings.append(f"topology {topology.name}: {note}")
    seq_len = training.seq_len or model.max_seq_len
    if training.global_batch is not None and training.global_batch * seq_len > TOKENS_PER_STEP_WARN:
        tokens = training.global_batch * seq_len
        warnings.append(
            f"training.global_batch {training.global_batch:,} sequences x {seq_len:,} tokens = {tokens:.3g} tokens a "
            f"step, over {TOKENS_PER_STEP_WARN / 1e6:.0f} million (4x the largest published batch): the global batch "
            f"counts sequences; for a batch in tokens give it divided by the sequence length "
            f"({training.global_batch / seq_len:,.0f} sequences)")
    if training.seq_len is not None and training.seq_len > model.max_seq_len:
        warnings.append(
            f"training.seq_len {training.seq_len:,} is longer than model {model.name}'s context (max_seq_len "
            f"{model.max_seq_len:,}): right for context extension, otherwise check the sequence length")
    if training.recompute_layers is not None and training.recompute_layers > model.layers:
        warnings.append(f"training.recompute_layers {training.recompute_layers:,} is more than model {model.name}'s "
                        f"{model.layers:,} layers: every layer recomputes, as with activation_checkpointing full alone")
    if training.fp8_recipe != "delayed" and training.precision != "fp8":
        warnings.append(f"training.fp8_recipe {training.fp8_recipe} is read only under precision fp8; the job runs "
                        f"{training.precision}, which it leaves as it is")
    warnings.extend(_alignment_warnings(training, model))
    return warnings


def _alignment_warnings(training: TrainingSpec, model: ModelSpec) -> list[str]:
    """Dimensions that miss the tensor cores' alignment (module docstring); none for MLA, whose head
    widths are their own fields."""
    if model.mla is not None:
        return []
    out = []
    head_dim = model.head_dim or model.hidden // model.heads
    if head_dim % ALIGN_ELEMENTS:
        out.append(f"model {model.name}: head width {head_dim} (hidden / heads) is not a multiple of {ALIGN_ELEMENTS}: "
                   f"unfused attention is priced at the CUDA cores' fp32 rate for it, a fused kernel at its usual "
                   f"rate, which it may not reach (a model choice worth checking)")
    tp = training.parallel.tp
    if model.hidden % (tp * ALIGN_ELEMENTS_WIDE):
        out.append(f"model {model.name}: hidden {model.hidden} over tensor parallelism {tp} is {model.hidden / tp:g} "
                   f"a rank, not a multiple of {ALIGN_ELEMENTS_WIDE}: tensor-core GEMMs run below the rate the "
                   f"prediction assumes")
    return out
