"""fp8 weight GEMMs: their rate against the measured bf16 / fp8 tables, and the weight cast that Transformer
Engine caches for a step's later micro-batches under Megatron-Core and NeMo (simulator.training.compute)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives.comm import comm_view
from simulator.scenario import with_framework
from simulator.training.compute import FP8_CAST_BYTES, FP8_GEMM_EFFICIENCY, ComputeModel, fp8_gemm_ratio
from simulator.training.predict import predict_step
from simulator.training.search import CandidateLayout, estimate_step_s
from topologies.build import build
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.spec import ModelSpec, ParallelSpec, TrainingSpec

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
H100 = gpu_spec("H100-SXM5-80GB")
MODEL = ModelSpec(name="m", layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, gated_mlp=True,
                  vocab=32000, max_seq_len=4096)
BLOCK = transformer(MODEL).blocks[0][0]
MIN_TIME_S = 100e-6  # below it the tables time the host's launch, not the GEMM (fit_compute_curves.py)


def _measured_ratios(table: str, role: str) -> list[float]:
    """fp8 share of the fp8 peak over bf16 share of the bf16 peak, for each shape timed in both dtypes."""
    gemms = yaml.safe_load((DATA / table).read_text())["compute"]["gemms"]
    gpu = gpu_spec({"h100_compute.yaml": "H100-SXM5-80GB", "h200_compute.yaml": "H200-SXM-141GB"}[table])
    timed = {(g["m"], g["n"], g["k"], g["role"], g["dtype"]): g for g in gemms if g["time_s"] >= MIN_TIME_S}
    return [(fp8["tflops"] / gpu.peak_tflops("fp8")) / (timed[(m, n, k, r, "bf16")]["tflops"]
                                                        / gpu.peak_tflops("bf16"))
            for (m, n, k, r, dtype), fp8 in timed.items()
            if dtype == "fp8" and r == role and (m, n, k, r, "bf16") in timed]


@pytest.mark.parametrize("table", ["h100_compute.yaml", "h200_compute.yaml"])
def test_fp8_ratios_are_the_measured_medians(table):
    """The constants are the tables' medians: forward 0.945 on both GPUs (within 0.005), input gradients 0.89
    (H100) and 0.92 (H200), 0.90 taken for both (within 0.02)."""
    forward, backward = _measured_ratios(table, "forward"), _measured_ratios(table, "input_grad")
    assert len(forward) > 500 and len(backward) > 50
    assert statistics.median(forward) == pytest.approx(FP8_GEMM_EFFICIENCY["hopper"]["forward"], abs=0.005)
    assert statistics.median(backward) == pytest.approx(FP8_GEMM_EFFICIENCY["hopper"]["backward"], abs=0.02)


def test_blackwell_ratio_follows_the_same_method_comparison_of_the_two_generations():
    """stas00/ml-engineering's best-shape table: H100 SXM fp8 70.9% / bf16 80.3%, B200 76.3% / 77.6%. B200's ratio is
    Hopper's measured one times the table's B200-over-H100 factor, capped at 1 (no fp8 GEMM beats its bf16 twin's
    share); an fp8 GPU of another generation (Ada) takes Hopper's."""
    factor = (76.3 / 77.6) / (70.9 / 80.3)
    for role, hopper in FP8_GEMM_EFFICIENCY["hopper"].items():
        assert fp8_gemm_ratio("blackwell", role) == pytest.approx(min(1.0, hopper * factor), abs=0.005)
        assert fp8_gemm_ratio("ada", role) == hopper


@pytest.mark.parametrize("gpu", ["H100-SXM5-80GB", "B200-180GB"])
def test_a_compute_bound_fp8_gemm_runs_at_the_ratio_of_the_bf16_share(gpu):
    """Hand-computed: a large GEMM's fp8 time = its bf16 time x (bf16 peak / fp8 peak) / ratio, by role."""
    spec = gpu_spec(gpu)
    gemms = [("g", 8192, 8192, 8192)]
    bf16, fp8 = ComputeModel(spec, "bf16"), ComputeModel(spec, "fp8")
    half = bf16._gemms_s(gemms, BLOCK, 1)["g"]
    for role in ("forward", "backward"):
        expected = half * spec.peak_tflops("bf16") / spec.peak_tflops("fp8") / fp8_gemm_ratio(spec.arch, role)
        assert fp8._gemms_s(gemms, BLOCK, 1, role)["g"] == pytest.approx(expected, rel=1e-9)


