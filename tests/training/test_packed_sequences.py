"""Packed sequences (TrainingSpec.packed_sample_len): samples packed into a sequence attend only within
themselves, so attention costs as for sequences of the sample's length, and nothing else changes."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulator.core.errors import ConfigError
from simulator.training.compute import ATTENTION_SHAPE, ComputeModel
from simulator.training.predict import predict_step
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ModelSpec, ParallelSpec, TrainingSpec

MODEL = ModelSpec(name="m", layers=8, hidden=4096, heads=32, vocab=32000, max_seq_len=8192)
TOPOLOGY = load_preset("dgx-h100", nodes=1)


def job(packed: int | None = None, seq_len: int = 8192, **fields: object) -> TrainingSpec:
    return TrainingSpec(model="m", seq_len=seq_len, global_batch=8, packed_sample_len=packed, **fields)


def test_model_flops_count_attention_over_the_sample():
    """Model FLOPs a token: 6 (L 12 h^2 + h V) + 12 L h s (Narayanan et al. eq. 3), with s the packed sample's
    length: at 8,192-token sequences of 1,024-token samples, 12 L h (8192 - 1024) fewer."""
    m = transformer(MODEL)
    full, packed = m.model_flops_per_token(8192), m.model_flops_per_token(8192, 1.0, 1024)
    assert full - packed == pytest.approx(12 * 8 * 4096 * (8192 - 1024), rel=1e-9)
    assert m.model_flops_per_token(8192, 1.0, 8192) == full


def test_attention_time_scales_with_the_sample_and_gemms_do_not_move():
    """One layer's attention kernel at 1,024-token samples does 1/8 of its work over 8,192-token sequences, at
    the kernel's measured rate for 1,024 keys (Hopper's shape curve: 0.62 of the 8k rate at head dim 128);
    the weight GEMMs take the same time."""
    m = transformer(MODEL)
    gpu = gpu_spec("H100-SXM5-80GB")
    whole, packed = ComputeModel.for_job(gpu, job()), ComputeModel.for_job(gpu, job(1024))
    shape = ATTENTION_SHAPE["flash2"]
    assert packed.attention_forward_s(m, 1, 8192) == pytest.approx(
        whole.attention_forward_s(m, 1, 8192) / 8 / shape.factor(1024, 128) * shape.factor(8192, 128))
    assert packed.gemms_s(m, 1, 8192) == whole.gemms_s(m, 1, 8192)


def test_a_sample_as_long_as_the_sequence_is_no_packing():
    """packed_sample_len = seq_len predicts exactly what no packing does (metamorphic)."""
    a, b = predict_step(TOPOLOGY, job(), MODEL), predict_step(TOPOLOGY, job(8192), MODEL)
    assert (a.step_time_s, a.model_flops_per_step, a.memory.total_bytes) == \
        (b.step_time_s, b.model_flops_per_step, b.memory.total_bytes)


@settings(max_examples=12, deadline=None)
@given(st.integers(min_value=64, max_value=8191), st.integers(min_value=1, max_value=8191))
def test_shorter_samples_are_never_slower(longer: int, shorter: int):
    """Packing shorter samples never makes the step slower, and never changes the memory with a fused kernel."""
    shorter = min(shorter, longer)
    slow, fast = predict_step(TOPOLOGY, job(longer), MODEL), predict_step(TOPOLOGY, job(shorter), MODEL)
    assert fast.step_time_s <= slow.step_time_s
    assert fast.memory.total_bytes == slow.memory.total_bytes


def test_without_a_fused_kernel_the_score_matrix_shrinks_with_the_sample():
    """Unfused attention keeps 5 a s / h bytes a token-hidden unit of scores (Korthikanti et al.): 5 a l / h with
    packed samples of l tokens, so the activations of a step drop by 5 a (s - l) s b per layer."""
    m = transformer(MODEL)
    whole = m.activation_bytes_per_layer(1, 8192, "none")
    packed = m.activation_bytes_per_layer(1, 8192, "none", packed_sample_len=1024)
    assert whole - packed == pytest.approx(5 * 32 * (8192 - 1024) * 8192, rel=1e-9)


def test_bad_packing_is_refused_naming_the_field(tmp_path):
    """A sample longer than the sequence, or packing with context parallelism: refused; from the CLI exit 2 and one
    line naming training.packed_sample_len."""
    with pytest.raises(ValidationError, match="packed_sample_len: 9000 is longer than seq_len 8192"):
        job(9000)
    with pytest.raises(ValidationError, match="context parallelism"):
        job(1024, parallel=ParallelSpec(cp=2))
    with pytest.raises(ConfigError, match="packed_sample_len 9000 is longer than the sequence"):
        predict_step(TOPOLOGY, TrainingSpec(model="m", global_batch=8, packed_sample_len=9000), MODEL)
    path = tmp_path / "packed.yaml"
    path.write_text(yaml.safe_dump({"topology": "dgx-h100", "training": {
        "model": "llama3-8b", "seq_len": 4096, "global_batch": 8, "packed_sample_len": 5000}}), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", str(path)], capture_output=True,
                         text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "packed_sample_len" in lines[0]


def test_the_flag_sets_the_field_on_predict_and_scale():
    """`--packed-sample-len` on predict and scale is the scenario's packed_sample_len: echoed under `scenario`,
    the same step as the YAML field gives, shown in the table's header."""
    args = ["--model", "llama3-8b", "--topology", "dgx-h100", "--seq-len", "8192", "--global-batch", "64",
            "--packed-sample-len", "1024"]
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", *args, "--json"],
                         capture_output=True, text=True, check=True)
    data = yaml.safe_load(out.stdout)
    assert data["scenario"]["training"]["packed_sample_len"] == 1024
    expected = predict_step(load_preset("dgx-h100"), TrainingSpec(model="llama3-8b", seq_len=8192, global_batch=64,
                                                                   packed_sample_len=1024),
                            load_model("llama3-8b"))
    assert data["step_time_s"] == pytest.approx(expected.step_time_s, rel=1e-9)
    table = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", *args], capture_output=True,
                           text=True, check=True).stdout
    assert "packed samples of 1,024" in table
    scaled = subprocess.run([sys.executable, "-m", "simulator.cli.app", "scale", *args, "--nodes", "1,2"],
                            capture_output=True, text=True)
    assert scaled.returncode == 0, scaled.stderr
