"""Fitting what published training runs inform, and the error on runs the fit did not see.

The constant fitted is the attention kernels' efficiency, per GPU generation and kernel (FlashAttention-2,
cuDNN's fused attention, MPT's Triton kernel: TrainingSpec.attention_kernel): a factor on the table of
simulator.training.compute (ATTENTION_EFFICIENCY_BY_KERNEL), the one figure of the compute model that the
kernels' own benchmarks do not settle (they count a causal mask's work and the backward differently from
training runs, see that module). One factor per generation across kernels would make a kernel's runs pay
for another's: LLM Foundry's 49 H100 runs (Triton kernel, too fast at FlashAttention-2's rate as their
sequences grow) pulled the shared Hopper factor to 0.78-0.90, and NeMo's and torchtitan's runs (cuDNN,
FlashAttention-2) held out were then 15-17% and 8-9% off. GEMM rates come from cuBLAS benchmarks and the
collective model from nccl-tests logs, so they are not refitted here.

Procedure (rerunnable: `clustersim validate-training CASES --crossval source`):
1. Every case is predicted at each factor of ATTENTION_FACTORS (the whole grid, once).
2. A case's prediction between grid points is interpolated linearly in log(prediction) over
   log(factor) (the step time is close to affine in the attention time, so this is smooth and exact at
   the grid points).
3. Leave one source out: for each source, each (GPU generation, kernel) group's factor is the one (on a
   fine grid between the smallest and largest of ATTENTION_FACTORS) that minimises the median |error|
   over the OTHER sources' expressed cases of that group that the factor moves (MIN_SENSITIVITY: a run
   whose attention is not a fused kernel does not inform it). A group is identified only when such cases
   come from MIN_SOURCES sources or more; otherwise it is left at the prior (factor 1, the kernel's
   benchmark). One source's runs share one framework release, one cluster and one way of counting, so
   they cannot tell the kernel's rate from their own setup: fitted on one source, the Megatron README's
   four H100 runs set Hopper's cuDNN factor to 0.92 and NeMo's runs held out were 10.0% off instead of
   6.2% at the prior, and three Megatron runs each put Ampere's and Volta's factors at 1.25 and 1.6 (the
   grid's bound), which made even the in-sample error worse. The held-out source's cases are predicted
   with the factors of its fold.
4. The leave-one-source-out error is the median |error| over all held-out predictions pooled, and per
   source; the in-sample fit (every source) gives the factors a user would adopt.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from simulator.validation.training_report import TrainingReport
from topologies.hardware import gpu_spec

ATTENTION_FACTORS = (0.6, 0.8, 1.0, 1.25, 1.6)
FINE_STEPS = 49  # candidate factors tried between the grid's ends (log-spaced)
# a case informs the factor when its prediction moves at least this much (log ratio) across the grid, a
# 2.7x change of the attention rate: below it attention is under about 5% of the step (runs without a fused
# attention kernel, whose scores are memory-bound, or with short sequences), and such cases, outnumbering
# the others, would pull the factor to whatever corrects their own, unrelated, error (BLOOM's 72 runs:
# 2.3% median sensitivity, 13% too fast for reasons of their TP cost)
MIN_SENSITIVITY = 0.05
MIN_SOURCES = 2  # sources whose cases must inform a group for its factor to be fitted (module docstring)


@dataclass(frozen=True)
class CaseCurve:
    """One expressed case: its source, GPU generation, published metric, predictions at the grid and the
    attention kernel it ran."""

    id: str
    source: str
    arch: str
    published: float
    predicted: tuple[float, ...]  # at ATTENTION_FACTORS (or the grid it was swept on)
    kernel: str = "flash2"

    @property
    def group(self) -> str:
        """What one factor is fitted for: "generation/kernel" (e.g. hopper/cudnn)."""
        return f"{self.arch}/{self.kernel}"

    def at(self, factor: float, grid: Sequence[float]) -> float:
        """The prediction at `factor`, log-log interpolated between grid points."""
        return math.exp(float(np.interp(math.log(factor), np.log(grid), np.log(self.predicted))))

    def abs_pct_error(self, factor: float, grid: Sequence[float]) -> float:
        return 100.0 * abs(self.at(factor, grid) - self.published) / self.published

    @property
    def sensitivity(self) -> float:
        """How much the prediction moves across the grid: |log(last / first)|."""
        return abs(math.log(self.predicted[-1] / self.predicted[0]))


@dataclass(frozen=True)
class Fold:
    """One source held out: the factors fitted without it and its cases' errors with them."""

    source: str
    factors: dict[str, float]  # per group (CaseCurve.group); a group the other sources do not identify stays at 1.0
    errors: dict[str, float]  # case id -> |error| %
    prior_errors: dict[str, float]  # case id -> |error| % with the prior table (factor 1)

    @property
    def median_abs_pct_error(self) -> float:
        return float(np.median(list(self.errors.values())))

    @property
    def prior_median_abs_pct_error(self) -> float:
        return float(np.median(list(self.prior_errors.values())))