def _job(framework: str | None = None, precision: str = "fp8", **fields: object) -> TrainingSpec:
    spec = TrainingSpec(model=MODEL, seq_len=4096, micro_batch=1, precision=precision, framework=framework,
                        **fields)
    return with_framework(spec)


@pytest.mark.parametrize("framework", ["megatron-core", "nemo"])
def test_megatron_frameworks_cache_fp8_weights(framework):
    assert _job(framework).fp8_weight_cache is True
    assert _job(framework, precision="bf16").fp8_weight_cache is False  # nothing to cast
    assert _job(framework, fp8_weight_cache=False).fp8_weight_cache is False  # a stated value wins


@pytest.mark.parametrize("framework", [None, "fsdp2", "pytorch-fsdp", "deepspeed"])
def test_other_frameworks_cast_every_micro_batch(framework):
    assert _job(framework).fp8_weight_cache is False


def test_cached_weights_are_cast_once_a_step():
    """Hand-computed: over 8 micro-batches a cached weight's cast (FP8_CAST_BYTES an element) is paid on one,
    so each micro-batch's forward is 7/8 of the block's weight elements' cast shorter; backward is unchanged."""
    cached = ComputeModel.for_job(H100, _job(fp8_weight_cache=True), micro_steps=8)
    every = ComputeModel.for_job(H100, _job(fp8_weight_cache=False), micro_steps=8)
    weights = sum(k * n for _, _, n, k in BLOCK.sharded_layer_gemms(4096, 1))
    saved_s = 7 / 8 * weights * FP8_CAST_BYTES / every.hbm_Bps
    a, b = cached.layer(BLOCK, 1, 4096, "none"), every.layer(BLOCK, 1, 4096, "none")
    assert b.forward_s - a.forward_s == pytest.approx(saved_s, rel=1e-9)
    assert a.backward_s == pytest.approx(b.backward_s, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(micro_steps=st.integers(1, 64), precision=st.sampled_from(["bf16", "fp8"]))
def test_the_weight_cache_never_slows_and_is_moot_for_one_micro_batch_or_bf16(micro_steps, precision):
    cached = ComputeModel.for_job(H100, _job(precision=precision, fp8_weight_cache=True), micro_steps=micro_steps)
    every = ComputeModel.for_job(H100, _job(precision=precision, fp8_weight_cache=False), micro_steps=micro_steps)
    a, b = cached.layer(BLOCK, 1, 4096, "full"), every.layer(BLOCK, 1, 4096, "full")
    assert a.total_s <= b.total_s
    if micro_steps == 1 or precision == "bf16":
        assert a.total_s == b.total_s


def test_a_step_of_more_micro_batches_casts_less_per_micro_batch_under_the_cache():
    """Metamorphic, through predict_step: a cached-weight fp8 job's extra micro-batches cost less than the same
    job's without the cache (the weight cast is paid once a step), and its step is never longer."""
    topology = load_preset("dgx-h100", nodes=1)

    def compute_s(cache: bool, accumulation: int) -> float:
        job = _job(fp8_weight_cache=cache, parallel=ParallelSpec(tp=8), global_batch=accumulation)
        return predict_step(topology, job, MODEL).compute_s

    cached, every = [compute_s(True, n) for n in (4, 8)], [compute_s(False, n) for n in (4, 8)]
    assert cached[1] - cached[0] < (every[1] - every[0]) * (1 - 1e-3)
    assert cached[0] <= every[0] and cached[1] <= every[1]


def test_the_layout_search_estimate_casts_cached_weights_once_a_step():
    """The search's closed-form estimate prices a layout's weight casts as predict_step does: with the cache, a
    layout of 8 micro-batches is estimated faster than the same layout casting on every micro-batch."""
    topology = load_preset("dgx-h100", nodes=1)
    cluster = build(topology)
    block_model = transformer(MODEL)
    layout = CandidateLayout(tp=8, pp=1, dp=1, micro_batch=1, micro_steps=8, strategy="zero1", recompute="none",
                             sequence_parallel=True)
    compute = ComputeModel(cluster.gpu, "fp8")
    estimates = [estimate_step_s(layout, layout.training(_job("nemo", fp8_weight_cache=cache, global_batch=8)),
                                 block_model, compute, comm_view(cluster), 4096) for cache in (True, False)]
    assert estimates[0] < estimates[1] * (1 - 1e-3)
