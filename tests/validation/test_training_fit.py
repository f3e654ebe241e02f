"""The leave-one-source-out fit of the attention efficiency factor (simulator.validation.training_fit)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.training.compute import ATTENTION_EFFICIENCY_BY_KERNEL
from simulator.validation.training_cases import map_case, parse_cases
from simulator.validation.training_fit import (
    ATTENTION_FACTORS,
    MIN_SOURCES,
    CaseCurve,
    crossval_by_source,
    crossval_to_json,
    fit_factors,
)

GRID = ATTENTION_FACTORS
CASES = Path(__file__).resolve().parents[3] / "shared" / "data" / "training" / "cases.yaml"


def curve(case_id: str, source: str, arch: str, published: float, truth: float) -> CaseCurve:
    """A case whose predicted throughput grows as factor^0.3 and equals `published` at factor `truth`."""
    return CaseCurve(case_id, source, arch, published,
                     tuple(published * (f / truth) ** 0.3 for f in GRID))


def test_interpolation_is_exact_at_the_grid_and_log_linear_between():
    """At a grid factor the prediction is the one made there; between two, a power law through both."""
    c = curve("a", "s", "hopper", 100.0, 1.0)
    assert c.at(1.25, GRID) == pytest.approx(100.0 * 1.25**0.3, rel=1e-12)
    assert c.at(1.1, GRID) == pytest.approx(100.0 * 1.1**0.3, rel=1e-9)


def test_the_fit_recovers_each_generations_factor():
    """Hopper cases agreeing at x0.8 and Ampere ones at x1.25, each from two sources: the fit finds each within the
    fine grid's step."""
    cases = [curve(f"h{s}{i}", s, "hopper", 100.0 + i, 0.8) for s in ("s1", "s2") for i in range(5)]
    cases += [curve(f"a{s}{i}", s, "ampere", 50.0 + i, 1.25) for s in ("s1", "s3") for i in range(5)]
    fitted = fit_factors(cases, GRID)
    assert fitted["hopper/flash2"] == pytest.approx(0.8, rel=0.03)
    assert fitted["ampere/flash2"] == pytest.approx(1.25, rel=0.03)


def test_a_source_is_predicted_with_factors_fitted_without_it():
    """Two sources agree on x0.8, a third says x1.6: held out, the third is predicted at ~x0.8 (its error is what
    the others' fit leaves), and a generation only one source has stays at the prior factor 1, in its fold and
    in sample alike (one source cannot tell the kernel's rate from its own setup)."""
    cases = [curve(f"{s}{i}", s, "hopper", 100.0, 0.8) for s in ("a", "b") for i in range(3)]
    cases += [curve(f"c{i}", "c", "hopper", 100.0, 1.6) for i in range(3)]
    cases += [curve("v0", "d", "volta", 10.0, 0.6)]
    result = crossval_by_source(cases, GRID)
    folds = {f.source: f for f in result.folds}
    assert folds["c"].factors["hopper/flash2"] == pytest.approx(0.8, rel=0.03)
    assert folds["c"].median_abs_pct_error == pytest.approx(100 * (1 - (0.8 / 1.6) ** 0.3), rel=0.05)
    assert folds["a"].median_abs_pct_error < 1.0 and folds["d"].factors == {"volta/flash2": 1.0}
    assert result.fitted["volta/flash2"] == 1.0
    assert result.median_abs_pct_error >= result.in_sample_median_abs_pct_error


@pytest.mark.skipif(not CASES.exists(), reason="the shared training cases are not beside the checkout")
def test_crossval_source_runs_end_to_end_on_published_cases():
    """validate-training --crossval source --json on one source's cases: a crossval section with the pooled
    held-out error and the source's fold (one source alone: its generations are not identified, factor 1)."""
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "validate-training", str(CASES), "--source",
                          "llmfoundry-1b-h100", "--crossval", "source", "--json"], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr
    crossval = json.loads(out.stdout)["crossval"]
    assert crossval["median_abs_pct_error"] == crossval["prior_median_abs_pct_error"]
    assert set(crossval["sources"]) == {"llmfoundry"}