@dataclass(frozen=True)
class TrainingCrossval:
    """Leave-one-source-out folds and the in-sample fit."""

    grid: tuple[float, ...]
    folds: tuple[Fold, ...]
    fitted: dict[str, float]  # per group (CaseCurve.group), fitted on every source
    in_sample_median_abs_pct_error: float
    prior_median_abs_pct_error: float
    cases: tuple[CaseCurve, ...] = ()

    @property
    def median_abs_pct_error(self) -> float:
        """Leave-one-source-out: every held-out prediction pooled."""
        return float(np.median([e for fold in self.folds for e in fold.errors.values()]))


def curves(reports: Mapping[float, TrainingReport]) -> list[CaseCurve]:
    """The expressed cases of reports predicted at each grid factor (keys), as curves over the grid."""
    grid = sorted(reports)
    by_factor = [{r.id: r for r in reports[f].cases} for f in grid]
    out = []
    for r in reports[grid[0]].cases:
        points = [p for i in range(len(grid)) if (p := by_factor[i][r.id].predicted) is not None and p > 0]
        if r.published and r.gpu and len(points) == len(grid):
            out.append(CaseCurve(r.id, r.source, gpu_spec(r.gpu).arch, r.published, tuple(points),
                                 r.attention_kernel or "flash2"))
    return out


def informing_sources(cases: Sequence[CaseCurve]) -> dict[str, set[str]]:
    """Per group (GPU generation and kernel), the sources of the `cases` the factor moves (MIN_SENSITIVITY)."""
    sources: dict[str, set[str]] = {c.group: set() for c in cases}
    for c in cases:
        if c.sensitivity >= MIN_SENSITIVITY:
            sources[c.group].add(c.source)
    return sources


def fit_factors(cases: Sequence[CaseCurve], grid: Sequence[float]) -> dict[str, float]:
    """Per group (GPU generation and kernel), the factor minimising the median |error| of the `cases` it moves
    (at least MIN_SENSITIVITY across the grid; ties: the nearest to 1); a group whose moved cases come from
    fewer than MIN_SOURCES sources is not identified and stays at 1."""
    candidates = np.exp(np.linspace(math.log(min(grid)), math.log(max(grid)), FINE_STEPS))
    fitted = {}
    for group, sources in sorted(informing_sources(cases).items()):
        mine = [c for c in cases if c.group == group and c.sensitivity >= MIN_SENSITIVITY]
        if len(sources) < MIN_SOURCES:
            fitted[group] = 1.0
            continue
        scored = [(float(np.median([c.abs_pct_error(f, grid) for c in mine])), abs(math.log(f)), float(f))
                  for f in candidates]
        fitted[group] = min(scored)[2]
    return fitted


def crossval_by_source(cases: Sequence[CaseCurve], grid: Sequence[float]) -> TrainingCrossval:
    """Leave each source out, fit on the others, predict it (module docstring)."""
    folds = []
    for source in sorted({c.source for c in cases}):
        held = [c for c in cases if c.source == source]
        factors = fit_factors([c for c in cases if c.source != source], grid)
        factors = {c.group: factors.get(c.group, 1.0) for c in held}
        folds.append(Fold(source, factors, {c.id: c.abs_pct_error(factors[c.group], grid) for c in held},
                          {c.id: c.abs_pct_error(1.0, grid) for c in held}))
    fitted = fit_factors(cases, grid)
    return TrainingCrossval(
        tuple(grid), tuple(folds), fitted,
        float(np.median([c.abs_pct_error(fitted[c.group], grid) for c in cases])),
        float(np.median([c.abs_pct_error(1.0, grid) for c in cases])), tuple(cases))


def sweep_reports(evaluate_at: Callable[[float], TrainingReport],
                  grid: Sequence[float] = ATTENTION_FACTORS) -> dict[float, TrainingReport]:
    """Every case predicted at each factor of the grid (`evaluate_at(factor)` runs the cases)."""
    return {factor: evaluate_at(factor) for factor in grid}


def crossval_to_json(result: TrainingCrossval) -> dict[str, object]:
    """The `validate-training --crossval source --json` section."""
    def r(x: float) -> float:
        return round(x, 2)
    return {
        "constant": "attention efficiency factor per GPU generation and kernel", "grid": list(result.grid),
        "median_abs_pct_error": r(result.median_abs_pct_error),
        "prior_median_abs_pct_error": r(result.prior_median_abs_pct_error),
        "in_sample_median_abs_pct_error": r(result.in_sample_median_abs_pct_error),
        "fitted_factors": {arch: round(f, 3) for arch, f in result.fitted.items()},
        "min_sources": MIN_SOURCES,
        "informing_sources": {group: sorted(s) for group, s in sorted(informing_sources(result.cases).items())},
        "sources": {fold.source: {"cases": len(fold.errors), "median_abs_pct_error": r(fold.median_abs_pct_error),
                                  "prior_median_abs_pct_error": r(fold.prior_median_abs_pct_error),
                                  "factors": {arch: round(f, 3) for arch, f in fold.factors.items()}}
                    for fold in result.folds},
        "cases": {c.id: {"source": c.source, "arch": c.arch, "published": c.published,
                         "kernel": c.kernel, "predicted_at_grid": [round(x, 4) for x in c.predicted]}
                  for c in result.cases},
    }
