"""Warnings about a training job that can run but was probably not meant: a global batch that reads
as a count of tokens, a sequence longer than the model's context. The job is predicted all the same.

A batch in tokens typed where sequences are asked for multiplies the step by the sequence length:
`--global-batch 8000000 --seq-len 2048` is 16 billion tokens a step. The rule: more than
TOKENS_PER_STEP_WARN tokens a step (global batch x sequence length), four times the largest batch
published for a large training run, is taken for such a mistake.
"""

from __future__ import annotations

from workloads.spec import ModelSpec, TrainingSpec

# 2^28 = 268M tokens a step: over 4x DeepSeek-V3's 15,360 sequences x 4,096 tokens = 63M (DeepSeek-V3 Technical
# Report, arXiv:2412.19437, section 4.2), the largest published; Llama 3 405B ramps to 16M (arXiv:2407.21783, 3.4.1)
TOKENS_PER_STEP_WARN = 2**28


def job_warnings(training: TrainingSpec, model: ModelSpec) -> list[str]:
    """One line per thing that looks unintended about `training` of `model` (see module docstring)."""
    warnings = []
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
    return warnings