def test_cases_the_factor_does_not_move_do_not_fit_it():
    """Cases whose prediction does not move across the grid (no fused attention kernel) are left out of the fit:
    a generation with only such cases keeps the prior factor 1, and they cannot outvote the cases it moves."""
    flat = [CaseCurve(f"f{i}", "s", "ampere", 100.0, tuple(100.0 * (1.2 + 0.001 * i) for _ in GRID)) for i in range(9)]
    assert fit_factors(flat, GRID) == {"ampere/flash2": 1.0}
    moving = [curve(f"m{t}{i}", t, "ampere", 100.0, 0.8) for t in ("t", "u") for i in range(3)]
    assert fit_factors(flat + moving, GRID)["ampere/flash2"] == pytest.approx(0.8, rel=0.03)


def test_each_kernel_of_a_generation_has_its_own_factor():
    """Hopper runs on two kernels, FlashAttention-2 true at x1.0 and Triton at x0.8: each group is fitted to its
    own, and a source held out whose kernel no other source ran is predicted with that kernel's prior (factor 1),
    not with the other kernel's factor."""
    cases = [replace(curve(f"f{s}{i}", s, "hopper", 100.0, 1.0), kernel="flash2") for s in "ab" for i in range(3)]
    cases += [replace(curve(f"t{s}{i}", s, "hopper", 100.0, 0.8), kernel="triton") for s in "cd" for i in range(9)]
    fitted = fit_factors(cases, GRID)
    assert fitted["hopper/flash2"] == pytest.approx(1.0, rel=0.03)
    assert fitted["hopper/triton"] == pytest.approx(0.8, rel=0.03)
    folds = {f.source: f for f in crossval_by_source(cases, GRID).folds}
    assert folds["a"].factors == {"hopper/flash2": 1.0}  # only b informs it besides a: not identified
    assert folds["c"].factors == {"hopper/triton": 1.0}  # only d runs Triton besides c: not identified


def test_llm_foundry_benchmark_runs_are_lowered_with_the_triton_kernel():
    """LLM Foundry's MPT benchmark tables ran MPT's Triton attention (the benchmark script's attn_impl default),
    Megatron-Core and NeMo cuDNN's, the rest FlashAttention-2; on Hopper the kernels are priced apart."""
    if not CASES.exists():
        pytest.skip("the shared training cases are not beside the checkout")
    kernels: dict[str, set[str]] = {}
    for case in parse_cases(CASES.read_text(), str(CASES)):
        mapped = map_case(case)
        if mapped.training is not None:
            kernels.setdefault(case.source, set()).add(mapped.training.attention_kernel)
    assert kernels["llmfoundry"] == {"triton"} and kernels["nemo"] == {"cudnn"} and kernels["torchtitan"] == {"flash2"}
    assert set(ATTENTION_EFFICIENCY_BY_KERNEL) == {"flash2", "cudnn", "triton", "flash1"}
    assert ATTENTION_EFFICIENCY_BY_KERNEL["cudnn"]["hopper"] > ATTENTION_EFFICIENCY_BY_KERNEL["flash2"]["hopper"]
    # FlashAttention-2 paper (Dao 2023, abstract): "around 2x speedup compared to FlashAttention", which reached
    # 25-40% of an A100's peak
    flash1 = ATTENTION_EFFICIENCY_BY_KERNEL["flash1"]
    assert all(flash1[arch] == pytest.approx(e / 2) for arch, e in ATTENTION_EFFICIENCY_BY_KERNEL["flash2"].items())
    assert 0.25 <= flash1["ampere"] <= 0.40


def test_a_factor_one_source_informs_is_not_fitted():
    """However many runs one source has, they share its framework, cluster and way of counting: their group stays
    at the prior until MIN_SOURCES sources inform it, and the JSON names the sources that do."""
    one = [curve(f"a{i}", "a", "hopper", 100.0, 0.7) for i in range(40)]
    assert MIN_SOURCES == 2 and fit_factors(one, GRID) == {"hopper/flash2": 1.0}
    two = one + [curve(f"b{i}", "b", "hopper", 100.0, 0.7) for i in range(2)]
    assert fit_factors(two, GRID)["hopper/flash2"] == pytest.approx(0.7, rel=0.03)
    report = crossval_to_json(crossval_by_source(two, GRID))
    assert report["informing_sources"] == {"hopper/flash2": ["a", "b"]} and report["min_sources"] == 2
